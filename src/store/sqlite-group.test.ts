/**
 * The SQLite adapter's group commit: the writes of one turn of the event loop share a COMMIT,
 * nobody is told before it, and each caller still fails alone.
 */
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { openDatabase } from './db.ts';
import { sqliteDatabase } from './sqlite-sql.ts';

function open(): { sql: ReturnType<typeof sqliteDatabase>; other: Database.Database } {
  const path = join(mkdtempSync(join(tmpdir(), 'sqlite-group-')), 'g.db');
  const sql = sqliteDatabase(openDatabase(path));
  sql.db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL UNIQUE)');
  return { sql, other: new Database(path, { readonly: true }) };
}

const count = (db: Database.Database): number => (db.prepare('SELECT count(*) AS n FROM t').get() as { n: number }).n;

describe('sqliteDatabase group commit', () => {
  it('commits the writes of one tick together, and settles none of them before that commit', async () => {
    const { sql, other } = open();
    try {
      let settled = 0;
      const writes = ['a', 'b', 'c'].map((v) => sql.run('INSERT INTO t (v) VALUES (?)', [v]).then((n) => (settled++, n)));
      const inTx = sql.transaction(async (tx) => tx.run('INSERT INTO t (v) VALUES (?)', ['d']));
      await Promise.resolve();
      assert.equal(count(other), 0, 'another connection sees nothing before the commit');
      assert.equal(settled, 0, 'no caller is told before the commit');
      assert.deepEqual(await Promise.all([...writes, inTx]), [1, 1, 1, 1]);
      assert.equal(count(other), 4);
    } finally {
      other.close();
      await sql.close();
    }
  });

  it('fails only the caller whose statement failed; the others in its group are stored', async () => {
    const { sql, other } = open();
    try {
      const results = await Promise.allSettled([
        sql.run('INSERT INTO t (v) VALUES (?)', ['x']),
        sql.run('INSERT INTO t (v) VALUES (?)', ['x']), // UNIQUE
        sql.get<{ id: number }>('INSERT INTO t (v) VALUES (?) RETURNING id', ['y']),
      ]);
      assert.deepEqual(
        results.map((result) => result.status),
        ['fulfilled', 'rejected', 'fulfilled'],
      );
      assert.match(String((results[1] as PromiseRejectedResult).reason), /UNIQUE/);
      assert.equal(count(other), 2);
    } finally {
      other.close();
      await sql.close();
    }
  });

  it('rolls a failed transaction back to its own start, keeping the writes before and after it', async () => {
    const { sql, other } = open();
    try {
      const before = sql.run('INSERT INTO t (v) VALUES (?)', ['before']);
      const failed = sql.transaction(async (tx) => {
        await tx.run('INSERT INTO t (v) VALUES (?)', ['inside']);
        throw new Error('the work failed');
      });
      const after = sql.run('INSERT INTO t (v) VALUES (?)', ['after']);
      await assert.rejects(failed, /the work failed/);
      assert.deepEqual(await Promise.all([before, after]), [1, 1]);
      assert.deepEqual(
        (other.prepare('SELECT v FROM t ORDER BY id').all() as { v: string }[]).map((row) => row.v),
        ['before', 'after'],
      );
    } finally {
      other.close();
      await sql.close();
    }
  });

  it('answers a read behind an uncommitted write only once that write is committed, with what it wrote', async () => {
    const { sql, other } = open();
    try {
      const write = sql.run('INSERT INTO t (v) VALUES (?)', ['w']);
      const read = sql.get<{ n: number }>('SELECT count(*) AS n FROM t');
      assert.equal((await read)?.n, 1);
      assert.equal(count(other), 1, 'committed by the time the read is answered');
      await write;
    } finally {
      other.close();
      await sql.close();
    }
  });

  it('runs each statement of a group SQLite rolled back whole again on its own, and fails the transactions in it', async () => {
    const { sql, other } = open();
    try {
      // RAISE(ROLLBACK) undoes the whole transaction, as a full disk or an I/O error may
      sql.db.exec("CREATE TABLE u (v TEXT); CREATE TRIGGER u_fails BEFORE INSERT ON u BEGIN SELECT RAISE(ROLLBACK, 'rolled back whole'); END");
      const first = sql.get<{ id: number }>('INSERT INTO t (v) VALUES (?) RETURNING id', ['first']);
      const inTx = sql.transaction(async (tx) => tx.run('INSERT INTO t (v) VALUES (?)', ['in a transaction']));
      const failing = sql.run('INSERT INTO u (v) VALUES (?)', ['x']);
      const later = sql.run('INSERT INTO t (v) VALUES (?)', ['later']);
      const results = await Promise.allSettled([first, inTx, failing, later]);
      assert.deepEqual(
        results.map((result) => result.status),
        ['fulfilled', 'rejected', 'rejected', 'fulfilled'],
      );
      assert.equal((results[0] as PromiseFulfilledResult<{ id: number } | undefined>).value?.id, 1);
      assert.match(String((results[2] as PromiseRejectedResult).reason), /rolled back whole/);
      assert.deepEqual(
        (other.prepare('SELECT v FROM t ORDER BY id').all() as { v: string }[]).map((row) => row.v),
        ['first', 'later'],
      );
    } finally {
      other.close();
      await sql.close();
    }
  });

  it('commits what is pending when closed', async () => {
    const { sql, other } = open();
    const write = sql.run('INSERT INTO t (v) VALUES (?)', ['last']);
    await sql.close();
    assert.equal(await write, 1);
    assert.equal(count(other), 1);
    other.close();
  });
});
