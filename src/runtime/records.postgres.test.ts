/** TurnRecords on PostgreSQL, where a turn's COMMIT goes out with its writes (Sql.commitAhead). */
import assert from 'node:assert/strict';
import { after, before, it } from 'node:test';
import type { InboundMessage } from '../channel.ts';
import { openPostgres } from '../store/postgres/sql.ts';
import { History } from '../store/history.ts';
import { Inbox } from '../store/inbox.ts';
import { Outbox } from '../store/outbox.ts';
import { Drafts } from '../store/settings.ts';
import { localReplies } from './reply-route.ts';
import { TurnRecords } from './records.ts';
import { startPostgres, type TestPostgres } from '../../test/support/postgres.ts';
import { testLogger } from '../../test/support/log.ts';

let server: TestPostgres;
before(async () => {
  server = await startPostgres();
});
after(() => server?.stop());

const message = { channel: 'test', account: 'a', chat: 'c', id: 'm1', sender: { id: 'u', name: 'U' }, text: 'hi', direct: true, at: 0 } as unknown as InboundMessage;

it('a turn committed again (its first answer lost) records nothing twice: the mark fails on the server and the COMMIT answers ROLLBACK', async () => {
  const database = await openPostgres({ url: await server.createDatabase(), log: testLogger() });
  try {
    const inbox = new Inbox(database);
    const outbox = new Outbox(database);
    const records = new TurnRecords({ database, inbox, outbox, history: new History(database), drafts: new Drafts(database), replies: localReplies });
    const entry = (await inbox.accept(message))!;
    const output = { messages: [{ role: 'assistant', content: 'hello' }], reply: 'hello' } as never;
    let committed = 0;
    const settle = { in: async () => undefined, committed: () => void committed++ };
    assert.equal(await records.turn(entry.seq, 'test:a:c', output, message, undefined, settle), true);
    assert.equal(await records.turn(entry.seq, 'test:a:c', output, message, undefined, settle), false);
    assert.equal(await records.failure(entry.seq, message, 'sorry', 'boom', undefined, settle), false);
    assert.equal(committed, 1);
    assert.equal(await outbox.pendingCount(), 1);
    assert.deepEqual(await database.all('SELECT turn FROM history'), [{ turn: entry.seq }]);
    assert.deepEqual(await database.all('SELECT status FROM inbox'), [{ status: 'done' }]);
  } finally {
    await database.close();
  }
});
