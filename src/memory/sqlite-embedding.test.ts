import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { testLogger } from '../../test/support/log.ts';
import type { Logger } from '../log.ts';
import type { EmbeddingProvider, MemoryWho } from '../memory.ts';
import { openDatabase, type Db } from '../store/db.ts';
import { createSqliteMemory, type SqliteMemory } from './sqlite.ts';
import { capturingLogger, hashedEmbeddings, switchable, waitFor } from './testing.ts';

const dir = mkdtempSync(join(tmpdir(), 'sb-embed-'));
const opened: SqliteMemory[] = [];
after(async () => {
  await Promise.all(opened.map((memory) => memory.close()));
  rmSync(dir, { recursive: true, force: true });
});

const who: MemoryWho = { person: 'tg:alice', conversation: 'tg:bot:alice' };
const synonyms = { automobile: 'car', vehicle: 'car' };

let count = 0;
function database(): { db: Db; path: string } {
  const path = join(dir, `e${count++}.db`);
  return { db: openDatabase(path), path };
}

function open(target: { db: Db; path: string }, embeddings: EmbeddingProvider, log: Logger = testLogger(), queryTimeoutMs = 2000): SqliteMemory {
  const memory = createSqliteMemory({ ...target, embeddings, log, embedBatchMs: 5, queryTimeoutMs });
  opened.push(memory);
  return memory;
}

