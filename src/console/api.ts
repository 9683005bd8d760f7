/**
 * The console's JSON API (`/api/console/…`), one entry per endpoint. The server has already
 * checked the session (and, for changes, the CSRF token); each handler validates its input
 * before it changes anything and answers a clear 4xx when it is wrong.
 */
import type { HttpRoute } from '../route.ts';
import type { MemoryEntry, MemoryScope, MemoryWho } from '../memory.ts';
import type { Session } from './auth.ts';
import type { ConsoleDeps } from './deps.ts';
import { HttpError, optStr, query, send, str } from './http.ts';
import { chatRoutes } from './api-chat.ts';

/** What the console hands an API route besides the request and the response. */
export interface ApiContext {
  readonly url: URL;
  readonly session: Session;
  readonly deps: ConsoleDeps;
  /** The JSON object body (415 / 400 / 413 when it is not one, or too large). */
  json(): Promise<Record<string, unknown>>;
}

/** An endpoint of the console's API: the gateway's route type, handed the console's context. */
export type ApiRoute = HttpRoute<ApiContext>;

const scopes: readonly MemoryScope[] = ['person', 'conversation', 'shared'];

function need<T>(value: T | undefined, what: string): T {
  if (value === undefined) throw new HttpError(404, `${what} is not available in this daemon`);
  return value;
}

/** Whose view a memory belongs to, for `store` (which replaces by scope + owner + key). */
function whoOwns(entry: MemoryEntry): MemoryWho {
  return entry.scope === 'person' ? { person: entry.owner, conversation: '' } : { person: '', conversation: entry.scope === 'conversation' ? entry.owner : '' };
}

async function findMemory(deps: ConsoleDeps, id: string): Promise<MemoryEntry> {
  const memory = need(deps.memory, 'memory');
  const entry = (await memory.list({ limit: 100_000 })).find((candidate) => candidate.id === id);
  if (!entry) throw new HttpError(404, `no memory with id "${id}"`);
  return entry;
}

const words = (text: string): string[] => text.toLowerCase().split(/\W+/u).filter((word) => word.length > 1);

