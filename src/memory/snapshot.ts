/**
 * MEMORY_SNAPSHOT.md: every `core` memory as Git-trackable Markdown, rewritten on each hygiene
 * pass, so a fresh install whose database is missing can restore what the agent knew.
 *
 * Format (also what `switchboard memory export` prints):
 *
 *     # Memory snapshot
 *
 *     ## shared
 *
 *     - **house-rules**: no politics
 *
 *     ## person telegram:42
 *
 *     - **favourite-drink**: oat flat white
 *
 *     ### daily
 *
 *     - **standup-2026-02-19**: shipped the snapshot
 *
 * A `## <scope> <owner>` heading starts each owner (`## shared` has none); entries under it are
 * `core` until a `### <category>` heading. In owner, category, key and content a backslash
 * escapes the next character, `\n`/`\r` are line breaks and `\uXXXX` other control characters
 * (see `escapeField`), so content with newlines, `**`, `#` or backticks reads back exactly.
 * Groups are sorted by scope and owner and entries by key, so an unchanged memory gives an
 * unchanged file and Git diffs show only what changed.
 */
import { randomBytes } from 'node:crypto';
import { mkdir, open, readFile, rename, rm } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { Logger } from 'pino';
import type { Memory, MemoryCategory, MemoryEntry, MemoryScope, MemoryWho } from '../memory.ts';
import { escapeField, unescapeField } from './markdown.ts';

export interface SnapshotEntry {
  readonly scope: MemoryScope;
  readonly owner: string;
  readonly key: string;
  readonly content: string;
  /** `core` unless the entry sits under a `### <category>` heading (exports). */
  readonly category: MemoryCategory;
}

const scopeOrder: readonly MemoryScope[] = ['shared', 'person', 'conversation'];
const ownerHeading = /^## (person|conversation|shared)(?: (.*))?$/;
const entryLine = /^- \*\*((?:[^*\\]|\\.)*)\*\*: (.*)$/;

/** Renders memories in the snapshot format, grouped by scope + owner (and category when not core). */
export function formatSnapshot(entries: readonly Pick<MemoryEntry, 'scope' | 'owner' | 'key' | 'content' | 'category'>[], title = 'Memory snapshot'): string {
  const sorted = [...entries].sort(
    (a, b) =>
      scopeOrder.indexOf(a.scope) - scopeOrder.indexOf(b.scope) ||
      compare(a.owner, b.owner) ||
      compare(a.category === 'core' ? '' : a.category, b.category === 'core' ? '' : b.category) ||
      compare(a.key, b.key),
  );
  let text = `# ${title}\n`;
  let group: string | undefined;
  let category: string | undefined;
  for (const entry of sorted) {
    const heading = entry.scope === 'shared' && entry.owner === '' ? '## shared' : `## ${entry.scope} ${escapeField(entry.owner)}`;
    if (heading !== group) {
      text += `\n${heading}\n\n`;
      group = heading;
      category = 'core';
    }
    if (entry.category !== category) {
      text += `${text.endsWith('\n\n') ? '' : '\n'}### ${escapeField(entry.category)}\n\n`;
      category = entry.category;
    }
    text += `- **${escapeField(entry.key, '*')}**: ${escapeField(entry.content)}\n`;
  }
  return text;
}

/** Parses the snapshot format. Prose, comments and blank lines are ignored; a malformed entry or heading throws, naming the line. */
export function parseSnapshot(text: string, file = 'snapshot'): SnapshotEntry[] {
  const entries: SnapshotEntry[] = [];
  let owner: { scope: MemoryScope; owner: string } | undefined;
  let category: MemoryCategory = 'core';
  // Real CRs are escaped, so a bare \r is a CRLF checkout: drop it.
  text.split(/\r?\n/).forEach((line, index) => {
    const where = `${file}:${index + 1}`;
    if (line.startsWith('## ')) {
      const match = ownerHeading.exec(line);
      if (!match) throw new Error(`${where}: expected "## person CHANNEL:ID", "## conversation KEY" or "## shared", got ${JSON.stringify(line)}`);
      owner = { scope: match[1] as MemoryScope, owner: unescapeField(match[2] ?? '') };
      category = 'core';
    } else if (line.startsWith('### ')) {
      category = unescapeField(line.slice(4));
    } else if (line.startsWith('- ')) {
      const match = entryLine.exec(line);
      if (!match) throw new Error(`${where}: expected "- **key**: content", got ${JSON.stringify(line)}`);
      if (!owner) throw new Error(`${where}: memory before any "## <scope> <owner>" heading`);
      entries.push({ ...owner, key: unescapeField(match[1]!), content: unescapeField(match[2]!), category });
    }
  });
  return entries;
}

