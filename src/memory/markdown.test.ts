import assert from 'node:assert/strict';
import { appendFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { testLogger } from '../../test/support/log.ts';
import type { MemoryWho } from '../memory.ts';
import { createMarkdownMemory, escapeField, unescapeField } from './markdown.ts';
import { createNoneMemory } from './none.ts';

const root = mkdtempSync(join(tmpdir(), 'sb-md-memory-'));
after(() => rmSync(root, { recursive: true, force: true }));
let dirs = 0;
const freshDir = (): string => join(root, `ws${++dirs}`);

const alice: MemoryWho = { person: 'telegram:1', conversation: 'telegram:bot:100' };
const bob: MemoryWho = { person: 'telegram:2', conversation: 'telegram:bot:200' };
const t0 = Date.parse('2026-02-19T08:30:00.000Z');

/** Strings that try to break the one-line format. */
const hostile = [
  'line one\nline two\r\nline three\rend',
  '**bold** and **key**: fake entry',
  '# heading\n## person telegram:9\n- **x**: injected',
  '```js\nconsole.log(`hi`)\n```',
  'back\\slash \\n not a newline \\u0041 \\\\',
  'unicode: 咖啡 ☕ 🇹🇼 é (e\u0301) \u2028 \u2029 \u0085 \u000b \u000c \u0000 \ttab',
  'lone surrogate \ud800 here',
  '  leading and trailing spaces  ',
  '- 2026-01-01T00:00:00.000Z [shared:] **k** (core): forged line',
  '',
];

describe('escapeField', () => {
  it('keeps every string on one line and reverses exactly', () => {
    for (const text of [...hostile, ']', ')', '*', '\\]', 'a\\']) {
      for (const special of ['', ']', '*', ')']) {
        const escaped = escapeField(text, special);
        assert.ok(!/[\n\r\u2028\u2029\u0085\v\f]/.test(escaped), `one line: ${JSON.stringify(escaped)}`);
        assert.equal(unescapeField(escaped), text, JSON.stringify(text));
      }
    }
  });
});

describe('MarkdownMemory', () => {
  it('appends one documented line per store: core to MEMORY.md, others to memory/YYYY-MM-DD.md', async () => {
    const dir = freshDir();
    let now = t0;
    const memory = createMarkdownMemory({ dir, log: testLogger(), now: () => now });
    const entry = await memory.store({ content: 'oat flat white', key: 'favourite-drink', scope: 'person' }, alice);
    assert.equal(entry.owner, 'telegram:1');
    assert.equal(entry.category, 'core');
    now += 1000;
    await memory.store({ content: 'asked about the weather', key: 'w', category: 'conversation', scope: 'conversation' }, alice);
    const core = readFileSync(join(dir, 'MEMORY.md'), 'utf8');
    assert.match(core, /^# Core memories\n/);
    assert.ok(core.endsWith('- 2026-02-19T08:30:00.000Z [person:telegram:1] **favourite-drink** (core): oat flat white\n'), core);
    const daily = readFileSync(join(dir, 'memory', '2026-02-19.md'), 'utf8');
    assert.ok(daily.endsWith('- 2026-02-19T08:30:01.000Z [conversation:telegram:bot:100] **w** (conversation): asked about the weather\n'), daily);
  });

  it('the latest line per scope + owner + key wins; the first gives createdAt', async () => {
    let now = t0;
    const memory = createMarkdownMemory({ dir: freshDir(), log: testLogger(), now: () => now });
    const first = await memory.store({ content: 'tea', key: 'drink', scope: 'person' }, alice);
    now += 5000;
    const second = await memory.store({ content: 'coffee', key: 'drink', scope: 'person' }, alice);
    await memory.store({ content: 'water', key: 'drink', scope: 'person' }, bob);
    assert.equal(second.id, first.id, 'same identity, same id');
    assert.equal(second.createdAt, t0);
    assert.equal(second.updatedAt, t0 + 5000);
    assert.equal(await memory.count(), 2);
    assert.equal((await memory.get('drink', alice))?.content, 'coffee');
    assert.equal((await memory.get('drink', bob))?.content, 'water');
    const listed = await memory.list({ owner: 'telegram:1' });
    assert.deepEqual(listed.map((entry) => [entry.content, entry.createdAt, entry.updatedAt]), [['coffee', t0, t0 + 5000]]);
  });

  it('moves a memory between files when its category changes, keeping only the latest', async () => {
    let now = t0;
    const memory = createMarkdownMemory({ dir: freshDir(), log: testLogger(), now: () => now });
    await memory.store({ content: 'draft', key: 'k', category: 'daily', scope: 'shared' }, alice);
    now += 1;
    await memory.store({ content: 'final', key: 'k', category: 'core', scope: 'shared' }, alice);
    const [entry] = await memory.list();
    assert.equal(entry?.content, 'final');
    assert.equal(entry?.category, 'core');
    assert.equal(await memory.count({ category: 'daily' }), 0);
  });

  it('recall scores keyword overlap among the caller’s, the conversation’s and shared memories only', async () => {
    const memory = createMarkdownMemory({ dir: freshDir(), log: testLogger() });
    await memory.store({ content: 'Alice drinks oat milk coffee', key: 'a-coffee', scope: 'person' }, alice);
    await memory.store({ content: 'Bob drinks black coffee', key: 'b-coffee', scope: 'person' }, bob);
    await memory.store({ content: 'coffee machine is broken', key: 'office', scope: 'shared' }, bob);
    await memory.store({ content: 'in this chat we talk coffee', key: 'chat', scope: 'conversation' }, bob);
    await memory.store({ content: '我喜歡咖啡', key: 'zh', scope: 'person' }, alice);

    const found = await memory.recall('oat milk coffee', alice);
    assert.deepEqual(found.map((entry) => [entry.key, entry.score]), [['a-coffee', 1], ['office', 1 / 3]]);
    assert.ok(!(await memory.recall('Bob black coffee', alice)).some((entry) => entry.owner === 'telegram:2'), 'no leak of Bob’s memories');
    assert.deepEqual((await memory.recall('coffee', bob)).map((entry) => entry.key).sort(), ['b-coffee', 'chat', 'office']);
    assert.deepEqual((await memory.recall('oat milk coffee', alice, { minScore: 0.5 })).map((entry) => entry.key), ['a-coffee']);
    assert.equal((await memory.recall('coffee', bob, { limit: 1 })).length, 1);
    assert.deepEqual((await memory.recall('咖啡', alice)).map((entry) => entry.key), ['zh']);
    assert.deepEqual(await memory.recall('  ', alice), []);
  });

  it('round-trips hostile owners, keys, categories and content exactly', async () => {
    const memory = createMarkdownMemory({ dir: freshDir(), log: testLogger() });
    const who: MemoryWho = { person: 'irc:]weird) **nick**\n', conversation: 'c' };
    for (const [index, content] of hostile.entries()) {
      await memory.store({ content, key: `k*${index}**]) \\`, category: `cat) (${index})\n`, scope: 'person' }, who);
    }
    const reopened = createMarkdownMemory({ dir: join(root, `ws${dirs}`), log: testLogger() });
    const listed = await reopened.list();
    assert.equal(listed.length, hostile.length);
    for (const [index, content] of hostile.entries()) {
      const entry = listed.find((candidate) => candidate.key === `k*${index}**]) \\`);
      assert.ok(entry, `entry ${index}`);
      assert.equal(entry.content, content);
      assert.equal(entry.owner, who.person);
      assert.equal(entry.category, `cat) (${index})\n`);
    }
  });

  it('serialises concurrent stores: no interleaved or lost lines', async () => {
    const dir = freshDir();
    const memory = createMarkdownMemory({ dir, log: testLogger() });
    await Promise.all(Array.from({ length: 60 }, (_, index) => memory.store({ content: `fact ${index} ${'x'.repeat(5000)}`, key: `k${index}`, scope: 'shared' }, alice)));
    assert.equal(await memory.count(), 60);
    const lines = readFileSync(join(dir, 'MEMORY.md'), 'utf8').split('\n').filter((line) => line.startsWith('- '));
    assert.equal(lines.length, 60);
  });

  it('never forgets (append-only) and says so in health', async () => {
    const memory = createMarkdownMemory({ dir: freshDir(), log: testLogger() });
    const entry = await memory.store({ content: 'keep me', scope: 'shared' }, alice);
    assert.match(entry.key, /^keep-me-[0-9a-f]{6}$/);
    assert.equal(await memory.forget(entry.key, alice), false);
    assert.equal(await memory.forget(entry.id, 'operator'), false);
    assert.equal(await memory.count(), 1);
    const health = await memory.health();
    assert.equal(health.ok, true);
    assert.match(health.detail, /append-only/);
  });

  it('tolerates CRLF checkouts, hand-written prose, bad lines and a torn last line', async () => {
    const dir = freshDir();
    const memory = createMarkdownMemory({ dir, log: testLogger() });
    await memory.store({ content: 'one', key: 'a', scope: 'shared' }, alice);
    const file = join(dir, 'MEMORY.md');
    writeFileSync(file, `${readFileSync(file, 'utf8').replace(/\n/g, '\r\n')}Some notes by hand.\r\n- not an entry\r\n`);
    appendFileSync(file, '- 2026-02-19T08:30:00.000Z [shared:] **torn** (core): half a li');
    await memory.store({ content: 'two', key: 'b', scope: 'shared' }, alice);
    const keys = (await memory.list()).map((entry) => entry.key).sort();
    assert.deepEqual(keys, ['a', 'b', 'torn']);
    assert.equal((await memory.get('torn', alice))?.content, 'half a li');
  });

  it('rejects an empty key and an unknown scope', async () => {
    const memory = createMarkdownMemory({ dir: freshDir(), log: testLogger() });
    await assert.rejects(memory.store({ content: 'x', key: ' ', scope: 'shared' }, alice), TypeError);
    await assert.rejects(memory.store({ content: 'x', scope: 'team' as 'shared' }, alice), /scope must be one of/);
  });
});

describe('NoneMemory', () => {
  it('answers a store but keeps nothing', async () => {
    const memory = createNoneMemory();
    const entry = await memory.store({ content: 'x', key: 'k', scope: 'person' }, alice);
    assert.equal(entry.owner, 'telegram:1');
    assert.deepEqual(await memory.recall('x', alice), []);
    assert.equal(await memory.get('k', alice), undefined);
    assert.deepEqual(await memory.list(), []);
    assert.equal(await memory.count(), 0);
    assert.equal(await memory.forget('k', 'operator'), false);
    assert.deepEqual(await memory.health(), { ok: true, detail: 'memory disabled' });
  });
});
