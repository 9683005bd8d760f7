/** The PostgreSQL adapter's transactions, on a real PostgreSQL started for this file. */
import assert from 'node:assert/strict';
import { after, before, it } from 'node:test';
import type { Pool } from 'pg';
import { openPostgres, rawPostgres } from './sql.ts';
import { startPostgres, type TestPostgres } from '../../../test/support/postgres.ts';
import { testLogger } from '../../../test/support/log.ts';

let server: TestPostgres;
before(async () => {
  server = await startPostgres();
});
after(() => server?.stop());

it('a statement whose answer the transaction did not wait for, failing, fails the transaction with its error and commits nothing', async () => {
  const database = await openPostgres({ url: await server.createDatabase(), log: testLogger() });
  try {
    await database.run('CREATE TABLE t (n integer PRIMARY KEY)');
    await assert.rejects(
      database.transaction(async (tx) => {
        await tx.run('INSERT INTO t (n) VALUES (?)', [1]);
        // issued, not waited for: the COMMIT goes out behind it
        rawPostgres(tx)!.query('INSERT INTO t (n) VALUES ($1)', [1]).catch(() => undefined);
      }),
      (error: Error & { code?: string }) => error.code === '23505',
    );
    assert.deepEqual(await database.all('SELECT n FROM t'), []);
    // the connection is fine afterwards, and a transaction whose statements all succeed commits
    await database.transaction(async (tx) => {
      rawPostgres(tx)!.query('INSERT INTO t (n) VALUES ($1)', [2]).catch(() => undefined);
    });
    assert.deepEqual(await database.all('SELECT n FROM t'), [{ n: 2 }]);
  } finally {
    await database.close();
  }
});

