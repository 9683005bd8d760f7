/**
 * `switchboard memory list|search|forget|export`: the operator's view of long-term memory,
 * across every person and conversation. Usage errors exit 2 before the memory is opened;
 * errors from `open` (config, database in use) propagate to the caller.
 */
import type { Writable } from 'node:stream';
import { parseArgs } from 'node:util';
import type { Memory, MemoryEntry, MemoryFilter, MemoryScope, MemoryWho } from '../src/memory.ts';
import { applyFilter, keywords, keywordScore } from '../src/memory/markdown.ts';
import { formatSnapshot } from '../src/memory/snapshot.ts';

const EXIT_USAGE = 2;
const EXIT_FAILED = 1;
/** Default --limit for list and search (export prints everything unless --limit is given). */
const DEFAULT_LIMIT = { list: 50, search: 20 } as const;

export const memoryUsage = `Usage: switchboard memory <subcommand> [options]

Subcommands:
  list                 memories, newest first: id, scope:owner, key, category, age, content
  search <query>       the most relevant memories; as one person/conversation sees them with
                       --person/--conversation (the agent's recall), else keyword match across everyone
  forget <id-or-key>   remove one memory (a key held by several owners needs the id or a narrowing flag)
  export               all memories as Markdown (the MEMORY_SNAPSHOT.md format), or JSON lines with --json

Options:
  --person CHANNEL:ID      only this person's memories (e.g. telegram:42)
  --conversation KEY       only this conversation's memories
  --scope S                person, conversation or shared
  --category C             core, daily, conversation or any label
  --limit N                at most N memories (list: ${DEFAULT_LIMIT.list}, search: ${DEFAULT_LIMIT.search}, export: all)
  --json                   one JSON object per line
  -h, --help               show this help

Examples:
  switchboard memory list --person telegram:42
  switchboard memory search "coffee order" --person telegram:42
  switchboard memory forget favourite-drink --person telegram:42
  switchboard memory export > memories.md
`;

type Subcommand = 'list' | 'search' | 'forget' | 'export';
const subcommands: readonly Subcommand[] = ['list', 'search', 'forget', 'export'];
const scopes: readonly MemoryScope[] = ['person', 'conversation', 'shared'];

interface Options {
  readonly person?: string;
  readonly conversation?: string;
  readonly scope?: MemoryScope;
  readonly category?: string;
  readonly limit?: number;
  readonly json: boolean;
}

