/**
 * The console's own read queries on a real (in-memory) SQLite database, written through the
 * daemon's own stores: conversation list by last activity, history search (LIKE wildcards
 * in the text are plain characters), transcripts with senders, open approvals, approved
 * senders, revoking and denying; a browser chat in the order it was said, commands included.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ApprovalStore } from '../agent/approvals.ts';
import { PairingStore } from '../policy/access.ts';
import type { InboxEntry } from '../store/inbox.ts';
import { openDatabase } from '../store/db.ts';
import { History } from '../store/history.ts';
import { Inbox } from '../store/inbox.ts';
import { Outbox } from '../store/outbox.ts';
import { openPostgres } from '../store/postgres/sql.ts';
import type { Database } from '../store/sql.ts';
import { sqliteDatabase } from '../store/sqlite-sql.ts';
import { testLogger } from '../../test/support/log.ts';
import { startPostgres, type TestPostgres } from '../../test/support/postgres.ts';
import { createConsoleQueries, type ConsoleQueries } from './queries.ts';

let server: TestPostgres | undefined;
after(() => server?.stop());

const engines: ReadonlyArray<readonly [string, () => Promise<Database>]> = [
  ['SQLite', async () => sqliteDatabase(openDatabase(':memory:'))],
  [
    'PostgreSQL',
    async () => {
      server ??= await startPostgres();
      return openPostgres({ url: await server.createDatabase(), log: testLogger() });
    },
  ],
];

for (const [engine, open] of engines) describe(`console queries (${engine})`, () => {
  let db: Database;
  let queries: ConsoleQueries;
  let b: InboxEntry;
  const message = (chat: string, id: string, text: string, sender = chat) => ({ channel: 'telegram', account: 'bot', chat, id, sender: { id: sender, name: sender.toUpperCase() }, text, timestamp: 0 });

  before(async () => {
    db = await open();
    queries = createConsoleQueries(db);
    const inbox = new Inbox(db);
    const history = new History(db);
    const a = (await inbox.accept(message('1', 'm1', 'hello 100% real_deal'), 1000))!;
    await history.append(a.conversation, a.seq, [{ role: 'user', content: 'hello 100% real_deal' }, { role: 'assistant', content: '', toolCalls: [{ id: 't1', name: 'shell', arguments: '{"command":"ls"}' }] }, { role: 'tool', toolCallId: 't1', name: 'shell', content: 'exit code 0' }, { role: 'assistant', content: 'done' }], 2000);
    b = (await inbox.accept(message('2', 'm2', 'later one'), 3000))!;
    await history.append(b.conversation, b.seq, [{ role: 'user', content: 'later one' }, { role: 'assistant', content: 'reply' }], 4000);
    await inbox.accept(message('3', 'm3', 'a stranger waiting'), 5000);
  });
  after(() => db?.close());

  it('lists conversations by last activity, with people and the last line', async () => {
    const rows = await queries.conversations(10);
    assert.deepEqual(rows.map((r) => [r.conversation, r.messages, r.lastLine, r.people.join()]), [
      ['telegram:bot:3', 0, 'a stranger waiting', '3'],
      ['telegram:bot:2', 2, 'reply', '2'],
      ['telegram:bot:1', 4, 'done', '1'],
    ]);
  });

  it('searches history case-insensitively, with % and _ taken literally', async () => {
    assert.deepEqual((await queries.search('100%', 10)).map((h) => h.conversation), ['telegram:bot:1']);
    assert.deepEqual(await queries.search('0%r', 10), []);
    assert.deepEqual((await queries.search('REAL_deal', 10)).map((h) => h.role), ['user']);
    assert.deepEqual(await queries.search('real-deal', 10), []);
  });

  it('gives a transcript in order, with tool calls and the sender', async () => {
    const entries = await queries.transcript('telegram:bot:1', 100);
    assert.deepEqual(entries.map((e) => e.message.role), ['user', 'assistant', 'tool', 'assistant']);
    assert.equal(entries[0]!.sender, '1'.toUpperCase());
    assert.equal(entries[1]!.message.role === 'assistant' && entries[1]!.message.toolCalls?.[0]?.name, 'shell');
  });

  it('gives a chat in the order it was said: each message, then its replies, commands and unanswered ones included', async () => {
    const inbox = new Inbox(db);
    const outbox = new Outbox(db);
    const history = new History(db);
    const web = (id: string, text: string) => ({ channel: 'web', account: 'console', chat: 'ada', id, sender: { id: 'ada', name: 'ada' }, text, timestamp: 0, direct: true });
    const ref = { channel: 'web', account: 'console', chat: 'ada' };
    const turn = async (id: string, text: string, at: number, replies: readonly string[], model: boolean) => {
      const entry = (await inbox.accept(web(id, text), at))!;
      if (model) await history.append(entry.conversation, entry.seq, [{ role: 'user', content: text }, { role: 'assistant', content: '', toolCalls: [{ id: 't', name: 'shell', arguments: '{}' }] }, { role: 'tool', toolCallId: 't', name: 'shell', content: 'ok' }, { role: 'assistant', content: replies[0]! }], at + 1);
      // A command's answer is recorded at once; the outbox rows are written after the inbox's.
      for (const reply of replies) await outbox.add({ ...ref, text: reply, replyTo: id }, entry.seq, at + 2);
      return entry;
    };
    await turn('w1', 'hello', 10_000, ['hi there'], true);
    await turn('w2', '/status', 11_000, ['Up 1s and running'], false);
    await turn('w3', 'and now?', 12_000, ['fine'], true);
    await turn('w4', 'this one failed', 13_000, ['Sorry, the model could not be reached.'], false);
    await turn('w5', 'still waiting', 14_000, [], false);
    const lines = await queries.chat('web:console:ada', 100);
    assert.deepEqual(lines.map((line) => [line.role, line.text]), [
      ['user', 'hello'],
      ['assistant', 'hi there'],
      ['user', '/status'],
      ['assistant', 'Up 1s and running'],
      ['user', 'and now?'],
      ['assistant', 'fine'],
      ['user', 'this one failed'],
      ['assistant', 'Sorry, the model could not be reached.'],
      ['user', 'still waiting'],
    ]);
    assert.deepEqual((await queries.chat('web:console:ada', 3)).map((line) => line.text), ['this one failed', 'Sorry, the model could not be reached.', 'still waiting'], 'the last ones');
    // `/new` sets the history aside; the person still sees what was said (as on any platform).
    await history.clear('web:console:ada');
    assert.deepEqual((await queries.chat('web:console:ada', 100)).map((line) => line.text), lines.map((line) => line.text));
    assert.deepEqual(await queries.chat('web:console:bob', 100), []);
  });

  it('lists open approvals with what would run', async () => {
    const approvals = new ApprovalStore(db);
    await approvals.save({
      conversation: 'telegram:bot:2',
      originTurn: b.seq,
      channel: 'telegram',
      senderId: '2',
      paused: { turn: [], iteration: 1, xml: false, calls: [{ call: { id: 'c', name: 'shell', arguments: '{}' }, outcome: 'ask', args: { command: 'touch x' }, summary: 'shell: touch x' }] },
    });
    const rows = await queries.pendingApprovals();
    assert.deepEqual(rows.map((r) => [r.conversation, r.senderId, r.calls[0]?.summary]), [['telegram:bot:2', '2', 'shell: touch x']]);
    await approvals.clear('telegram:bot:2');
    assert.deepEqual(await queries.pendingApprovals(), []);
  });

  it('lists, revokes and denies pairings', async () => {
    const pairing = new PairingStore(db);
    const { code } = await pairing.requestCode('telegram', '7');
    const other = (await pairing.requestCode('telegram', '8')).code;
    await pairing.approve('telegram', code);
    assert.deepEqual((await queries.approvedSenders()).map((s) => s.senderId), ['7']);
    assert.equal(await queries.revokeSender('telegram', '7'), true);
    assert.equal(await queries.revokeSender('telegram', '7'), false);
    assert.equal(await pairing.isApproved('telegram', '7'), false);
    assert.equal(await queries.denyCode('telegram', other.toLowerCase()), true);
    assert.deepEqual(await pairing.pending(), []);
  });
});
