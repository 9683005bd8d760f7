/** TurnRecords: a turn's end is all or nothing, with nothing written after its transaction ends. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { InboundMessage } from '../channel.ts';
import type { Sql } from '../store/sql.ts';
import { openDatabase } from '../store/db.ts';
import { sqliteDatabase } from '../store/sqlite-sql.ts';
import { History } from '../store/history.ts';
import { Inbox } from '../store/inbox.ts';
import { Outbox } from '../store/outbox.ts';
import { Drafts } from '../store/settings.ts';
import { TurnRecords } from './records.ts';

const message: InboundMessage = { channel: 'test', account: 'a', chat: 'c', id: 'm1', sender: { id: 'u', name: 'U' }, text: 'hi', direct: true, at: 0 } as unknown as InboundMessage;

describe('TurnRecords', () => {
  it('when one of the writes issued together fails, none of the others runs after the transaction has rolled back', async () => {
    const db = openDatabase(':memory:');
    const database = sqliteDatabase(db);
    const inbox = new Inbox(database);
    const entry = await inbox.accept(message);
    assert.ok(entry);
    // The history write fails at once; the outbox write answers later, as a statement queued
    // behind it on PostgreSQL's pipelined connection does. The reply route records whether the
    // transaction was still open when it was told of the reply.
    const history = new History(database);
    history.in = () => ({ append: async () => Promise.reject(new Error('disk I/O error')) }) as unknown as History;
    const outbox = new Outbox(database);
    const realIn = outbox.in.bind(outbox);
    outbox.in = (tx: Sql) => {
      const inner = realIn(tx);
      return { add: async (...args: Parameters<Outbox['add']>) => { await new Promise((resolve) => setTimeout(resolve, 5)); return inner.add(...args); } } as unknown as Outbox;
    };
    const seen: boolean[] = [];
    const records = new TurnRecords({
      database,
      inbox,
      outbox,
      history,
      drafts: new Drafts(database),
      replies: {
        recorded: async (_tx: Sql) => {
          seen.push(db.inTransaction);
        },
        sendsHere: () => true,
      },
    });
    await assert.rejects(records.turn(entry.seq, 'test:a:c', { messages: [{ role: 'assistant', content: 'hello' }], reply: 'hello' } as never, message, undefined), /disk I\/O error/);
    await new Promise((resolve) => setTimeout(resolve, 50));
    assert.equal((db.prepare('SELECT count(*) AS n FROM outbox').get() as { n: number }).n, 0, 'no reply recorded for a turn that rolled back');
    assert.deepEqual(seen, [true], 'the reply route ran inside the transaction');
    db.close();
  });
});