/** Runs `switchboard memory …` (`args` are the words after `memory`) and returns the exit code. */
export async function runMemoryCommand(
  args: readonly string[],
  open: () => Promise<{ memory: Memory; close(): Promise<void> }>,
  out: Writable,
  err: Writable,
): Promise<number> {
  const usageError = (message: string): number => {
    err.write(`switchboard memory: ${message}\nRun "switchboard memory --help" for the subcommands and options.\n`);
    return EXIT_USAGE;
  };
  let parsed;
  try {
    parsed = parseArgs({
      args: [...args],
      allowPositionals: true,
      strict: true,
      options: {
        person: { type: 'string' },
        conversation: { type: 'string' },
        scope: { type: 'string' },
        category: { type: 'string' },
        limit: { type: 'string' },
        json: { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
    });
  } catch (error) {
    return usageError(error instanceof Error ? error.message : String(error));
  }
  const { values, positionals } = parsed;
  const [name, ...rest] = positionals;
  if (values.help) {
    out.write(memoryUsage);
    return 0;
  }
  if (name === undefined) return usageError('missing subcommand: list, search, forget or export');
  if (!subcommands.includes(name as Subcommand)) return usageError(`unknown subcommand "${name}"; use list, search, forget or export`);
  const command = name as Subcommand;

  if (values.scope !== undefined && !scopes.includes(values.scope as MemoryScope)) return usageError(`--scope must be person, conversation or shared; got "${values.scope}"`);
  if (values.person !== undefined && !/^[^:]+:.+$/.test(values.person)) return usageError(`--person must be CHANNEL:ID, e.g. telegram:42; got "${values.person}"`);
  if (values.conversation === '') return usageError('--conversation must not be empty');
  if (values.limit !== undefined && !/^[1-9]\d*$/.test(values.limit)) return usageError(`--limit must be a positive whole number; got "${values.limit}"`);
  const narrowed = values.person !== undefined || values.conversation !== undefined;
  if (narrowed && values.scope !== undefined) return usageError('--scope cannot be combined with --person or --conversation (they choose the scope)');
  if (command === 'search' && rest.length === 0) return usageError('search needs a query, e.g. switchboard memory search "coffee order"');
  if (command === 'forget' && rest.length !== 1) return usageError('forget needs exactly one id or key');
  if ((command === 'list' || command === 'export') && rest.length > 0) return usageError(`unexpected argument "${rest[0]}" for "switchboard memory ${command}"`);
  if (command === 'forget' && values.json) return usageError('--json does not apply to forget');
  const options: Options = {
    ...(values.person === undefined ? {} : { person: values.person }),
    ...(values.conversation === undefined ? {} : { conversation: values.conversation }),
    ...(values.scope === undefined ? {} : { scope: values.scope as MemoryScope }),
    ...(values.category === undefined ? {} : { category: values.category }),
    ...(values.limit === undefined ? {} : { limit: Number(values.limit) }),
    json: values.json === true,
  };

  const { memory, close } = await open();
  try {
    switch (command) {
      case 'list':
        return await list(memory, options, out);
      case 'search':
        return await search(memory, rest.join(' '), options, out, err);
      case 'forget':
        return await forget(memory, rest[0]!, options, out, err);
      case 'export':
        return await exportAll(memory, options, out);
    }
  } catch (error) {
    err.write(`switchboard memory ${command}: ${error instanceof Error ? error.message : String(error)}\n`);
    return EXIT_FAILED;
  } finally {
    await close();
  }
}

/** The memories the flags select: --person and --conversation each add their owner's; else --scope. */
async function select(memory: Memory, options: Options, limit: number | undefined): Promise<MemoryEntry[]> {
  const base: MemoryFilter = { ...(options.category === undefined ? {} : { category: options.category }), ...(limit === undefined ? {} : { limit }) };
  const filters: MemoryFilter[] = [];
  if (options.person !== undefined) filters.push({ ...base, scope: 'person', owner: options.person });
  if (options.conversation !== undefined) filters.push({ ...base, scope: 'conversation', owner: options.conversation });
  if (filters.length === 0) filters.push(options.scope === undefined ? base : { ...base, scope: options.scope });
  const found = (await Promise.all(filters.map((filter) => memory.list(filter)))).flat();
  return applyFilter(found, limit === undefined ? {} : { limit });
}

async function list(memory: Memory, options: Options, out: Writable): Promise<number> {
  const entries = await select(memory, options, options.limit ?? DEFAULT_LIMIT.list);
  write(out, entries, options.json, Date.now());
  return 0;
}

async function search(memory: Memory, query: string, options: Options, out: Writable, err: Writable): Promise<number> {
  const limit = options.limit ?? DEFAULT_LIMIT.search;
  let entries: MemoryEntry[];
  let explain: (found: string, verb: string) => string;
  if (options.person !== undefined || options.conversation !== undefined) {
    const who: MemoryWho = { person: options.person ?? '', conversation: options.conversation ?? '' };
    const seen = [options.person && `person ${options.person}`, options.conversation && `conversation ${options.conversation}`].filter(Boolean).join(' and ');
    explain = (found) => `${found} for ${JSON.stringify(query)} as the agent recalls them for ${seen} (theirs and shared ones, ranked by the ${memory.name} backend).`;
    entries = await memory.recall(query, who, { limit });
    if (options.category !== undefined) entries = entries.filter((entry) => entry.category === options.category);
  } else {
    const words = keywords(query);
    explain = (found, verb) =>
      `${found} across every owner ${verb} ${words.length === 1 ? 'the word' : 'the words'} ${words.join(', ')} (a keyword match, scored by the share of the words found; add --person or --conversation to search as the agent recalls).`;
    entries = (await select(memory, options, undefined))
      .map((entry) => ({ ...entry, score: keywordScore(words, entry) }))
      .filter((entry) => entry.score > 0)
      .sort((a, b) => b.score - a.score || b.updatedAt - a.updatedAt)
      .slice(0, limit);
  }
  const found = entries.length === 0 ? 'No memories' : entries.length === 1 ? '1 memory' : `${entries.length} memories`;
  // The explanation goes to stderr under --json, so stdout stays parseable.
  (options.json ? err : out).write(`${explain(found, entries.length === 1 ? 'contains' : 'contain')}\n`);
  write(out, entries, options.json, Date.now());
  return 0;
}

async function forget(memory: Memory, idOrKey: string, options: Options, out: Writable, err: Writable): Promise<number> {
  const candidates = await select(memory, options, undefined);
  const byId = candidates.filter((entry) => entry.id === idOrKey);
  const matches = byId.length > 0 ? byId : candidates.filter((entry) => entry.key === idOrKey);
  if (matches.length === 0) {
    err.write(`switchboard memory forget: no memory with id or key "${idOrKey}"${describeFilter(options)}.\n`);
    return EXIT_FAILED;
  }
  if (matches.length > 1) {
    err.write(`switchboard memory forget: the key "${idOrKey}" is held by ${matches.length} memories; forget one by its id, or narrow with --person/--conversation/--scope:\n`);
    write(err, matches, false, Date.now());
    return EXIT_FAILED;
  }
  const entry = matches[0]!;
  if (!(await memory.forget(entry.id, 'operator'))) {
    const why = memory.name === 'markdown' ? ' (the markdown backend is an append-only log and never forgets)' : '';
    err.write(`switchboard memory forget: the ${memory.name} backend did not forget ${entry.id}${why}.\n`);
    return EXIT_FAILED;
  }
  out.write(`Forgot ${entry.id} ${owner(entry)} ${entry.key}\n`);
  return 0;
}

async function exportAll(memory: Memory, options: Options, out: Writable): Promise<number> {
  const entries = await select(memory, options, options.limit);
  out.write(options.json ? entries.map((entry) => `${JSON.stringify(entry)}\n`).join('') : formatSnapshot(entries, 'Memory export'));
  return 0;
}

function write(stream: Writable, entries: readonly MemoryEntry[], json: boolean, now: number): void {
  if (json) {
    stream.write(entries.map((entry) => `${JSON.stringify(entry)}\n`).join(''));
    return;
  }
  const lines = entries.map((entry) =>
    [
      entry.id,
      owner(entry),
      entry.key,
      entry.category,
      age(now - entry.updatedAt),
      ...(entry.score === undefined ? [] : [entry.score.toFixed(2)]),
      preview(entry.content),
    ].join('  '),
  );
  stream.write(lines.length > 0 ? `${lines.join('\n')}\n` : '(no memories)\n');
}

function owner(entry: Pick<MemoryEntry, 'scope' | 'owner'>): string {
  return entry.scope === 'shared' && entry.owner === '' ? 'shared' : `${entry.scope}:${entry.owner}`;
}

/** "45s", "12m", "5h", "3d": how long ago. */
export function age(ms: number): string {
  const seconds = Math.max(0, Math.round(ms / 1000));
  if (seconds < 60) return `${seconds}s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)}m`;
  if (seconds < 86_400) return `${Math.floor(seconds / 3600)}h`;
  return `${Math.floor(seconds / 86_400)}d`;
}

/** The first 80 characters on one line (line breaks and tabs shown as spaces). */
function preview(content: string): string {
  const chars = Array.from(content.replace(/\s+/g, ' ').trim());
  return chars.length > 80 ? `${chars.slice(0, 80).join('')}…` : chars.join('');
}

function describeFilter(options: Options): string {
  const parts = [
    options.person && `person ${options.person}`,
    options.conversation && `conversation ${options.conversation}`,
    options.scope && `scope ${options.scope}`,
    options.category && `category ${options.category}`,
  ].filter(Boolean);
  return parts.length > 0 ? ` among ${parts.join(', ')}` : '';
}
