import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { testLogger } from '../../test/support/log.ts';
import type { EmbeddingProvider, MemoryWho } from '../memory.ts';
import Database from 'better-sqlite3';
import { openDatabase } from '../store/db.ts';
import { sqliteDatabase } from '../store/sqlite-sql.ts';
import { AmbiguousKeyError, createSqliteMemory, defaultKey, type SqliteMemory } from './sqlite.ts';
import { hashedEmbeddings, hostileQueries, waitFor } from './testing.ts';

const dir = mkdtempSync(join(tmpdir(), 'sb-memory-'));
const opened: SqliteMemory[] = [];
after(async () => {
  await Promise.all(opened.map((memory) => memory.close()));
  rmSync(dir, { recursive: true, force: true });
});

let databases = 0;
function open(embeddings?: EmbeddingProvider): SqliteMemory {
  const path = join(dir, `m${databases++}.db`);
  const memory = createSqliteMemory({ db: openDatabase(path), path, log: testLogger(), embedBatchMs: 5, ...(embeddings ? { embeddings } : {}) });
  opened.push(memory);
  return memory;
}

const alice: MemoryWho = { person: 'tg:alice', conversation: 'tg:bot:group' };
const bobInGroup: MemoryWho = { person: 'tg:bob', conversation: 'tg:bot:group' };
const bobAlone: MemoryWho = { person: 'tg:bob', conversation: 'tg:bot:bob' };
/** A person whose owner string equals the group's conversation key: scope must still separate them. */
const lookalike: MemoryWho = { person: 'tg:bot:group', conversation: 'tg:bot:other' };

