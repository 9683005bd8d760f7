/**
 * The Markdown backend: an append-only, human-readable audit log of memories that Git can
 * track. Core memories go to `<dir>/MEMORY.md`, all others to `<dir>/memory/YYYY-MM-DD.md`
 * (UTC date of the store), one line per store:
 *
 *     - 2026-02-19T08:30:00.000Z [person:telegram:42] **favourite-drink** (core): oat flat white
 *
 * In owner, key, category and content a backslash escapes the next character, `\n` and `\r`
 * stand for line breaks and `\uXXXX` for other control characters, so one memory is always
 * one line and parses back exactly. The latest line per (scope, owner, key) is the memory;
 * nothing is ever deleted, so `forget` always returns false. The files are re-read on each
 * query: this backend is for small, hand-auditable memories, not thousands.
 */
import { createHash } from 'node:crypto';
import { access, appendFile, constants, mkdir, open, readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { Memory, MemoryEntry, MemoryFilter, MemoryScope, MemoryWho, RecallOptions, StoreInput } from '../memory.ts';
import { ownerOf } from '../memory.ts';

export interface MarkdownMemoryOptions {
  /** Workspace directory holding MEMORY.md and memory/. Created on the first store. */
  readonly dir: string;
  readonly log: Logger;
  /** Clock, for tests. @default Date.now */
  readonly now?: () => number;
}

const scopes: readonly MemoryScope[] = ['person', 'conversation', 'shared'];
const dailyFile = /^\d{4}-\d{2}-\d{2}\.md$/;
const entryLine =
  /^- (\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z) \[(person|conversation|shared):((?:[^\]\\]|\\.)*)\] \*\*((?:[^*\\]|\\.)*)\*\* \(((?:[^)\\]|\\.)*)\): (.*)$/;

/** A memory's identity: storing the same scope + owner + key again replaces it. */
export function memoryId(scope: MemoryScope, owner: string, key: string): string {
  return createHash('sha256').update(`${scope}\0${owner}\0${key}`).digest('hex').slice(0, 16);
}

/** A key for content stored without one: its first words plus a short hash, e.g. `likes-oat-milk-3f2a9c`. */
export function deriveKey(content: string): string {
  const words = content.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [];
  const slug = words.slice(0, 5).join('-').slice(0, 40);
  const hash = createHash('sha256').update(content).digest('hex').slice(0, 6);
  return slug ? `${slug}-${hash}` : `note-${hash}`;
}

/**
 * Escapes `text` for one Markdown line: backslash, line breaks and control characters, plus
 * each character of `special` (the field's delimiter). `unescapeField` reverses it exactly.
 */
export function escapeField(text: string, special = ''): string {
  let out = '';
  for (const char of text) {
    if (char === '\\' || special.includes(char)) out += `\\${char}`;
    else if (char === '\n') out += '\\n';
    else if (char === '\r') out += '\\r';
    // Characters some tools (Python's splitlines, editors) take for line breaks, other controls, and
    // lone surrogates (which UTF-8 cannot hold).
    else if (/[\p{Cc}\p{Cs}\u2028\u2029]/u.test(char) && char !== '\t') out += `\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}`;
    else out += char;
  }
  return out;
}

export function unescapeField(text: string): string {
  return text.replace(/\\(u[0-9a-f]{4}|.)/g, (_whole, code: string) =>
    code === 'n' ? '\n' : code === 'r' ? '\r' : code.length === 5 ? String.fromCharCode(parseInt(code.slice(1), 16)) : code,
  );
}

/** Query words for keyword recall, lower-cased and de-duplicated. */
export function keywords(query: string): string[] {
  return [...new Set(query.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [])];
}

/** Share of `words` found in the entry's key or content (substring match, so "咖啡" finds "我喜歡咖啡"), in [0, 1]. */
export function keywordScore(words: readonly string[], entry: Pick<MemoryEntry, 'key' | 'content'>): number {
  if (words.length === 0) return 0;
  const haystack = `${entry.key}\n${entry.content}`.toLowerCase();
  return words.filter((word) => haystack.includes(word)).length / words.length;
}

/** Whether `who` may see `entry`: theirs as a person, the conversation's, or shared. */
export function visibleTo(entry: Pick<MemoryEntry, 'scope' | 'owner'>, who: MemoryWho): boolean {
  return entry.scope === 'shared' || entry.owner === ownerOf(entry.scope, who);
}

/** Applies an operator filter and sorts newest first. */
export function applyFilter(entries: readonly MemoryEntry[], filter: MemoryFilter = {}): MemoryEntry[] {
  const matching = entries
    .filter((entry) => (filter.scope === undefined || entry.scope === filter.scope) && (filter.owner === undefined || entry.owner === filter.owner))
    .filter((entry) => filter.category === undefined || entry.category === filter.category)
    .sort((a, b) => b.updatedAt - a.updatedAt || a.key.localeCompare(b.key));
  return filter.limit === undefined ? matching : matching.slice(0, filter.limit);
}

