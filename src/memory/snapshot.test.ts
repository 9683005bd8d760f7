import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { testLogger } from '../../test/support/log.ts';
import { ownerOf, type Memory, type MemoryEntry, type MemoryFilter, type MemoryWho, type StoreInput } from '../memory.ts';
import { createMarkdownMemory } from './markdown.ts';
import { createHygiene, formatSnapshot, hydrateFromSnapshot, parseSnapshot, readSnapshot, writeSnapshot } from './snapshot.ts';

const root = mkdtempSync(join(tmpdir(), 'sb-snapshot-'));
after(() => rmSync(root, { recursive: true, force: true }));
let dirs = 0;
const freshDir = (): string => join(root, `d${++dirs}`);

const day = 24 * 60 * 60 * 1000;
const alice: MemoryWho = { person: 'telegram:42', conversation: 'telegram:bot:42' };
const bob: MemoryWho = { person: 'discord:7', conversation: 'discord:guild:chan' };

/** A Map-backed Memory that follows the contract, with a settable clock. */
function fakeMemory(clock: { now: number } = { now: Date.now() }): Memory & { forgotten: string[] } {
  const rows = new Map<string, MemoryEntry>();
  const visible = (entry: MemoryEntry, who: MemoryWho) => entry.scope === 'shared' || entry.owner === ownerOf(entry.scope, who);
  const filtered = (filter: MemoryFilter = {}) =>
    [...rows.values()]
      .filter((entry) => (filter.scope ?? entry.scope) === entry.scope && (filter.owner ?? entry.owner) === entry.owner && (filter.category ?? entry.category) === entry.category)
      .sort((a, b) => b.updatedAt - a.updatedAt)
      .slice(0, filter.limit);
  const forgotten: string[] = [];
  return {
    name: 'fake',
    forgotten,
    async store(input: StoreInput, who: MemoryWho) {
      const owner = ownerOf(input.scope, who);
      const key = input.key ?? input.content.slice(0, 20);
      const id = `${input.scope}|${owner}|${key}`;
      const entry = { id, key, owner, content: input.content, scope: input.scope, category: input.category ?? 'core', createdAt: rows.get(id)?.createdAt ?? clock.now, updatedAt: clock.now };
      rows.set(id, entry);
      return entry;
    },
    recall: async (query, who) => [...rows.values()].filter((entry) => visible(entry, who) && entry.content.includes(query)).map((entry) => ({ ...entry, score: 1 })),
    get: async (key, who) => [...rows.values()].find((entry) => entry.key === key && visible(entry, who)),
    list: async (filter) => filtered(filter),
    async forget(keyOrId, who) {
      const entry = [...rows.values()].find((candidate) => (who === 'operator' ? candidate.id === keyOrId || candidate.key === keyOrId : candidate.key === keyOrId && visible(candidate, who)));
      if (entry) forgotten.push(entry.id);
      return entry ? rows.delete(entry.id) : false;
    },
    count: async (filter) => filtered({ ...filter, limit: undefined }).length,
    health: async () => ({ ok: true, detail: 'fake' }),
  };
}

const hostile = [
  'line one\nline two\r\nline three',
  '**bold** **k**: fake',
  '# heading\n## person telegram:9\n### daily\n- **x**: injected',
  '```ts\nconst a = `b`;\n```',
  'back\\slash \\n \\u0041 trailing\\',
  '咖啡 ☕ 🇹🇼 e\u0301 \u2028\u2029\u0085\u0000\ttab',
  '  spaces around  ',
  '',
];

async function seed(memory: Memory): Promise<void> {
  for (const [index, content] of hostile.entries()) {
    await memory.store({ content, key: `h${index} **k** # \`x\``, scope: 'person' }, alice);
  }
  await memory.store({ content: 'house rules: be kind', key: 'rules', scope: 'shared' }, bob);
  await memory.store({ content: 'likes tea', key: 'drink', scope: 'person' }, bob);
  await memory.store({ content: 'this chat is about Rust', key: 'topic', scope: 'conversation' }, bob);
  await memory.store({ content: 'room fact', key: 'r', scope: 'conversation' }, { person: 'matrix:@a', conversation: 'matrix:!room:example.org\n## shared \\' });
  await memory.store({ content: 'not core', key: 'log', category: 'daily', scope: 'person' }, alice);
  await memory.store({ content: 'auto-saved', key: 'msg', category: 'conversation', scope: 'conversation' }, alice);
}