describe('sqlite memory: store, get, list, count, forget', () => {
  it('upserts on scope + owner + key, keeping the id and creation time', async () => {
    const memory = open();
    const first = await memory.store({ content: 'Likes green tea', key: 'drink', scope: 'person' }, alice);
    assert.match(first.id, /^[0-9a-f-]{36}$/);
    assert.equal(first.owner, 'tg:alice');
    assert.equal(first.category, 'core');
    await new Promise((resolve) => setTimeout(resolve, 2));
    const second = await memory.store({ content: 'Likes black coffee', key: 'drink', scope: 'person', category: 'daily' }, alice);
    assert.equal(second.id, first.id);
    assert.equal(second.createdAt, first.createdAt);
    assert.ok(second.updatedAt > first.updatedAt);
    assert.equal((await memory.get('drink', alice))?.content, 'Likes black coffee');
    assert.equal(await memory.count(), 1);
    assert.equal((await memory.store({ content: 'Likes water', key: 'drink', scope: 'shared' }, alice)).owner, '');
    assert.equal(await memory.count(), 2, 'same key, another scope: another memory');
    assert.equal((await memory.get('drink', alice))?.scope, 'person', 'the most specific one wins');
  });

  it('derives a short, stable key from the content when none is given', async () => {
    const memory = open();
    const entry = await memory.store({ content: 'My dog Rex is a border collie who loves frisbees', scope: 'person' }, alice);
    assert.match(entry.key, /^my-dog-rex-is-a-border-[0-9a-f]{8}$/);
    assert.equal(defaultKey('My dog Rex is a border collie who loves frisbees'), entry.key);
    assert.notEqual(defaultKey('My dog Rex is a border collie'), entry.key);
    assert.match(defaultKey('我喜欢喝乌龙茶'), /^我喜欢喝乌龙茶-[0-9a-f]{8}$/);
    assert.match(defaultKey('🙂'), /^[0-9a-f]{8}$/);
    await memory.store({ content: 'My dog Rex is a border collie who loves frisbees', scope: 'person' }, alice);
    assert.equal(await memory.count(), 1, 'the same content again is the same memory');
  });

  it('lists and counts for the operator, newest first, by scope, owner and category', async () => {
    const memory = open();
    await memory.store({ content: 'one', key: 'a', scope: 'person' }, alice);
    await memory.store({ content: 'two', key: 'b', scope: 'conversation', category: 'conversation' }, alice);
    await memory.store({ content: 'three', key: 'c', scope: 'person' }, bobAlone);
    assert.deepEqual(
      (await memory.list()).map((entry) => entry.key),
      ['c', 'b', 'a'],
    );
    assert.deepEqual(
      (await memory.list({ owner: 'tg:alice' })).map((entry) => entry.key),
      ['a'],
    );
    assert.equal((await memory.list({ limit: 1 })).length, 1);
    assert.equal(await memory.count({ category: 'conversation' }), 1);
    assert.equal(await memory.count({ scope: 'person' }), 2);
  });

  it('forgets by key or id among the caller’s, and anywhere for the operator', async () => {
    const memory = open();
    const own = await memory.store({ content: 'Alice secret', key: 'secret', scope: 'person' }, alice);
    const bobs = await memory.store({ content: 'Bob secret', key: 'secret', scope: 'person' }, bobAlone);
    assert.equal(await memory.forget('secret', bobInGroup), true, "Bob's own");
    assert.equal(await memory.forget('secret', bobInGroup), false);
    assert.equal(await memory.forget(own.id, bobInGroup), false, "Alice's id is not Bob's to forget");
    assert.equal(await memory.count(), 1);
    assert.equal(await memory.forget(bobs.id, 'operator'), false, 'already gone');
    await memory.store({ content: 'Bob secret', key: 'secret', scope: 'person' }, bobAlone);
    await assert.rejects(memory.forget('secret', 'operator'), AmbiguousKeyError);
    assert.equal(await memory.forget(own.id, 'operator'), true);
    assert.equal(await memory.forget('secret', 'operator'), true, 'one left: by key');
    assert.equal(await memory.count(), 0);
  });

  it('deletes old memories of a category (retention)', async () => {
    const memory = open();
    await memory.store({ content: 'old chat line', scope: 'conversation', category: 'conversation' }, alice);
    await memory.store({ content: 'a lasting fact', scope: 'person' }, alice);
    assert.equal(memory.deleteOlderThan('conversation', Date.now() + 1), 1);
    assert.equal(memory.deleteOlderThan('conversation', Date.now() + 1), 0);
    assert.equal(await memory.count(), 1);
    assert.throws(() => memory.deleteOlderThan('core', Number.NaN), TypeError);
  });

  it('rejects bad options and input with the value quoted', async () => {
    assert.throws(() => createSqliteMemory({ db: openDatabase(':memory:'), path: ':memory:', log: testLogger() }), /path must be the database file/);
    const path = join(dir, 'bad.db');
    assert.throws(() => createSqliteMemory({ db: openDatabase(path), path, log: testLogger(), vectorWeight: -1 }), /vectorWeight .* got -1/);
    const memory = open();
    await assert.rejects(memory.store({ content: '   ', scope: 'person' }, alice), /needs some content/);
    await assert.rejects(memory.store({ content: 'x', scope: 'everyone' as 'shared' }, alice), /got "everyone"/);
  });
});

