import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import type { InboundMessage } from '../channel.ts';
import { openDatabase } from './db.ts';
import { lockDataDir } from './lock.ts';
import { Inbox } from './inbox.ts';
import { sqliteDatabase } from './sqlite-sql.ts';

const dir = mkdtempSync(join(tmpdir(), 'sb-store-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const message = (id: string, chat = 'c1'): InboundMessage => ({
  channel: 'test',
  account: 'bot',
  chat,
  id,
  sender: { id: 'u1' },
  text: `text ${id}`,
  timestamp: 1,
});

// What every engine promises is in the storage contract (store.contract.test.ts); here, SQLite's own.
describe('SQLite inbox file', () => {
  it('survives reopening the database file', async () => {
    const path = join(dir, 'inbox.db');
    const db = sqliteDatabase(openDatabase(path));
    await new Inbox(db).accept(message('m1'));
    await db.close();
    const again = new Inbox(sqliteDatabase(openDatabase(path)));
    assert.equal((await again.queued()).length, 1);
    assert.equal(await again.accept(message('m1')), undefined);
  });

  it('lets no statement from outside an open transaction land inside it', async () => {
    const db = sqliteDatabase(openDatabase(':memory:'));
    const inbox = new Inbox(db);
    let accepted: Promise<unknown> | undefined;
    await assert.rejects(
      db.transaction(async (tx) => {
        await inbox.in(tx).accept(message('inside'));
        accepted = inbox.accept(message('outside')); // waits for the transaction to end
        await new Promise((resolve) => setImmediate(resolve));
        throw new Error('roll back');
      }),
      /roll back/,
    );
    await accepted;
    assert.deepEqual(
      (await inbox.queued()).map((row) => row.seq).length,
      1,
      'the outside message was kept, the inside one rolled back',
    );
    assert.equal((await inbox.accept(message('outside'))), undefined);
  });
});

describe('openDatabase', () => {
  it('lets only one holder lock a data dir, until it releases — and the database stays open to others', () => {
    const first = lockDataDir(dir);
    assert.throws(() => lockDataDir(dir), /data_dir .* is in use by another Switchboard process/);
    const db = openDatabase(join(dir, 'shared.db'));
    const again = openDatabase(join(dir, 'shared.db'));
    again.close();
    db.close();
    first.release();
    lockDataDir(dir).release();
  });

  it('makes a damaged lock file anew (its writes skip fsync, so a power loss may leave one) and still locks', () => {
    const held = mkdtempSync(join(tmpdir(), 'sb-lock-'));
    try {
      writeFileSync(join(held, 'switchboard.lock'), Buffer.alloc(8192, 0x5a));
      const lock = lockDataDir(held);
      assert.throws(() => lockDataDir(held), /data_dir .* is in use by another Switchboard process/);
      lock.release();
      lockDataDir(held).release();
    } finally {
      rmSync(held, { recursive: true, force: true });
    }
  });

  it('uses WAL and refuses a schema from the future', () => {
    const path = join(dir, 'future.db');
    const db = openDatabase(path);
    assert.equal(db.pragma('journal_mode', { simple: true }), 'wal');
    db.pragma('user_version = 999');
    db.close();
    assert.throws(() => openDatabase(path), /schema version 999 is newer/);
  });
});
