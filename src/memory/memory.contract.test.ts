/** The memory contract (test/contracts/memory.ts) on SQLite (one node) and PostgreSQL (a cluster). */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before } from 'node:test';
import { memoryContract } from '../../test/contracts/memory.ts';
import { testLogger } from '../../test/support/log.ts';
import { startPostgres, type TestPostgres } from '../../test/support/postgres.ts';
import { openDatabase } from '../store/db.ts';
import { openPostgres } from '../store/postgres/sql.ts';
import { createPostgresMemory } from './postgres.ts';
import { createSqliteMemory } from './sqlite.ts';

const dir = mkdtempSync(join(tmpdir(), 'sb-memory-contract-'));
let files = 0;
let server: TestPostgres;
before(async () => {
  server = await startPostgres();
});
after(() => {
  server?.stop();
  rmSync(dir, { recursive: true, force: true });
});

memoryContract('SQLite', async (embeddings) => {
  const path = join(dir, `m${files++}.db`);
  const db = openDatabase(path);
  const memory = createSqliteMemory({ db, path, log: testLogger(), embedBatchMs: 5, ...(embeddings ? { embeddings } : {}) });
  return {
    memory,
    close: async () => {
      await memory.close();
      db.close();
    },
  };
});

memoryContract('PostgreSQL', async (embeddings) => {
  const database = await openPostgres({ url: await server.createDatabase(), log: testLogger() });
  return { memory: createPostgresMemory({ sql: database, log: testLogger(), ...(embeddings ? { embeddings } : {}) }), close: () => database.close() };
});