export const apiRoutes: readonly ApiRoute[] = [
  { method: 'GET', path: '/api/console/stream', auth: 'session', handle: async () => undefined }, // served by stream.ts
  {
    method: 'GET',
    path: '/api/console/overview',
    auth: 'session',
    handle: async (_request, response, { deps }) => send(response, 200, await deps.overview()),
  },
  {
    method: 'POST',
    path: '/api/console/channels/restart',
    auth: 'session',
    handle: async (_request, response, { deps, json, session }) => {
      const name = str(await json(), 'name', 64);
      if (!deps.restartChannel(name)) throw new HttpError(404, `no channel named "${name}"`);
      deps.log.info({ target: name, operator: session.operator }, 'console: channel restarted by the operator');
      send(response, 200, { ok: true });
    },
  },
  {
    method: 'GET',
    path: '/api/console/conversations',
    auth: 'session',
    handle: async (_request, response, { deps, url }) => {
      const text = query(url, 'q', 200)?.trim();
      if (text) send(response, 200, { hits: await deps.queries.search(text, 100) });
      else send(response, 200, { conversations: await deps.queries.conversations(200) });
    },
  },
  {
    method: 'GET',
    path: '/api/console/transcript',
    auth: 'session',
    handle: async (_request, response, { deps, url }) => {
      const conversation = query(url, 'c', 400);
      if (!conversation) throw new HttpError(400, 'query parameter "c" (the conversation key) is required');
      send(response, 200, { conversation, entries: await deps.queries.transcript(conversation, 500), recalls: deps.recalls?.(conversation) ?? [] });
    },
  },
  {
    method: 'GET',
    path: '/api/console/access',
    auth: 'session',
    handle: async (_request, response, { deps }) => {
      const pending = deps.pairing ? await deps.pairing.pending() : [];
      // null (not undefined, which JSON drops) marks a channel that pairs instead of having an allow list.
      const allow = Object.fromEntries(Object.entries(deps.allowLists()).map(([channel, list]) => [channel, list ?? null]));
      send(response, 200, { pending, approved: await deps.queries.approvedSenders(), allow });
    },
  },
  {
    method: 'POST',
    path: '/api/console/pairing/approve',
    auth: 'session',
    handle: async (_request, response, { deps, json, session }) => {
      const body = await json();
      const channel = str(body, 'channel', 64);
      const code = str(body, 'code', 32);
      const sender = await need(deps.pairing, 'pairing').approve(channel, code);
      if (sender === undefined) throw new HttpError(404, `no pending code ${code} on ${channel} (expired, or already approved)`);
      deps.log.info({ target: channel, sender, operator: session.operator }, 'console: pairing code approved');
      send(response, 200, { ok: true, sender });
    },
  },
  {
    method: 'POST',
    path: '/api/console/pairing/deny',
    auth: 'session',
    handle: async (_request, response, { deps, json, session }) => {
      const body = await json();
      const channel = str(body, 'channel', 64);
      const code = str(body, 'code', 32);
      if (!(await deps.queries.denyCode(channel, code))) throw new HttpError(404, `no pending code ${code} on ${channel}`);
      deps.log.info({ target: channel, code, operator: session.operator }, 'console: pairing code denied');
      send(response, 200, { ok: true });
    },
  },
  {
    method: 'POST',
    path: '/api/console/access/revoke',
    auth: 'session',
    handle: async (_request, response, { deps, json, session }) => {
      const body = await json();
      const channel = str(body, 'channel', 64);
      const senderId = str(body, 'senderId', 400);
      if (!(await deps.queries.revokeSender(channel, senderId))) throw new HttpError(404, `${senderId} is not an approved sender on ${channel}`);
      deps.log.info({ target: channel, sender: senderId, operator: session.operator }, 'console: approved sender revoked');
      send(response, 200, { ok: true });
    },
  },
  {
    method: 'GET',
    path: '/api/console/approvals',
    auth: 'session',
    handle: async (_request, response, { deps }) => send(response, 200, { approvals: await deps.queries.pendingApprovals() }),
  },
  {
    method: 'POST',
    path: '/api/console/approvals/deny',
    auth: 'session',
    handle: async (_request, response, { deps, json, session }) => {
      const conversation = str(await json(), 'conversation', 400);
      const open = (await deps.queries.pendingApprovals()).some((row) => row.conversation === conversation);
      if (!open) throw new HttpError(404, `no open approval in ${conversation}`);
      await deps.approvals.clear(conversation);
      deps.log.info({ conversation, operator: session.operator }, 'console: tool approval denied by the operator');
      send(response, 200, { ok: true });
    },
  },
  {
    method: 'GET',
    path: '/api/console/memory',
    auth: 'session',
    handle: async (_request, response, { deps, url }) => {
      const memory = need(deps.memory, 'memory');
      const person = query(url, 'person', 400);
      const scope = query(url, 'scope', 20);
      if (scope !== undefined && !scopes.includes(scope as MemoryScope)) throw new HttpError(400, `"scope" must be one of ${scopes.join(', ')}`);
      const text = query(url, 'q', 200)?.trim();
      let entries: MemoryEntry[];
      if (text && person) entries = await memory.recall(text, { person, conversation: '' }, { limit: 50 });
      else {
        entries = await memory.list({ ...(person ? { owner: person, scope: 'person' as const } : scope ? { scope: scope as MemoryScope } : {}), limit: 1000 });
        if (text) {
          const wanted = words(text);
          entries = entries.filter((entry) => wanted.some((word) => `${entry.key} ${entry.content}`.toLowerCase().includes(word)));
        }
      }
      const people = [...new Set((await memory.list({ scope: 'person', limit: 5000 })).map((entry) => entry.owner))].sort();
      send(response, 200, { backend: memory.name, people, entries });
    },
  },
  {
    method: 'POST',
    path: '/api/console/memory/forget',
    auth: 'session',
    handle: async (_request, response, { deps, json, session }) => {
      const id = str(await json(), 'id', 200);
      const entry = await findMemory(deps, id);
      if (!(await need(deps.memory, 'memory').forget(entry.id, 'operator'))) throw new HttpError(409, `the ${deps.memory!.name} backend did not forget ${id}`);
      deps.log.info({ memory: id, operator: session.operator }, 'console: memory forgotten');
      send(response, 200, { ok: true });
    },
  },
  {
    method: 'POST',
    path: '/api/console/memory/edit',
    auth: 'session',
    handle: async (_request, response, { deps, json, session }) => {
      const body = await json();
      const id = str(body, 'id', 200);
      const content = str(body, 'content', 20_000);
      const entry = await findMemory(deps, id);
      const saved = await need(deps.memory, 'memory').store({ content, key: entry.key, category: entry.category, scope: entry.scope }, whoOwns(entry));
      deps.log.info({ memory: id, operator: session.operator }, 'console: memory edited');
      send(response, 200, { ok: true, entry: saved });
    },
  },
  {
    method: 'POST',
    path: '/api/console/memory/add-shared',
    auth: 'session',
    handle: async (_request, response, { deps, json, session }) => {
      const body = await json();
      const content = str(body, 'content', 20_000);
      const key = optStr(body, 'key', 200);
      const saved = await need(deps.memory, 'memory').store({ content, scope: 'shared', ...(key ? { key } : {}) }, { person: '', conversation: '' });
      deps.log.info({ memory: saved.id, operator: session.operator }, 'console: shared memory added');
      send(response, 200, { ok: true, entry: saved });
    },
  },
  {
    method: 'GET',
    path: '/api/console/memory/export',
    auth: 'session',
    handle: async (_request, response, { deps, url }) => {
      const person = query(url, 'person', 400);
      const entries = await need(deps.memory, 'memory').list({ ...(person ? { owner: person, scope: 'person' as const } : {}), limit: 100_000 });
      const name = `memories${person ? `-${person.replace(/[^A-Za-z0-9_-]+/g, '_')}` : ''}.json`;
      send(response, 200, entries, { 'content-disposition': `attachment; filename="${name}"` });
    },
  },
  {
    method: 'GET',
    path: '/api/console/tools',
    auth: 'session',
    handle: async (_request, response, { deps }) => send(response, 200, { tools: deps.tools(), clients: deps.remoteClients(), calls: deps.toolCalls() }),
  },
  {
    method: 'GET',
    path: '/api/console/logs',
    auth: 'session',
    handle: async (_request, response, { deps }) => send(response, 200, { lines: deps.logs?.lines() ?? [] }),
  },
  {
    method: 'GET',
    path: '/api/console/config',
    auth: 'session',
    handle: async (_request, response, { deps }) => {
      const config = need(deps.config, 'the config page');
      let text: string;
      try {
        text = await config.read();
      } catch (error) {
        // (by name: mask.ts is loaded only with the Config page)
        if (error instanceof Error && error.name === 'UnshowableConfig') throw new HttpError(422, `${error.message}; fix it on disk (\`switchboard reload\` names the problem) — it is not shown here, so that no secret in it reaches the page`);
        throw error;
      }
      send(response, 200, { file: config.file, text, effective: await config.effective() });
    },
  },
  {
    method: 'POST',
    path: '/api/console/config/validate',
    auth: 'session',
    maxBodyBytes: 512 * 1024,
    handle: async (_request, response, { deps, json }) => {
      const text = str(await json(), 'text', 400_000, true);
      const problems = await need(deps.config, 'the config page').validate(text);
      send(response, 200, { ok: problems.length === 0, problems });
    },
  },
  {
    method: 'POST',
    path: '/api/console/config/save',
    auth: 'session',
    maxBodyBytes: 512 * 1024,
    handle: async (_request, response, { deps, json, session }) => {
      const text = str(await json(), 'text', 400_000, true);
      const result = await need(deps.config, 'the config page').save(text);
      if (result.problems.length > 0) {
        send(response, 422, { ok: false, problems: result.problems });
        return;
      }
      deps.log.info({ operator: session.operator }, 'console: config saved and reloaded');
      send(response, 200, { ok: true, reload: result.reload });
    },
  },
  {
    method: 'POST',
    path: '/api/console/config/reload',
    auth: 'session',
    handle: async (_request, response, { deps }) => {
      const result = await need(deps.config, 'the config page').reload();
      send(response, result.ok ? 200 : 422, result);
    },
  },
  ...chatRoutes,
];
