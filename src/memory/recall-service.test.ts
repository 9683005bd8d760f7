import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { openDatabase } from '../store/db.ts';
import { RecallService } from './recall-service.ts';

/** A database with `n` memories of one person, each with 128-dimension sign bits (16 bytes). */
function databaseWith(n: number): ReturnType<typeof openDatabase> {
  const db = openDatabase(':memory:');
  const insert = db.prepare(
    `INSERT INTO memories (id, key, content, category, scope, owner, created_at, updated_at, embedding_bits, embedding_model)
     VALUES (?, ?, ?, 'core', 'person', 'alice', 0, 0, ?, 'm')`,
  );
  for (let i = 0; i < n; i++) insert.run(`id-${i}`, `key-${i}`, `memory ${i}`, Buffer.alloc(16, i & 255));
  return db;
}

describe('recall service: the vector index budget ([memory] max_index_mb)', () => {
  it('indexes the newest memories up to the budget, says so once, and indexes no more', () => {
    const db = databaseWith(2_000);
    const unlimited = new RecallService(db, 'm');
    assert.equal(unlimited.load(), 2_000);
    assert.equal(unlimited.takeFull(), undefined, 'no budget, never full');

    const capped = new RecallService(db, 'm', 32 * 1024);
    const indexed = capped.load();
    assert.ok(indexed > 100 && indexed < 2_000, `some but not all indexed (${indexed})`);
    const full = capped.takeFull();
    assert.equal(full?.type, 'full');
    assert.equal(capped.takeFull(), undefined, 'told once');
    assert.equal(capped.handle({ type: 'add', entries: [{ rowid: 99_999, partition: 'person:alice', bits: new Uint8Array(16) }] }), undefined, 'already told');
    assert.equal(capped.indexed, indexed, 'an add past the budget is not indexed');
    // The newest are the ones indexed: removing the oldest changes nothing, the newest does.
    const { lo, hi } = db.prepare('SELECT min(rowid) AS lo, max(rowid) AS hi FROM memories').get() as { lo: number; hi: number };
    capped.handle({ type: 'remove', rowids: [lo] });
    assert.equal(capped.indexed, indexed, 'the oldest was not indexed');
    capped.handle({ type: 'remove', rowids: [hi] });
    assert.equal(capped.indexed, indexed - 1, 'the newest was');
    // A reload starts over, and says so again.
    assert.equal(capped.handle({ type: 'reload' })?.type, 'full');
    db.close();
  });

  it('replacing an indexed vector needs no room', () => {
    const db = databaseWith(2_000);
    const capped = new RecallService(db, 'm', 32 * 1024);
    const indexed = capped.load();
    capped.takeFull();
    const row = db.prepare('SELECT max(rowid) AS rowid FROM memories').get() as { rowid: number };
    capped.handle({ type: 'add', entries: [{ rowid: row.rowid, partition: 'person:alice', bits: new Uint8Array(16) }] });
    assert.equal(capped.indexed, indexed);
    db.close();
  });
});