/** Creates the append-only Markdown backend. */
export function createMarkdownMemory(options: MarkdownMemoryOptions): Memory {
  const { dir, log } = options;
  const now = options.now ?? Date.now;
  const coreFile = join(dir, 'MEMORY.md');
  const dailyDir = join(dir, 'memory');
  /** Tail of the write queue: appends run one at a time, and reads wait for the appends before them. */
  let writes: Promise<unknown> = Promise.resolve();
  /** Last timestamp written, so two stores in one millisecond still order correctly when read back. */
  let lastTime = 0;
  const warned = new Set<string>();

  async function append(file: string, title: string, line: string): Promise<void> {
    await mkdir(dailyDir, { recursive: true, mode: 0o700 });
    let prefix = '';
    try {
      const handle = await open(file, 'r');
      try {
        const { size } = await handle.stat();
        const last = Buffer.alloc(1);
        if (size > 0) await handle.read(last, 0, 1, size - 1);
        // A crash mid-append can leave a line without its newline; never glue ours onto it.
        if (size > 0 && last[0] !== 0x0a) prefix = '\n';
      } finally {
        await handle.close();
      }
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
      prefix = `# ${title}\n\n<!-- Switchboard memory log, append-only: the latest line per [scope:owner] **key** wins. -->\n\n`;
    }
    await appendFile(file, `${prefix}${line}\n`, { encoding: 'utf8', mode: 0o600 }); // memories are private
  }

  async function readAll(): Promise<MemoryEntry[]> {
    await writes.catch(() => undefined);
    const files = [coreFile];
    try {
      files.push(...(await readdir(dailyDir)).filter((name) => dailyFile.test(name)).sort().map((name) => join(dailyDir, name)));
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    }
    const lines: Array<Omit<MemoryEntry, 'id' | 'createdAt' | 'updatedAt'> & { time: number; order: number }> = [];
    for (const file of files) {
      let text: string;
      try {
        text = await readFile(file, 'utf8');
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') continue;
        throw error;
      }
      // Real CRs in fields are escaped, so a bare \r is a CRLF checkout: drop it.
      text.split(/\r?\n/).forEach((raw, index) => {
        if (!raw.startsWith('- ')) return;
        const match = entryLine.exec(raw);
        if (!match) {
          if (!warned.has(`${file}:${index}`)) log.warn({ file, line: index + 1 }, 'memory: unreadable line in the Markdown log, skipped');
          warned.add(`${file}:${index}`);
          return;
        }
        const [, time, scope, owner, key, category, content] = match;
        lines.push({
          time: Date.parse(time!),
          order: lines.length,
          scope: scope as MemoryScope,
          owner: unescapeField(owner!),
          key: unescapeField(key!),
          category: unescapeField(category!),
          content: unescapeField(content!),
        });
      });
    }
    lines.sort((a, b) => a.time - b.time || a.order - b.order);
    const latest = new Map<string, MemoryEntry>();
    for (const { time, order: _order, ...line } of lines) {
      const id = memoryId(line.scope, line.owner, line.key);
      const first = latest.get(id);
      latest.set(id, { id, ...line, createdAt: first?.createdAt ?? time, updatedAt: time });
    }
    return [...latest.values()];
  }

  return {
    name: 'markdown',

    async store(input: StoreInput, who: MemoryWho): Promise<MemoryEntry> {
      if (!scopes.includes(input.scope)) throw new TypeError(`memory scope must be one of ${scopes.join(', ')}; got ${JSON.stringify(input.scope)}`);
      if (input.key !== undefined && input.key.trim() === '') throw new TypeError('memory key must not be empty');
      const key = input.key ?? deriveKey(input.content);
      const category = input.category ?? 'core';
      const owner = ownerOf(input.scope, who);
      const time = Math.max(now(), lastTime + 1);
      lastTime = time;
      const iso = new Date(time).toISOString();
      const line = `- ${iso} [${input.scope}:${escapeField(owner, ']')}] **${escapeField(key, '*')}** (${escapeField(category, ')')}): ${escapeField(input.content)}`;
      const file = category === 'core' ? coreFile : join(dailyDir, `${iso.slice(0, 10)}.md`);
      const title = category === 'core' ? 'Core memories' : `Memories ${iso.slice(0, 10)}`;
      const done = writes.catch(() => undefined).then(() => append(file, title, line));
      writes = done;
      await done;
      const id = memoryId(input.scope, owner, key);
      const previous = (await readAll()).find((entry) => entry.id === id);
      return { id, key, content: input.content, category, scope: input.scope, owner, createdAt: previous?.createdAt ?? time, updatedAt: time };
    },

    async recall(query: string, who: MemoryWho, recallOptions: RecallOptions = {}): Promise<MemoryEntry[]> {
      const words = keywords(query);
      const minScore = recallOptions.minScore ?? 0;
      return (await readAll())
        .filter((entry) => visibleTo(entry, who))
        .map((entry) => ({ ...entry, score: keywordScore(words, entry) }))
        .filter((entry) => entry.score > 0 && entry.score >= minScore)
        .sort((a, b) => b.score - a.score || b.updatedAt - a.updatedAt)
        .slice(0, recallOptions.limit ?? 5);
    },

    async get(key: string, who: MemoryWho): Promise<MemoryEntry | undefined> {
      // The same key may exist as a person, conversation and shared memory: the newest wins.
      return applyFilter((await readAll()).filter((entry) => entry.key === key && visibleTo(entry, who)))[0];
    },

    list: async (filter?: MemoryFilter) => applyFilter(await readAll(), filter),

    async forget(keyOrId: string): Promise<boolean> {
      log.info({ key: keyOrId }, 'memory: the Markdown backend is append-only, nothing was forgotten');
      return false;
    },

    count: async (filter?: MemoryFilter) => applyFilter(await readAll(), { ...filter, limit: undefined }).length,

    async health() {
      try {
        await mkdir(dir, { recursive: true });
        await access(dir, constants.W_OK);
      } catch (error) {
        return { ok: false, detail: `markdown: ${dir} is not writable (${(error as NodeJS.ErrnoException).code ?? String(error)})` };
      }
      const count = (await readAll()).length;
      return { ok: true, detail: `markdown: ${count} memories in ${dir}; append-only, so forget never removes anything` };
    },
  };
}