describe('sqlite memory and the embedding service', () => {
  it('stores and recalls by keyword while the service is down, logs the outage once, and catches up', async () => {
    const provider = switchable(hashedEmbeddings({ synonyms }));
    provider.down = true;
    const { log, records } = capturingLogger();
    const memory = open(database(), provider, log);
    const started = performance.now();
    await memory.store({ content: 'The car is a blue Toyota Corolla', key: 'car', scope: 'person' }, who);
    await memory.store({ content: 'Rex the dog loves frisbees', key: 'dog', scope: 'person' }, who);
    await memory.store({ content: 'The office closes at 6pm', key: 'office', scope: 'shared' }, who);
    assert.ok(performance.now() - started < 500, 'stores never wait for embeddings');

    const found = await memory.recall('Toyota', who);
    assert.equal(found[0]?.key, 'car');
    assert.equal(found[0]?.score, 1, 'keyword-only scores use the whole [0, 1]');
    await waitFor('a few failed attempts', () => provider.calls >= 4);
    const health = await memory.health();
    assert.equal(health.ok, false);
    assert.match(health.detail, /keyword-only: embedding service failing .*ECONNREFUSED.*3 of 3 memories not embedded/);
    assert.equal(records.filter((r) => r.msg.startsWith('cannot embed memories')).length, 1, 'one warning per outage');

    provider.down = false;
    await waitFor('the backlog', async () => (await memory.indexed()) === 3);
    assert.equal(records.filter((r) => r.msg.startsWith('embedding works again')).length, 1);
    const bySynonym = await memory.recall('automobile', who);
    assert.equal(bySynonym[0]?.key, 'car', 'found by its vector alone: no keyword matches');
    assert.match((await memory.health()).detail, /^hybrid: 3 memories, model test:hashed-bow-256, 256 dimensions$/);
  });

  it('recalls by keyword when the query cannot be embedded in time, and closes without waiting for it', async () => {
    const provider = switchable(hashedEmbeddings());
    // Generous bounds: a loaded CI machine must not make this flaky. The query timeout is 1 s;
    // a recall that waited for it again would take ≥ 1 s, one that did not takes a few ms.
    const memory = open(database(), provider, testLogger(), 1000);
    await memory.store({ content: 'Passport expires in August 2027', scope: 'person' }, who);
    await waitFor('the embedding', async () => (await memory.indexed()) === 1);
    provider.hang = true;
    const stored = performance.now();
    await memory.store({ content: 'The dentist is Dr. Novak', scope: 'person' }, who);
    assert.ok(performance.now() - stored < 900, 'store does not wait for a hanging service');
    const started = performance.now();
    const found = await memory.recall('passport', who);
    assert.ok(performance.now() - started < 5000, `recall took ${performance.now() - started} ms`);
    assert.match(found[0]?.content ?? '', /Passport/);
    const next = performance.now();
    assert.match((await memory.recall('dentist', who))[0]?.content ?? '', /Novak/);
    assert.ok(performance.now() - next < 900, 'the next recalls do not wait again');
    const closing = performance.now();
    await memory.close();
    assert.ok(performance.now() - closing < 3000, 'close aborts the hanging batch');
  });

  it('re-embeds everything after a model change, never mixing vector lengths', async () => {
    const target = database();
    const first = open(target, hashedEmbeddings({ dims: 64, name: 'test:a' }));
    for (let i = 0; i < 6; i++) await first.store({ content: `Memory number ${i} about topic${i}`, scope: 'person' }, who);
    await waitFor('model a', async () => (await first.indexed()) === 6);
    await first.close();

    const slow = switchable(hashedEmbeddings({ dims: 96, name: 'test:b' }));
    slow.delayMs = 300;
    const second = open(target, slow);
    assert.deepEqual(await second.health(), { ok: true, detail: 're-embedding 6 memories (model test:b)' });
    assert.equal(target.db.prepare('SELECT count(*) FROM memories WHERE embedding IS NOT NULL').pluck().get(), 0, 'old vectors cleared at once');
    assert.equal((await second.recall('topic3', who))[0]?.content, 'Memory number 3 about topic3', 'keyword recall meanwhile');
    await waitFor('model b', async () => (await second.indexed()) === 6);
    const lengths = target.db.prepare('SELECT DISTINCT length(embedding), length(embedding_bits), embedding_model FROM memories').raw().all();
    assert.deepEqual(lengths, [[96 * 4, 12, 'test:b']]);
    assert.equal(target.db.prepare(`SELECT value FROM memory_meta WHERE key = 'embedding_dims'`).pluck().get(), '96');
    assert.match((await second.health()).detail, /^hybrid: 6 memories, model test:b, 96 dimensions$/);
    await second.close();

    // Same name, another length: refused loudly, nothing mixed in, recall still works.
    const { log, records } = capturingLogger();
    const third = open(target, hashedEmbeddings({ dims: 128, name: 'test:b' }), log);
    await third.store({ content: 'A new memory about topic9', scope: 'person' }, who);
    await waitFor('the refusal', () => records.some((r) => r.level === 'error' && r.dims === 128 && r.storedDims === 96));
    assert.match(records.find((r) => r.level === 'error')!.msg, /model test:b returned 128-dimension vectors but the stored ones have 96/);
    assert.deepEqual(target.db.prepare('SELECT DISTINCT length(embedding) FROM memories').pluck().all().sort(), [96 * 4, null].sort());
    const health = await third.health();
    assert.equal(health.ok, false);
    assert.match(health.detail, /128-dimension .* 96/);
    assert.equal((await third.recall('topic9', who))[0]?.content, 'A new memory about topic9');
    assert.equal((await third.recall('topic2', who))[0]?.content, 'Memory number 2 about topic2');
    assert.equal(await third.indexed(), 6);
  });

  it('keeps the recall index in step with store, forget, changed content, retention and restarts', async () => {
    const target = database();
    const provider = hashedEmbeddings({ synonyms });
    const memory = open(target, provider);
    await memory.store({ content: 'The car is blue', key: 'car', scope: 'person' }, who);
    const dog = await memory.store({ content: 'Rex the dog', key: 'dog', scope: 'person' }, who);
    await memory.store({ content: 'We chatted about the weather', scope: 'conversation', category: 'conversation' }, who);
    await waitFor('three vectors', async () => (await memory.indexed()) === 3);

    assert.equal(await memory.forget(dog.id, 'operator'), true);
    assert.equal(await memory.indexed(), 2);
    assert.equal(memory.deleteOlderThan('conversation', Date.now() + 1), 1);
    assert.equal(await memory.indexed(), 1);
    await memory.store({ content: 'The car is blue', key: 'car', scope: 'person' }, who);
    assert.equal(await memory.indexed(), 1, 'same content: the vector stays');
    await memory.store({ content: 'The bicycle is green', key: 'car', scope: 'person' }, who);
    assert.equal(await memory.indexed(), 0, 'changed content: the old vector goes at once');
    await waitFor('the new vector', async () => (await memory.indexed()) === 1);
    assert.deepEqual(await memory.recall('vehicle', who), [], 'nothing left that means car');
    assert.equal((await memory.recall('bicycle', who))[0]?.content, 'The bicycle is green');
    await memory.close();

    const again = open(target, provider);
    assert.equal(await again.indexed(), 1, 'loaded from the database');
  });

  it('notices writes from another process (the operator CLI) at the next recall', async () => {
    const target = database();
    const provider = hashedEmbeddings({ synonyms });
    const memory = open(target, provider);
    await memory.store({ content: 'Rex the dog', key: 'dog', scope: 'person' }, who);
    await waitFor('one vector', async () => (await memory.indexed()) === 1);

    const other = openDatabase(target.path); // another process's connection
    const elsewhere = open({ db: other, path: target.path }, provider);
    await elsewhere.store({ content: 'The car is blue', key: 'car', scope: 'person' }, who);
    await waitFor('embedded elsewhere', () => other.prepare('SELECT count(*) FROM memories WHERE embedding IS NOT NULL').pluck().get() === 2);
    await elsewhere.close();
    other.prepare(`DELETE FROM memories WHERE key = 'dog'`).run();

    assert.equal(await memory.indexed(), 1, 'not yet');
    assert.equal((await memory.recall('automobile', who))[0]?.key, 'car', 'found by the vector another process wrote');
    assert.equal(await memory.indexed(), 1, 'the car in, the dog out');
  });

  it('falls back to keyword recall on the main thread when the worker cannot run', async () => {
    const { db } = database();
    const { log, records } = capturingLogger();
    const memory = createSqliteMemory({ db, path: join(dir, 'missing', 'nothing.db'), log, embeddings: hashedEmbeddings() });
    opened.push(memory);
    await memory.store({ content: 'Budget for groceries is 400 euros', scope: 'person' }, who);
    assert.match((await memory.recall('groceries', who))[0]?.content ?? '', /groceries/);
    await waitFor('the failure', () => records.some((r) => r.msg.startsWith('memory recall worker failed')));
    const health = await memory.health();
    assert.equal(health.ok, false);
    assert.match(health.detail, /keyword-only on the main thread/);
  });
});