for (const mode of ['keyword-only', 'hybrid'] as const) {
  describe(`sqlite memory isolation (${mode})`, () => {
    const memory = open(mode === 'hybrid' ? hashedEmbeddings() : undefined);
    const everything = 'Alice diary password tulip; group picnic Saturday lake; office closes 6pm';

    it('stores for person, conversation and everyone', async () => {
      await memory.store({ content: "Alice's diary password is tulip", key: 'diary', scope: 'person' }, alice);
      await memory.store({ content: 'The group picnic is on Saturday at the lake', key: 'picnic', scope: 'conversation' }, alice);
      await memory.store({ content: 'The office closes at 6pm', key: 'office', scope: 'shared' }, alice);
      if (mode === 'hybrid') await waitFor('embeddings', async () => (await memory.indexed()) === 3);
    });

    it("recalls a person's memories only for that person", async () => {
      const keys = async (who: MemoryWho, query = everything) => (await memory.recall(query, who, { limit: 50 })).map((entry) => entry.key).sort();
      assert.deepEqual(await keys(alice), ['diary', 'office', 'picnic']);
      assert.deepEqual(await keys(bobInGroup), ['office', 'picnic'], 'same group: its memories, not Alice’s');
      assert.deepEqual(await keys(bobAlone), ['office'], 'elsewhere: only shared');
      assert.deepEqual(await keys(lookalike), ['office'], 'a person named like the conversation sees none of it');
      assert.ok(!(await keys(bobInGroup, "Alice's diary password is tulip")).includes('diary'), 'not even for her exact words');
    });

    it('gets and forgets only among the caller’s', async () => {
      assert.equal((await memory.get('diary', alice))?.content, "Alice's diary password is tulip");
      assert.equal(await memory.get('diary', bobInGroup), undefined);
      assert.equal(await memory.get('picnic', bobAlone), undefined);
      assert.equal((await memory.get('office', lookalike))?.key, 'office');
      assert.equal(await memory.get('picnic', lookalike), undefined);
      assert.equal(await memory.forget('diary', bobInGroup), false);
      assert.equal(await memory.forget('picnic', bobAlone), false);
      assert.equal(await memory.forget('picnic', lookalike), false);
      await memory.store({ content: "Bob's diary is blank", key: 'diary', scope: 'person' }, bobInGroup);
      assert.equal((await memory.get('diary', alice))?.content, "Alice's diary password is tulip", "Bob's key is his own memory");
      assert.equal(await memory.count(), 4);
    });

    it('takes hostile queries as text and never throws', async () => {
      for (const query of hostileQueries) {
        const found = await memory.recall(query, alice, { limit: 10 });
        assert.ok(Array.isArray(found), JSON.stringify(query.slice(0, 40)));
        for (const entry of found) assert.ok(entry.score! > 0 && entry.score! <= 1);
      }
      assert.deepEqual(await memory.recall('', alice), []);
      assert.equal((await memory.recall('"tulip"', alice))[0]?.key, 'diary');
      assert.equal((await memory.recall('NEAR(tulip diary)', alice))[0]?.key, 'diary');
    });
  });
}

describe('sqlite memory: with the daemon store\'s group commit', () => {
  it('is not reported stored or forgotten before its commit, and survives a group SQLite rolls back whole', async () => {
    const path = join(dir, `m${databases++}.db`);
    const sql = sqliteDatabase(openDatabase(path));
    const memory = createSqliteMemory({ db: sql.db, path, log: testLogger(), write: (work) => sql.write(work) });
    opened.push(memory);
    const other = new Database(path, { readonly: true });
    const stored = (): string[] => (other.prepare('SELECT key FROM memories ORDER BY key').all() as { key: string }[]).map((row) => row.key);
    try {
      // RAISE(ROLLBACK) undoes the whole open transaction, as a full disk or an I/O error may
      sql.db.exec("CREATE TABLE t (v TEXT); CREATE TABLE u (v TEXT); CREATE TRIGGER u_fails BEFORE INSERT ON u BEGIN SELECT RAISE(ROLLBACK, 'rolled back whole'); END");
      const turn = sql.run('INSERT INTO t (v) VALUES (?)', ['a turn\'s write opens the group']);
      const tea = memory.store({ content: 'Likes green tea', key: 'drink', scope: 'person' }, alice);
      const coffee = memory.store({ content: 'Hates coffee', key: 'not-drink', scope: 'person' }, alice);
      // a turn's write in the same tick fails and takes the group (the memories' INSERTs with it)
      await assert.rejects(sql.run('INSERT INTO u (v) VALUES (?)', ['x']), /rolled back whole/);
      assert.equal(await turn, 1);
      assert.equal((await tea).key, 'drink');
      assert.equal((await coffee).key, 'not-drink');
      assert.deepEqual(stored(), ['drink', 'not-drink'], 'both memories were written again on their own and committed');

      let told = false;
      const forgotten = memory.forget('drink', alice).then((done) => ((told = true), done));
      await Promise.resolve();
      await Promise.resolve();
      assert.equal(told, false, 'not told before the commit');
      assert.equal(await forgotten, true);
      assert.deepEqual(stored(), ['not-drink']);
    } finally {
      other.close();
    }
  });
});
