/**
 * The pg-boss queue beyond the turn-queue contract: its wake-up path (pg-boss's own listener is
 * off and the queue LISTENs on the channel pg-boss NOTIFYs, a name derived from its schema: should
 * a pg-boss upgrade rename that channel, turns would still run, but only at the 5 s poll), a
 * turn's job ended in the turn's own transaction or, when that rolled back, by the queue, and a
 * message stored with its job in one statement.
 */
import assert from 'node:assert/strict';
import { after, before, it } from 'node:test';
import { openPostgres } from '../store/postgres/sql.ts';
import { startPostgres, type TestPostgres } from '../../test/support/postgres.ts';
import { testLogger } from '../../test/support/log.ts';
import { createPgBossQueue } from './pg-boss-queue.ts';

let server: TestPostgres;
before(async () => {
  server = await startPostgres();
});
after(() => server?.stop());

it('a turn stored while every worker sleeps is started by its NOTIFY, well before the 5 s poll', async () => {
  const url = await server.createDatabase();
  const database = await openPostgres({ url, log: testLogger() });
  const queue = await createPgBossQueue({ url, log: testLogger(), concurrency: 4, heartbeatSeconds: 10, turnTimeoutSeconds: 60, database });
  try {
    let started: (at: number) => void = () => undefined;
    const ran = new Promise<number>((resolve) => (started = resolve));
    await queue.start(async () => {
      started(Date.now());
      return 'done';
    }, async () => []);
    // every worker has made its first (empty) fetch and sleeps until woken or polled
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const ticket = await queue.reserve();
    await database.transaction((tx) => ticket.enqueue(tx, { seq: 1, conversation: 'terminal:local:me' }));
    const stored = Date.now();
    const at = await Promise.race([ran, new Promise<number>((resolve) => setTimeout(() => resolve(Number.POSITIVE_INFINITY), 4000))]);
    assert.ok(at - stored < 2500, `the turn started ${at - stored} ms after it was stored: no NOTIFY woke a worker`);
  } finally {
    await queue.stop(1000);
    await database.close();
  }
});

it('a turn whose settling transaction rolled back has its job completed by the queue: the conversation goes on at once', async () => {
  const url = await server.createDatabase();
  const database = await openPostgres({ url, log: testLogger() });
  const queue = await createPgBossQueue({ url, log: testLogger(), concurrency: 2, heartbeatSeconds: 10, turnTimeoutSeconds: 60, database });
  try {
    const ran: number[] = [];
    await queue.start(async (seq, _conversation, settle) => {
      ran.push(seq);
      if (seq === 1) {
        // the job's end issued in a transaction that then rolls back (as when the message was found answered)
        await assert.rejects(
          database.transaction(async (tx) => {
            await settle!.in(tx);
            throw new Error('rolled back');
          }),
        );
      } else {
        await database.transaction((tx) => settle!.in(tx));
        settle!.committed();
      }
      return 'done';
    }, async () => []);
    const started = Date.now();
    for (const seq of [1, 2, 3]) {
      const ticket = await queue.reserve();
      await database.transaction((tx) => ticket.enqueue(tx, { seq, conversation: 'terminal:local:me' }));
    }
    while (ran.length < 3 && Date.now() - started < 8000) await new Promise((resolve) => setTimeout(resolve, 50));
    assert.deepEqual(ran, [1, 2, 3], 'the turns ran in order, the first one\'s job not left active');
    await queue.idle();
    const states = await database.all<{ state: string }>("SELECT state::text AS state FROM pgboss.job_common WHERE name = 'switchboard-turns' ORDER BY created_on");
    assert.deepEqual(states.map((row) => row.state), ['completed', 'completed', 'completed']);
  } finally {
    await queue.stop(1000);
    await database.close();
  }
});

it('accepts a message and its job in one statement: the turn runs with the inbox seq, a redelivery stores nothing', async () => {
  const url = await server.createDatabase();
  const database = await openPostgres({ url, log: testLogger() });
  const queue = await createPgBossQueue({ url, log: testLogger(), concurrency: 2, heartbeatSeconds: 10, turnTimeoutSeconds: 60, database });
  try {
    const ran: Array<[number, string]> = [];
    await queue.start(async (seq, conversation) => {
      ran.push([seq, conversation]);
      return 'done';
    }, async () => []);
    const message = { channel: 'terminal', account: 'local', chat: 'me', id: 'm-1', sender: { id: 'me' }, text: 'hi', timestamp: 1 };
    const ticket = await queue.reserve();
    const accepted = await ticket.accept!(database, message);
    assert.equal(accepted?.conversation, 'terminal:local:me');
    const row = await database.get<{ seq: number; status: string; payload: string }>('SELECT seq, status, payload FROM inbox WHERE platform_id = ?', ['m-1']);
    assert.equal(row?.seq, accepted.seq);
    assert.deepEqual(JSON.parse(row.payload), message);
    assert.equal(await (await queue.reserve()).accept!(database, message), undefined, 'a redelivery');
    const started = Date.now();
    while (ran.length < 1 && Date.now() - started < 4000) await new Promise((resolve) => setTimeout(resolve, 20));
    assert.deepEqual(ran, [[accepted.seq, 'terminal:local:me']], 'its NOTIFY started the turn at once, and only one job was stored');
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.equal(ran.length, 1);
    assert.equal((await database.get<{ n: number }>("SELECT count(*) AS n FROM pgboss.job_common WHERE name = 'switchboard-turns'"))?.n, 1);
  } finally {
    await queue.stop(1000);
    await database.close();
  }
});
