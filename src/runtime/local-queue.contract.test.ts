/** The turn-queue contract (test/contracts/turn-queue.ts) on the local queue, over SQLite in memory. */
import { openDatabase } from '../store/db.ts';
import { sqliteDatabase } from '../store/sqlite-sql.ts';
import { turnQueueContract } from '../../test/contracts/turn-queue.ts';
import { createLocalQueue } from './local-queue.ts';

turnQueueContract('local (p-queue)', async () => {
  const db = openDatabase(':memory:');
  return {
    database: sqliteDatabase(db),
    queue: async ({ concurrency, maxQueued }) => createLocalQueue({ concurrency, maxQueued }),
    close: async () => void db.close(),
  };
});
