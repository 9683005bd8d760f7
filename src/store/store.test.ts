import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import type { InboundMessage } from '../channel.ts';
import { openDatabase } from './db.ts';
import { lockDataDir } from './lock.ts';
import { History } from './history.ts';
import { Inbox } from './inbox.ts';
import { Outbox } from './outbox.ts';

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

describe('Inbox', () => {
  it('stores a message once and recognises a redelivery', () => {
    const inbox = new Inbox(openDatabase(':memory:'));
    const first = inbox.accept(message('m1'));
    assert.ok(first);
    assert.equal(first.conversation, 'test:bot:c1');
    assert.equal(inbox.accept(message('m1')), undefined, 'same channel + platform id is a duplicate');
    const other = inbox.accept({ ...message('m1'), channel: 'other' });
    assert.ok(other, 'another channel may reuse the id');
    assert.deepEqual(
      inbox.queued().map((row) => row.seq),
      [first.seq, other.seq],
    );
  });

  it('keeps a message queued until it is marked done, and only once', () => {
    const inbox = new Inbox(openDatabase(':memory:'));
    const entry = inbox.accept(message('m1'))!;
    assert.equal(inbox.queuedEntry(entry.seq)?.message.text, 'text m1');
    assert.equal(inbox.markDone(entry.seq), true);
    assert.equal(inbox.markDone(entry.seq), false);
    assert.equal(inbox.queuedEntry(entry.seq), undefined);
    assert.deepEqual(inbox.queued(), []);
    assert.equal(inbox.accept(message('m1')), undefined, 'still a duplicate after it was answered');
  });

  it('survives reopening the database file', () => {
    const path = join(dir, 'inbox.db');
    const db = openDatabase(path);
    new Inbox(db).accept(message('m1'));
    db.close();
    const again = new Inbox(openDatabase(path));
    assert.equal(again.queued().length, 1);
    assert.equal(again.accept(message('m1')), undefined);
  });

  it('prunes finished messages older than the window, never queued ones', () => {
    const inbox = new Inbox(openDatabase(':memory:'));
    const done = inbox.accept(message('old'))!;
    inbox.markDone(done.seq, 1000);
    inbox.accept(message('waiting'));
    assert.equal(inbox.prune(2000), 1);
    assert.equal(inbox.queued().length, 1);
  });
});

describe('History', () => {
  it('returns the messages of the last N turns in order', () => {
    const history = new History(openDatabase(':memory:'));
    for (let turn = 1; turn <= 4; turn++) {
      history.append('conv', turn, [
        { role: 'user', content: `q${turn}` },
        { role: 'assistant', content: `a${turn}` },
      ]);
    }
    history.append('other', 5, [{ role: 'user', content: 'elsewhere' }]);
    assert.deepEqual(
      history.recent('conv', 2).map((m) => m.content),
      ['q3', 'a3', 'q4', 'a4'],
    );
    assert.equal(history.recent('conv', 50).length, 8);
    assert.deepEqual(history.recent('conv', 0), []);
    assert.deepEqual(history.recent('nobody', 5), []);
    assert.equal(history.clear('conv'), 8);
  });
});

describe('Outbox', () => {
  it('lists pending replies per conversation in order and forgets sent ones', () => {
    const outbox = new Outbox(openDatabase(':memory:'));
    const a = outbox.add({ channel: 'test', account: 'bot', chat: 'c1', text: 'one' }, 1);
    outbox.add({ channel: 'test', account: 'bot', chat: 'c2', text: 'other' }, 2);
    outbox.add({ channel: 'test', account: 'bot', chat: 'c1', text: 'two' }, 3);
    assert.deepEqual(
      outbox.pending('test:bot:c1').map((e) => e.message.text),
      ['one', 'two'],
    );
    assert.deepEqual(
      outbox.pendingConversations().map((row) => row.conversation),
      ['test:bot:c1', 'test:bot:c2'],
    );
    outbox.markAttempt(a, 'timeout');
    assert.equal(outbox.pending('test:bot:c1')[0]!.attempts, 1);
    outbox.markSent(a);
    assert.equal(outbox.pendingCount(), 2);
    assert.deepEqual(
      outbox.pending('test:bot:c1').map((e) => e.message.text),
      ['two'],
    );
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

  it('uses WAL and refuses a schema from the future', () => {
    const path = join(dir, 'future.db');
    const db = openDatabase(path);
    assert.equal(db.pragma('journal_mode', { simple: true }), 'wal');
    db.pragma('user_version = 999');
    db.close();
    assert.throws(() => openDatabase(path), /schema version 999 is newer/);
  });
});
