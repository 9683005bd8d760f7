import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { describe, it } from 'node:test';
import { ownerOf, type Memory, type MemoryEntry, type MemoryFilter, type MemoryScope, type MemoryWho } from '../src/memory.ts';
import { parseSnapshot } from '../src/memory/snapshot.ts';
import { age, runMemoryCommand } from './memory-cli.ts';

const now = Date.now();
const minute = 60_000;

function entry(scope: MemoryScope, owner: string, key: string, content: string, minutesAgo: number, category = 'core'): MemoryEntry {
  return { id: `id-${key}-${owner || 'shared'}`, key, content, category, scope, owner, createdAt: now - minutesAgo * minute, updatedAt: now - minutesAgo * minute };
}

/** A fake Memory over fixed rows that records recall and forget calls. */
function fakeMemory(name = 'fake') {
  const rows: MemoryEntry[] = [
    entry('person', 'telegram:42', 'drink', 'oat flat white coffee', 5),
    entry('person', 'discord:7', 'drink', 'black coffee, no sugar', 60),
    entry('shared', '', 'rules', 'no politics\nbe kind', 3 * 24 * 60),
    entry('conversation', 'telegram:bot:42', 'topic', 'x'.repeat(200), 1),
    entry('person', 'telegram:42', 'standup', 'shipped the snapshot', 30, 'daily'),
  ];
  const recalls: Array<{ query: string; who: MemoryWho; limit: number | undefined }> = [];
  const forgets: Array<[string, MemoryWho | 'operator']> = [];
  let closed = 0;
  const visible = (row: MemoryEntry, who: MemoryWho) => row.scope === 'shared' || row.owner === ownerOf(row.scope, who);
  const filtered = (filter: MemoryFilter = {}) =>
    rows
      .filter((row) => (filter.scope ?? row.scope) === row.scope && (filter.owner ?? row.owner) === row.owner && (filter.category ?? row.category) === row.category)
      .sort((a, b) => b.updatedAt - a.updatedAt)
      .slice(0, filter.limit);
  const memory: Memory = {
    name,
    store: () => Promise.reject(new Error('not used')),
    async recall(query, who, options) {
      recalls.push({ query, who, limit: options?.limit });
      return rows.filter((row) => visible(row, who) && row.content.includes('coffee')).map((row) => ({ ...row, score: 0.5 }));
    },
    get: async (key, who) => rows.find((row) => row.key === key && visible(row, who)),
    list: async (filter) => filtered(filter),
    async forget(keyOrId, who) {
      forgets.push([keyOrId, who]);
      if (name === 'markdown') return false;
      const index = rows.findIndex((row) => row.id === keyOrId);
      return index >= 0 && rows.splice(index, 1).length === 1;
    },
    count: async (filter) => filtered({ ...filter, limit: undefined }).length,
    health: async () => ({ ok: true, detail: 'fake' }),
  };
  const open = async () => ({ memory, close: async () => void closed++ });
  return { memory, open, recalls, forgets, rows, closed: () => closed };
}

function sink(): Writable & { text: () => string } {
  let text = '';
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      text += chunk.toString('utf8');
      done();
    },
  });
  return Object.assign(stream, { text: () => text });
}

async function run(args: string[], fake = fakeMemory()) {
  const out = sink();
  const err = sink();
  const code = await runMemoryCommand(args, fake.open, out, err);
  return { code, out: out.text(), err: err.text(), fake };
}

