/** The turn-queue contract (test/contracts/turn-queue.ts) on pg-boss, on a real PostgreSQL started for this file (a fresh database per test). */
import { after, before } from 'node:test';
import { openPostgres } from '../store/postgres/sql.ts';
import { turnQueueContract } from '../../test/contracts/turn-queue.ts';
import { startPostgres, type TestPostgres } from '../../test/support/postgres.ts';
import { testLogger } from '../../test/support/log.ts';
import { createPgBossQueue } from './pg-boss-queue.ts';

let server: TestPostgres;
before(async () => {
  server = await startPostgres();
});
after(() => server?.stop());

turnQueueContract('pg-boss (PostgreSQL)', async () => {
  const url = await server.createDatabase();
  const database = await openPostgres({ url, log: testLogger() });
  return {
    database,
    // as app/compose/cluster.ts makes it, with the shortest heartbeat pg-boss takes
    queue: async ({ concurrency }) => createPgBossQueue({ url, log: testLogger(), concurrency, heartbeatSeconds: 10, turnTimeoutSeconds: 60, database }),
    close: () => database.close(),
  };
});