const identity = (entry: Pick<MemoryEntry, 'scope' | 'owner' | 'key' | 'content' | 'category'>) => [entry.scope, entry.owner, entry.key, entry.content, entry.category];
const sorted = (rows: unknown[][]) => rows.map((row) => JSON.stringify(row)).sort();

describe('snapshot', () => {
  it('writes the documented format, grouped and sorted, core memories only', async () => {
    const memory = fakeMemory();
    await memory.store({ content: 'oat flat white', key: 'drink', scope: 'person' }, alice);
    await memory.store({ content: 'no politics', key: 'rules', scope: 'shared' }, alice);
    await memory.store({ content: 'two\nlines', key: 'a', scope: 'person' }, alice);
    await memory.store({ content: 'ignored', key: 'log', category: 'daily', scope: 'person' }, alice);
    const file = join(freshDir(), 'MEMORY_SNAPSHOT.md');
    assert.equal(await writeSnapshot(memory, file), 3);
    assert.equal(
      readFileSync(file, 'utf8'),
      '# Memory snapshot\n\n## shared\n\n- **rules**: no politics\n\n## person telegram:42\n\n- **a**: two\\nlines\n- **drink**: oat flat white\n',
    );
  });

  for (const target of ['markdown', 'fake'] as const) {
    it(`round-trips write → read → hydrate into a fresh ${target} memory, hostile content exactly`, async () => {
      const source = fakeMemory();
      await seed(source);
      const dir = freshDir();
      const file = join(dir, 'MEMORY_SNAPSHOT.md');
      assert.equal(await writeSnapshot(source, file), hostile.length + 4);
      assert.deepEqual(readdirSync(dir), ['MEMORY_SNAPSHOT.md'], 'no temp file left behind');

      const core = await source.list({ category: 'core' });
      assert.deepEqual(sorted((await readSnapshot(file)).map(identity)), sorted(core.map(identity)));

      const fresh = target === 'markdown' ? createMarkdownMemory({ dir: join(dir, 'workspace'), log: testLogger() }) : fakeMemory();
      assert.equal(await hydrateFromSnapshot(fresh, file), core.length);
      assert.deepEqual(sorted((await fresh.list()).map(identity)), sorted(core.map(identity)));
      assert.equal((await fresh.get('drink', bob))?.content, 'likes tea', 'person memory restored to its owner');
      assert.equal(await fresh.get('drink', alice), undefined, 'and to no one else');
      assert.equal((await fresh.get('topic', bob))?.owner, 'discord:guild:chan');

      // Writing the restored memory again gives the same bytes: stable for Git.
      const again = join(dir, 'again.md');
      await writeSnapshot(fresh, again);
      assert.equal(readFileSync(again, 'utf8'), readFileSync(file, 'utf8'));
    });
  }

  it('keeps categories under ### headings (export) and reads them back', () => {
    const entries = [
      { scope: 'person' as const, owner: 'telegram:42', key: 'a', content: 'x', category: 'core' },
      { scope: 'person' as const, owner: 'telegram:42', key: 'b', content: 'y', category: 'daily' },
      { scope: 'conversation' as const, owner: 'c:1', key: 'c', content: 'z', category: 'conversation' },
      { scope: 'person' as const, owner: '', key: 'd', content: 'w', category: 'odd\ncat' },
    ];
    const text = formatSnapshot(entries, 'Memory export');
    assert.match(text, /## person telegram:42\n\n- \*\*a\*\*: x\n\n### daily\n\n- \*\*b\*\*: y\n/);
    assert.deepEqual(sorted(parseSnapshot(text).map(identity)), sorted(entries.map(identity)));
  });

  it('reads a missing file as empty and names the line of a malformed entry', async () => {
    assert.deepEqual(await readSnapshot(join(freshDir(), 'nope.md')), []);
    assert.throws(() => parseSnapshot('# S\n\n- **k**: before a heading\n', 'S.md'), /S\.md:3: memory before any/);
    assert.throws(() => parseSnapshot('## person a:1\n- broken entry\n', 'S.md'), /S\.md:2: expected "- \*\*key\*\*: content"/);
    assert.throws(() => parseSnapshot('## team x\n', 'S.md'), /S\.md:1: expected "## person/);
    assert.deepEqual(parseSnapshot('## shared\r\n\r\nSome prose.\r\n- **k**: v\r\n'), [{ scope: 'shared', owner: '', key: 'k', content: 'v', category: 'core' }]);
  });

  it('replaces an existing snapshot atomically', async () => {
    const dir = freshDir();
    const file = join(dir, 'MEMORY_SNAPSHOT.md');
    const memory = fakeMemory();
    await memory.store({ content: 'v1', key: 'k', scope: 'shared' }, alice);
    await writeSnapshot(memory, file);
    await memory.store({ content: 'v2', key: 'k', scope: 'shared' }, alice);
    await writeSnapshot(memory, file);
    assert.deepEqual((await readSnapshot(file)).map((entry) => entry.content), ['v2']);
    assert.deepEqual(readdirSync(dir), ['MEMORY_SNAPSHOT.md']);
  });
});

describe('hygiene', () => {
  it('removes only conversation memories older than the retention, then snapshots core', async () => {
    const clock = { now: Date.parse('2026-03-01T00:00:00Z') };
    const memory = fakeMemory(clock);
    await memory.store({ content: 'old chat', key: 'old', category: 'conversation', scope: 'conversation' }, alice);
    await memory.store({ content: 'old fact', key: 'fact', category: 'core', scope: 'person' }, alice);
    await memory.store({ content: 'old diary', key: 'diary', category: 'daily', scope: 'person' }, alice);
    clock.now += 29 * day;
    await memory.store({ content: 'recent chat', key: 'recent', category: 'conversation', scope: 'conversation' }, alice);
    clock.now += 2 * day;
    const file = join(freshDir(), 'MEMORY_SNAPSHOT.md');
    const hygiene = createHygiene({ memory, snapshotFile: file, retentionDays: 30, log: testLogger(), now: () => clock.now });
    assert.deepEqual(await hygiene.run(), { expired: 1, snapshotted: 1 });
    assert.deepEqual((await memory.list()).map((entry) => entry.key).sort(), ['diary', 'fact', 'recent']);
    assert.deepEqual((await readSnapshot(file)).map((entry) => entry.key), ['fact']);
    assert.deepEqual(await hygiene.run(), { expired: 0, snapshotted: 1 });
  });

  it('uses the backend’s bulk delete when given, and shares one pass between concurrent runs', async () => {
    const memory = fakeMemory();
    const calls: Array<[string, number]> = [];
    const now = Date.parse('2026-03-01T00:00:00Z');
    const hygiene = createHygiene({
      memory,
      snapshotFile: join(freshDir(), 'S.md'),
      retentionDays: 7,
      deleteOlderThan: async (category, before) => (calls.push([category, before]), 4),
      log: testLogger(),
      now: () => now,
    });
    const [first, second] = await Promise.all([hygiene.run(), hygiene.run()]);
    assert.deepEqual(first, { expired: 4, snapshotted: 0 });
    assert.equal(second, first);
    assert.deepEqual(calls, [['conversation', now - 7 * day]]);
    assert.deepEqual(memory.forgotten, []);
  });

  it('still writes the snapshot when expiry fails, then reports the failure', async () => {
    const memory = fakeMemory();
    await memory.store({ content: 'keep', key: 'k', scope: 'shared' }, alice);
    const file = join(freshDir(), 'S.md');
    const hygiene = createHygiene({ memory, snapshotFile: file, retentionDays: 1, deleteOlderThan: () => Promise.reject(new Error('disk on fire')), log: testLogger() });
    await assert.rejects(hygiene.run(), /disk on fire/);
    assert.ok(existsSync(file));
  });

  it('keeps everything with 0 or Infinity and rejects a nonsense retention', async () => {
    const memory = fakeMemory({ now: 0 });
    await memory.store({ content: 'ancient', key: 'a', category: 'conversation', scope: 'shared' }, alice);
    for (const keep of [0, Infinity]) {
      const hygiene = createHygiene({ memory, snapshotFile: join(freshDir(), 'S.md'), retentionDays: keep, log: testLogger() });
      assert.deepEqual(await hygiene.run(), { expired: 0, snapshotted: 0 });
    }
    assert.equal(await memory.count(), 1);
    for (const bad of [-1, Number.NaN]) {
      assert.throws(() => createHygiene({ memory, snapshotFile: 'x', retentionDays: bad, log: testLogger() }), TypeError);
    }
  });

  it('cannot expire from the append-only markdown backend, and says nothing was expired', async () => {
    const dir = freshDir();
    let now = Date.parse('2026-01-01T00:00:00Z');
    const memory = createMarkdownMemory({ dir, log: testLogger(), now: () => now });
    await memory.store({ content: 'old chat', key: 'old', category: 'conversation', scope: 'conversation' }, alice);
    now += 100 * day;
    const hygiene = createHygiene({ memory, snapshotFile: join(dir, 'MEMORY_SNAPSHOT.md'), retentionDays: 30, log: testLogger(), now: () => now });
    assert.deepEqual(await hygiene.run(), { expired: 0, snapshotted: 0 });
  });
});