it('commitAhead: the COMMIT goes out with the statements; a failure on the server or on this side commits nothing, and a statement issued after it does not run', async () => {
  const database = await openPostgres({ url: await server.createDatabase(), log: testLogger() });
  try {
    await database.run('CREATE TABLE t (n integer PRIMARY KEY)');
    // all succeed: committed, and the call waits for the answers
    let answered = false;
    await database.transaction(async (tx) => {
      const insert = tx.run('INSERT INTO t (n) VALUES (?)', [1]).then(() => (answered = true));
      tx.commitAhead!(insert);
    });
    assert.equal(answered, true);
    assert.deepEqual(await database.all('SELECT n FROM t'), [{ n: 1 }]);
    // a statement fails on the server: the COMMIT answers ROLLBACK, the call fails with the answers' reason
    await assert.rejects(
      database.transaction(async (tx) => {
        tx.commitAhead!(Promise.all([tx.run('INSERT INTO t (n) VALUES (?)', [2]), tx.run('INSERT INTO t (n) VALUES (?)', [1])]));
      }),
      (error: Error & { code?: string }) => error.code === '23505',
    );
    // a failure on this side before the write went out: no COMMIT, nothing of it committed
    await assert.rejects(
      database.transaction(async (tx) => {
        tx.commitAhead!(Promise.all([tx.run('INSERT INTO t (n) VALUES (?)', [3]), Promise.reject(new Error('not serializable'))]));
      }),
      /not serializable/,
    );
    // a statement issued once the COMMIT has gone out is refused, not run outside the transaction
    let late: Promise<unknown> | undefined;
    await database.transaction(async (tx) => {
      const first = tx.run('INSERT INTO t (n) VALUES (?)', [4]);
      tx.commitAhead!(first);
      // its outcome held at once: it fails before this test awaits it
      late = first.then(() => tx.run('INSERT INTO t (n) VALUES (?)', [5])).then(
        () => 'ran',
        (error: Error) => error.message,
      );
    });
    assert.match(String(await late), /after its transaction's COMMIT/);
    assert.deepEqual(await database.all('SELECT n FROM t ORDER BY n'), [{ n: 1 }, { n: 4 }]);
  } finally {
    await database.close();
  }
});

it('keepOpen: that many connections are opened without being waited for and kept idle in the pool, never more than maxConnections', async () => {
  const url = await server.createDatabase();
  const database = await openPostgres({ url, log: testLogger(), maxConnections: 4, keepOpen: 6 });
  try {
    const deadline = Date.now() + 10_000;
    while (database.pool.totalCount < 4 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    assert.equal(database.pool.totalCount, 4);
    assert.equal(database.pool.idleCount, 4);
    // pg-pool closes an idle connection after idleTimeoutMillis only above `min`
    assert.equal((database.pool as unknown as { options: { min: number } }).options.min, 4);
    const backends = await database.get<{ n: number }>('SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND backend_type = ?', ['client backend']);
    assert.equal(backends?.n, 4);
  } finally {
    await database.close();
  }
  const plain = await openPostgres({ url, log: testLogger() });
  try {
    assert.equal(plain.pool.totalCount, 1, 'without keepOpen only the connection start-up used stays');
  } finally {
    await plain.close();
  }
});

it('statements issued outside a transaction in one turn of the event loop share a connection, in separate callbacks too; alone() gives each its own', async () => {
  const database = await openPostgres({ url: await server.createDatabase(), log: testLogger() });
  try {
    const pid = 'SELECT pg_backend_pid() AS pid';
    // two timers due together run in one turn of the loop, each in a callback (and a tick) of its own
    const issued = await new Promise<Array<Promise<{ pid: number } | undefined>>>((resolve) => {
      const got: Array<Promise<{ pid: number } | undefined>> = [];
      setTimeout(() => got.push(database.get(pid)));
      setTimeout(() => resolve([...got, database.get(pid)]));
    });
    const [first, second] = await Promise.all(issued);
    assert.equal(first!.pid, second!.pid);
    // a statement that may run long (a bulk DELETE) holds up no other: a connection of its own
    const [shared, alone] = await Promise.all([database.get<{ pid: number }>(pid), database.alone!().get<{ pid: number }>(pid)]);
    assert.notEqual(shared!.pid, alone!.pid);
  } finally {
    await database.close();
  }
});

it("a transaction's statements of one tick go out under one Sync: one answer for BEGIN, the statements and the COMMIT; after one fails the rest are not run, and the connection's prepared statements stay known", async () => {
  // one connection: what the transaction prepares (or not) is what the statements after it find
  const database = await openPostgres({ url: await server.createDatabase(), log: testLogger(), maxConnections: 1 });
  try {
    await database.run('CREATE TABLE u (n integer PRIMARY KEY)');
    const ready = readyForQueries(database);
    await database.transaction(async (tx) => {
      tx.commitAhead!(Promise.all([tx.run('INSERT INTO u (n) VALUES (?)', [1]), tx.run('INSERT INTO u (n) VALUES (?)', [2]), tx.get('SELECT count(*) AS n FROM u WHERE n > ?', [0])]));
    });
    assert.equal(ready(), 1, 'BEGIN, three statements and the COMMIT answered with one ReadyForQuery');
    // a new statement fails on the server (its Parse succeeded); the one behind it, new too, is skipped with its Parse
    let behind: unknown;
    await assert.rejects(
      database.transaction(async (tx) => {
        const failing = tx.run('INSERT INTO u (n) VALUES (?) RETURNING n', [1]);
        const skipped = tx.get('SELECT ? + 1 AS m', [1]).catch((error: unknown) => {
          behind = error;
          throw error;
        });
        tx.commitAhead!(Promise.all([failing, skipped]));
      }),
      (error: Error & { code?: string }) => error.code === '23505',
    );
    assert.match(String(behind), /not run: a statement before it in its transaction failed/);
    // the skipped one is prepared when next used (not taken as prepared), the failed one is not prepared twice
    assert.deepEqual(await database.get('SELECT ? + 1 AS m', [1]), { m: 2 });
    assert.deepEqual(await database.all('INSERT INTO u (n) VALUES (?) RETURNING n', [3]), [{ n: 3 }]);
    assert.deepEqual(await database.all('SELECT n FROM u ORDER BY n'), [{ n: 1 }, { n: 2 }, { n: 3 }]);
  } finally {
    await database.close();
  }
});

it('reads outside a transaction issued in one turn of the event loop share one Sync; a read skipped after another failed runs on its own; writes never share one', async () => {
  const database = await openPostgres({ url: await server.createDatabase(), log: testLogger(), maxConnections: 1 });
  try {
    await database.run('CREATE TABLE v (n integer)');
    const ready = readyForQueries(database);
    const answers = await Promise.all([database.get('SELECT ?::int AS a', [1]), database.get('SELECT ?::int + 1 AS b', [1]), database.all('SELECT n FROM v WHERE n > ?', [0])]);
    assert.deepEqual(answers, [{ a: 1 }, { b: 2 }, []]);
    assert.equal(ready(), 1, 'three reads answered with one ReadyForQuery');
    // the first read fails: the second, skipped by PostgreSQL, is run again and answers
    const [failed, second] = await Promise.allSettled([database.get('SELECT 1 / ?::int AS x', [0]), database.get('SELECT ?::int AS y', [5])]);
    assert.equal(failed.status, 'rejected');
    assert.equal((failed as PromiseRejectedResult).reason.code, '22012');
    assert.deepEqual(second, { status: 'fulfilled', value: { y: 5 } });
    // a write answered before a read that fails is not undone with it (each has its own Sync), nor is a NOTIFY
    const [written, notified, read] = await Promise.allSettled([database.run('INSERT INTO v (n) VALUES (?)', [1]), database.get('SELECT pg_notify(?, ?)', ['c', 'x']), database.get('SELECT 1 / ?::int AS x', [0])]);
    assert.equal(written.status, 'fulfilled');
    assert.equal(notified.status, 'fulfilled');
    assert.equal(read.status, 'rejected');
    assert.deepEqual(await database.all('SELECT n FROM v'), [{ n: 1 }]);
  } finally {
    await database.close();
  }
});

/** Counts the ReadyForQuery messages PostgreSQL sends `database`'s connections while they are checked out (one per Sync answered). */
function readyForQueries(database: { readonly pool: Pool }): () => number {
  let ready = 0;
  const count = (): void => void ready++;
  database.pool.on('acquire', (client) => (client as unknown as { connection: NodeJS.EventEmitter }).connection.on('readyForQuery', count));
  database.pool.on('release', (_error, client) => (client as unknown as { connection: NodeJS.EventEmitter }).connection.off('readyForQuery', count));
  return () => ready;
}
