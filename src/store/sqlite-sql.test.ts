/**
 * The SQLite adapter on a real full file system (a small tmpfs): a write whose COMMIT finds
 * no room must fail, never hand back a row that was rolled back. better-sqlite3's get() on
 * `INSERT … RETURNING` outside a transaction did exactly that (issue 22: the inbox gave a seq
 * to a message it never stored, and the Telegram offset moved past it).
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { mountTmpfs, type Tmpfs } from '../../test/support/tmpfs.ts';
import { openDatabase } from './db.ts';
import { sqliteDatabase } from './sqlite-sql.ts';

const mounted = mountTmpfs('600k');
const skip = 'skip' in mounted ? mounted.skip : false;

describe('sqliteDatabase on a full disk', { skip }, () => {
  const disk = mounted as Tmpfs;
  after(() => disk.unmount());

  it('get() of a write with RETURNING throws when the commit fails, and every row it returned is stored', async () => {
    const db = openDatabase(join(disk.dir, 'full.db'));
    const sql = sqliteDatabase(db);
    try {
      await sql.run('CREATE TABLE t (seq INTEGER PRIMARY KEY, v TEXT)');
      const returned: number[] = [];
      let failure: unknown;
      for (let n = 0; n < 10_000 && failure === undefined; n++) {
        try {
          const row = await sql.get<{ seq: number }>('INSERT INTO t (v) VALUES (?) RETURNING seq', ['x'.repeat(500)]);
          returned.push(row!.seq);
        } catch (error) {
          failure = error;
        }
      }
      assert.ok(failure !== undefined, 'the disk filled up and a write failed');
      assert.match(String((failure as { code?: string }).code), /^SQLITE_FULL/);
      const stored = new Set((await sql.all<{ seq: number }>('SELECT seq FROM t')).map((row) => row.seq));
      const lost = returned.filter((seq) => !stored.has(seq));
      assert.deepEqual(lost, [], 'no RETURNING row of a write that was rolled back');
      assert.ok(returned.length > 10);
    } finally {
      await sql.close();
    }
  });
});