/** Writes every `core` memory to `file` atomically (temp file + rename). Returns how many. */
export async function writeSnapshot(memory: Memory, file: string): Promise<number> {
  const entries = await memory.list({ category: 'core' });
  await mkdir(dirname(file), { recursive: true, mode: 0o700 });
  const temp = `${file}.${randomBytes(4).toString('hex')}.tmp`;
  try {
    const handle = await open(temp, 'w', 0o600); // memories are private: only this user may read them
    try {
      await handle.writeFile(formatSnapshot(entries), 'utf8');
      await handle.sync(); // the rename must never expose a file whose bytes are not on disk yet
    } finally {
      await handle.close();
    }
    await rename(temp, file);
  } catch (error) {
    await rm(temp, { force: true });
    throw error;
  }
  return entries.length;
}

/** The memories in a snapshot file; none when the file does not exist. */
export async function readSnapshot(file: string): Promise<SnapshotEntry[]> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw error;
  }
  return parseSnapshot(text, file);
}

/** The `who` whose `ownerOf(scope, who)` is `owner`. */
export function whoFor(scope: MemoryScope, owner: string): MemoryWho {
  return { person: scope === 'person' ? owner : '', conversation: scope === 'conversation' ? owner : '' };
}

/** Stores every memory of a snapshot into `memory` with its scope, owner and key. Returns how many. */
export async function hydrateFromSnapshot(memory: Memory, file: string): Promise<number> {
  const entries = await readSnapshot(file);
  for (const entry of entries) {
    await memory.store({ content: entry.content, key: entry.key, category: entry.category, scope: entry.scope }, whoFor(entry.scope, entry.owner));
  }
  return entries.length;
}

export interface HygieneOptions {
  readonly memory: Memory;
  /** Where the core snapshot goes, usually `<data_dir>/MEMORY_SNAPSHOT.md`. */
  readonly snapshotFile: string;
  /** `conversation` memories last updated longer ago than this are removed. 0 (or `Infinity`) keeps them forever. */
  readonly retentionDays: number;
  /** The backend's bulk delete (memories of `category` last updated before `beforeMs`), if it has one; else list + forget. */
  readonly deleteOlderThan?: (category: MemoryCategory, beforeMs: number) => Promise<number> | number;
  readonly log: Logger;
  /** Clock, for tests. @default Date.now */
  readonly now?: () => number;
}

export interface Hygiene {
  /** Expires old conversation memories, then writes the snapshot. Concurrent calls share one pass. */
  run(): Promise<{ expired: number; snapshotted: number }>;
}

const dayMs = 24 * 60 * 60 * 1000;

/** The memory hygiene pass: retention for conversation memories, then the core snapshot. */
export function createHygiene(options: HygieneOptions): Hygiene {
  const { memory, snapshotFile, retentionDays, deleteOlderThan, log } = options;
  if (typeof retentionDays !== 'number' || Number.isNaN(retentionDays) || retentionDays < 0) {
    throw new TypeError(`retentionDays must be a number of days, 0 to keep forever; got ${JSON.stringify(retentionDays)}`);
  }
  const now = options.now ?? Date.now;
  let running: Promise<{ expired: number; snapshotted: number }> | undefined;

  async function expire(): Promise<number> {
    if (retentionDays === 0 || retentionDays === Infinity) return 0;
    const before = now() - retentionDays * dayMs;
    if (deleteOlderThan) return await deleteOlderThan('conversation', before);
    let expired = 0;
    for (const entry of await memory.list({ category: 'conversation' })) {
      if (entry.updatedAt < before && (await memory.forget(entry.id, 'operator'))) expired++;
    }
    return expired;
  }

  async function pass(): Promise<{ expired: number; snapshotted: number }> {
    let expired = 0;
    let expireError: unknown;
    try {
      expired = await expire();
    } catch (error) {
      // Still write the snapshot: failing to expire must not also leave the core memories unsaved.
      expireError = error;
      log.error({ err: error, backend: memory.name }, 'memory hygiene: expiring conversation memories failed');
    }
    const snapshotted = await writeSnapshot(memory, snapshotFile).catch((error: unknown) => {
      log.error({ err: error, file: snapshotFile }, 'memory hygiene: writing the snapshot failed');
      throw expireError === undefined ? error : new AggregateError([expireError, error], 'memory hygiene failed twice');
    });
    if (expireError !== undefined) throw expireError;
    log.info({ backend: memory.name, expired, snapshotted, file: snapshotFile }, 'memory hygiene done');
    return { expired, snapshotted };
  }

  return {
    run() {
      running ??= pass().finally(() => (running = undefined));
      return running;
    },
  };
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