describe('switchboard memory', () => {
  it('list: newest first, one line each with id, scope:owner, key, category, age and 80 characters', async () => {
    const { code, out, fake } = await run(['list']);
    assert.equal(code, 0);
    const lines = out.trimEnd().split('\n');
    assert.equal(lines.length, 5);
    assert.equal(lines[0], `id-topic-telegram:bot:42  conversation:telegram:bot:42  topic  core  1m  ${'x'.repeat(80)}…`);
    assert.equal(lines[1], 'id-drink-telegram:42  person:telegram:42  drink  core  5m  oat flat white coffee');
    assert.equal(lines[4], 'id-rules-shared  shared  rules  core  3d  no politics be kind');
    assert.equal(fake.closed(), 1);
  });

  it('list narrows by --person, --conversation, --scope, --category and --limit; --json gives JSON lines', async () => {
    assert.deepEqual(keys((await run(['list', '--person', 'telegram:42'])).out), ['drink', 'standup']);
    assert.deepEqual(keys((await run(['list', '--person', 'telegram:42', '--conversation', 'telegram:bot:42'])).out), ['topic', 'drink', 'standup']);
    assert.deepEqual(keys((await run(['list', '--scope', 'shared'])).out), ['rules']);
    assert.deepEqual(keys((await run(['list', '--category', 'daily'])).out), ['standup']);
    assert.deepEqual(keys((await run(['list', '--limit', '2'])).out), ['topic', 'drink']);
    const json = (await run(['list', '--json', '--scope', 'person'])).out.trimEnd().split('\n').map((line) => JSON.parse(line) as MemoryEntry);
    assert.deepEqual(json.map((row) => [row.key, row.owner]), [['drink', 'telegram:42'], ['standup', 'telegram:42'], ['drink', 'discord:7']]);
    assert.equal((await run(['list', '--person', 'nobody:1'])).out, '(no memories)\n');
  });

  it('search with --person uses recall as that person sees it, and says so', async () => {
    const { code, out, fake } = await run(['search', 'coffee', 'order', '--person', 'telegram:42', '--limit', '3']);
    assert.equal(code, 0);
    assert.deepEqual(fake.recalls, [{ query: 'coffee order', who: { person: 'telegram:42', conversation: '' }, limit: 3 }]);
    assert.match(out, /^\d+ memor(y|ies) for "coffee order" as the agent recalls them for person telegram:42 \(theirs and shared ones, ranked by the \w+ backend\)\.\n/);
    assert.match(out, /id-drink-telegram:42 .* 0\.50 /);
    assert.doesNotMatch(out, /discord:7/);
  });

  it('search without --person/--conversation matches keywords across every owner, and says so', async () => {
    const { code, out, err, fake } = await run(['search', 'COFFEE sugar', '--json']);
    assert.equal(code, 0);
    assert.deepEqual(fake.recalls, []);
    assert.equal(err, '2 memories across every owner contain the words coffee, sugar (a keyword match, scored by the share of the words found; add --person or --conversation to search as the agent recalls).\n');
    const rows = out.trimEnd().split('\n').map((line) => JSON.parse(line) as MemoryEntry);
    assert.deepEqual(rows.map((row) => [row.owner, row.score]), [['discord:7', 1], ['telegram:42', 0.5]]);
  });

  it('search says how many it found in a sentence that reads right for one and for none', async () => {
    const one = await run(['search', 'sugar']);
    assert.match(one.out, /^1 memory across every owner contains the word sugar \(a keyword match/);
    const none = await run(['search', 'zebra']);
    assert.match(none.out, /^No memories across every owner contain the word zebra \(/);
    assert.match(none.out, /\(no memories\)\n$/);
  });

  it('forget removes one memory by id, or by key when only one owner holds it', async () => {
    const byKey = await run(['forget', 'rules']);
    assert.equal(byKey.code, 0, byKey.err);
    assert.deepEqual(byKey.fake.forgets, [['id-rules-shared', 'operator']]);
    assert.match(byKey.out, /Forgot id-rules-shared shared rules/);
    const byId = await run(['forget', 'id-drink-discord:7']);
    assert.equal(byId.code, 0);
    assert.deepEqual(byId.fake.forgets, [['id-drink-discord:7', 'operator']]);
    const narrowed = await run(['forget', 'drink', '--person', 'telegram:42']);
    assert.deepEqual(narrowed.fake.forgets, [['id-drink-telegram:42', 'operator']]);
  });

  it('forget exits 1 with a clear message when nothing matched, the key is ambiguous, or the backend refuses', async () => {
    const missing = await run(['forget', 'nope', '--person', 'telegram:42']);
    assert.equal(missing.code, 1);
    assert.match(missing.err, /no memory with id or key "nope" among person telegram:42/);
    const ambiguous = await run(['forget', 'drink']);
    assert.equal(ambiguous.code, 1);
    assert.match(ambiguous.err, /held by 2 memories; forget one by its id/);
    assert.deepEqual(ambiguous.fake.forgets, []);
    const appendOnly = await run(['forget', 'rules'], fakeMemory('markdown'));
    assert.equal(appendOnly.code, 1);
    assert.match(appendOnly.err, /append-only/);
  });

  it('export prints the snapshot format (every category) or JSON lines', async () => {
    const markdown = await run(['export']);
    assert.equal(markdown.code, 0);
    assert.match(markdown.out, /^# Memory export\n\n## shared\n\n- \*\*rules\*\*: no politics\\nbe kind\n/);
    const parsed = parseSnapshot(markdown.out);
    assert.equal(parsed.length, 5);
    assert.deepEqual(parsed.find((row) => row.key === 'standup'), { scope: 'person', owner: 'telegram:42', key: 'standup', content: 'shipped the snapshot', category: 'daily' });
    const json = await run(['export', '--json', '--person', 'discord:7']);
    assert.deepEqual(json.out.trimEnd().split('\n').map((line) => (JSON.parse(line) as MemoryEntry).content), ['black coffee, no sugar']);
  });

  const usageErrors: Array<[string[], RegExp]> = [
    [[], /missing subcommand/],
    [['frob'], /unknown subcommand "frob"/],
    [['list', '--frob'], /Unknown option '--frob'/],
    [['list', 'extra'], /unexpected argument "extra"/],
    [['search'], /search needs a query/],
    [['forget'], /forget needs exactly one id or key/],
    [['forget', 'a', 'b'], /forget needs exactly one/],
    [['list', '--scope', 'team'], /--scope must be person, conversation or shared/],
    [['list', '--limit', '0'], /--limit must be a positive whole number/],
    [['list', '--limit', 'ten'], /--limit must be/],
    [['list', '--person', '42'], /--person must be CHANNEL:ID/],
    [['list', '--person', 'a:1', '--scope', 'shared'], /--scope cannot be combined/],
    [['forget', 'x', '--json'], /--json does not apply to forget/],
  ];
  for (const [args, pattern] of usageErrors) {
    it(`exits 2 without opening the memory on a usage error: ${JSON.stringify(args)}`, async () => {
      let opened = false;
      const err = sink();
      const code = await runMemoryCommand(args, async () => ((opened = true), fakeMemory().open()), sink(), err);
      assert.equal(code, 2);
      assert.match(err.text(), pattern);
      assert.match(err.text(), /switchboard memory --help/);
      assert.equal(opened, false);
    });
  }

  it('--help prints usage and exits 0', async () => {
    const { code, out } = await run(['--help']);
    assert.equal(code, 0);
    assert.match(out, /Usage: switchboard memory <subcommand>/);
  });

  it('reports a failing backend with exit 1 and still closes it', async () => {
    const fake = fakeMemory();
    fake.memory.list = () => Promise.reject(new Error('database is locked'));
    const { code, err } = await run(['list'], fake);
    assert.equal(code, 1);
    assert.match(err, /switchboard memory list: database is locked/);
    assert.equal(fake.closed(), 1);
  });

  it('formats ages', () => {
    assert.deepEqual([age(0), age(59_000), age(61_000), age(3 * 3600_000), age(50 * 3600_000)], ['0s', '59s', '1m', '3h', '2d']);
  });
});

function keys(out: string): string[] {
  return out
    .trimEnd()
    .split('\n')
    .map((line) => line.split('  ')[2]!);
}
