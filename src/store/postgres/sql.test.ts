/** The PostgreSQL adapter's transactions, on a real PostgreSQL started for this file. */
import assert from 'node:assert/strict';
import { after, before, it } from 'node:test';
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
