/**
 * Wires the web console onto the gateway. Nothing of the console is loaded at start: the
 * gateway's fallback imports src/console/server.ts (and builds the queries) on the first
 * request, so a daemon whose console is never opened starts and idles as before.
 */
import { chmod, copyFile, readFile, rename, writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { ConfigError, formatProblems, parseConfig } from './config.ts';
import type { Config } from '../src/config/schema.ts';
import type { ConfigPort, ConsoleDeps, RecallRecord, ReloadOutcome } from '../src/console/deps.ts';
import type { Memory, MemoryWho, RecallOptions } from '../src/memory.ts';
import { BoundedMap } from '../src/bounded-map.ts';

/** dist/console, from app/console.ts (source) or dist/app/console.js (built). */
export function consoleStaticDir(): string {
  const here = dirname(fileURLToPath(import.meta.url));
  return basename(dirname(here)) === 'dist' ? join(dirname(here), 'console') : join(dirname(here), 'dist', 'console');
}

type Fallback = (request: IncomingMessage, response: ServerResponse) => Promise<void>;

/**
 * The gateway fallback that loads the console on first use. `deps` is called once, then.
 * @example gateway.setFallback(lazyConsole(() => consoleDeps(...)))
 */
export function lazyConsole(deps: () => Promise<ConsoleDeps>): Fallback {
  let handler: Promise<Fallback> | undefined;
  return async (request, response) => {
    handler ??= (async () => {
      const started = performance.now();
      const { createConsole } = await import('../src/console/server.ts');
      const built = await deps();
      const handle = createConsole(built);
      built.log.info({ ms: Math.round(performance.now() - started) }, 'web console loaded (first request)');
      return handle;
    })();
    await (await handler)(request, response);
  };
}

/** The Config page's file operations: validate like the CLI, save with a .bak, reload. */
export function configPort(options: { file: string; current: () => Config; reload: ConfigPort['reload'] }): ConfigPort {
  const { file } = options;
  const loadMask = (): Promise<typeof import('../src/console/mask.ts')> => import('../src/console/mask.ts');
  /**
   * The CLI's messages for `text`, without a secret in them: a problem at a secret key says what
   * is wrong but not what it got, and any secret of the text or the file still in a message is
   * masked (the page is no place for them, even the operator's own).
   */
  const problemsOf = async (text: string, original: string): Promise<string[]> => {
    const { isSecretPath, scrub, secretsOf } = await loadMask();
    let lines: string[];
    try {
      parseConfig(text, file);
      return [];
    } catch (error) {
      if (error instanceof ConfigError) {
        const problems = error.problems.map((problem) =>
          isSecretPath(problem.path.split('.').map((part) => (/^\d+$/.test(part) ? Number(part) : part))) ? { ...problem, problem: problem.problem.replace(/, got [\s\S]*$/, '') } : problem,
        );
        lines = formatProblems(error.file, problems, '').trim().split('\n');
      } else lines = [error instanceof Error ? error.message : String(error)];
    }
    const secrets = [...secretsOf(text), ...secretsOf(original)];
    return lines.map((line) => scrub(line, secrets));
  };
  /** A reload's outcome; its error (the file's problems, as the CLI prints them) without secrets. */
  const reload = async (): Promise<ReloadOutcome> => {
    const outcome = await options.reload();
    if (outcome.ok) return outcome;
    const { scrub, secretsOf } = await loadMask();
    return { ok: false, error: scrub(outcome.error, secretsOf(await readFile(file, 'utf8').catch(() => ''))) };
  };
  /** The edited text with its masked secrets put back from the file on disk, or the problems. */
  const unmasked = async (edited: string): Promise<{ text: string; original: string; problems: string[] }> => {
    const original = await readFile(file, 'utf8');
    const { text, problems } = (await loadMask()).unmaskText(edited, original);
    return { text, original, problems: problems.length > 0 ? problems : await problemsOf(text, original) };
  };
  return {
    file,
    async read() {
      return (await loadMask()).maskText(await readFile(file, 'utf8'));
    },
    async validate(edited) {
      return (await unmasked(edited)).problems;
    },
    async save(edited) {
      const { text, problems } = await unmasked(edited);
      if (problems.length > 0) return { problems };
      await copyFile(file, `${file}.bak`);
      // copyFile keeps the original's mode; the old config may hold literal keys, so its copy is private.
      await chmod(`${file}.bak`, 0o600);
      // Written beside it and renamed, so a crash mid-write never leaves half a config.
      const temporary = `${file}.console-${process.pid}.tmp`;
      await writeFile(temporary, text, { mode: 0o600 });
      await rename(temporary, file);
      return { problems: [], reload: await reload() };
    },
    reload,
    async effective() {
      return (await loadMask()).maskObject(options.current());
    },
  };
}

/**
 * Wraps a Memory so automatic recall is remembered per conversation (the last 20 turns of the
 * last 200 conversations), for the Conversations page's "recalled" notes. In process only.
 */
export function recordRecalls(memory: Memory): { memory: Memory; recalls(conversation: string): readonly RecallRecord[] } {
  const byConversation = new BoundedMap<string, RecallRecord[]>(200);
  const wrapped: Memory = {
    get name() {
      return memory.name;
    },
    store: (input, who) => memory.store(input, who),
    get: (key, who) => memory.get(key, who),
    list: (filter) => memory.list(filter),
    forget: (keyOrId, who) => memory.forget(keyOrId, who),
    count: (filter) => memory.count(filter),
    health: () => memory.health(),
    recall: async (query: string, who: MemoryWho, options?: RecallOptions) => {
      const entries = await memory.recall(query, who, options);
      const list = byConversation.get(who.conversation) ?? [];
      list.push({ at: Date.now(), query: query.slice(0, 200), entries: entries.map((e) => ({ id: e.id, key: e.key, content: e.content.slice(0, 300), scope: e.scope, ...(e.score === undefined ? {} : { score: e.score }) })) });
      if (list.length > 20) list.shift();
      byConversation.setNewest(who.conversation, list);
      return entries;
    },
  };
  return { memory: wrapped, recalls: (conversation) => byConversation.get(conversation) ?? [] };
}

/** The node name the Overview shows (one per daemon; a cluster lists each). */
export const nodeName = (): string => `${hostname()}:${process.pid}`;
