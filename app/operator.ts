/**
 * The config and stores for an operator command (`switchboard memory …`, `pairing …`): the
 * same files as the daemon, without taking the data_dir lock (the daemon may be running) and
 * without requiring the provider's secrets.
 */
import { dirname, join, resolve } from 'node:path';
import type { Config } from '../src/config/schema.ts';
import { createLogger, type Logger } from '../src/log.ts';
import type { Memory } from '../src/memory.ts';
import { PairingStore } from '../src/policy/access.ts';
import { openDatabase, type Db } from '../src/store/db.ts';
import { withFileContext } from '../src/store/files.ts';
import type { Database } from '../src/store/sql.ts';
import { sqliteDatabase } from '../src/store/sqlite-sql.ts';
import { loadConfig, locateConfig } from './config.ts';
import { logLevel } from './compose/data-dir.ts';
import { buildMemory } from './compose/memory.ts';

function openOperatorDatabase(configFlag: string | undefined): { config: Config; dataDir: string; dbPath: string; db: Db } {
  const file = locateConfig(configFlag === undefined ? {} : { flag: configFlag });
  const { config } = loadConfig(file, process.env, { requireSecrets: false });
  const dataDir = resolve(dirname(file), config.data_dir);
  const dbPath = join(dataDir, 'switchboard.db');
  // The header only: these run beside the daemon, and must not read a big file every time.
  const db = withFileContext({ dataDir, configFile: file }, () => openDatabase(dbPath, { durability: config.runtime.durability, check: 'header' }));
  return { config, dataDir, dbPath, db };
}

/** The shared database of a cluster config (`[store] kind = "postgres"`), for an operator command; undefined for SQLite. */
async function operatorShared(config: Config, log: Logger): Promise<Database | undefined> {
  if (config.store.kind !== 'postgres') return undefined;
  const { openPostgres } = await import('../src/store/postgres/sql.ts');
  return openPostgres({ url: config.store.url!, log, maxConnections: 2 });
}

/** The memory for `switchboard memory …` (no hygiene pass); in a cluster, PostgreSQL's. */
export async function openOperatorMemory(configFlag: string | undefined): Promise<{ memory: Memory; close(): Promise<void> }> {
  const { config, dataDir, dbPath, db } = openOperatorDatabase(configFlag);
  const log = createLogger({ level: logLevel(config, 'warn'), format: config.log.format, stream: process.stderr });
  const shared = await operatorShared(config, log);
  const built = await buildMemory({ config, db, dbPath, dataDir, freshDatabase: false, log, hygiene: false, ...(shared ? { shared } : {}) });
  return {
    memory: built.memory,
    close: async () => {
      await built.close();
      await shared?.close();
      db.close();
    },
  };
}

/** The pairing store for `switchboard pairing …`; in a cluster, PostgreSQL's. */
export async function openOperatorPairing(configFlag: string | undefined): Promise<{ pairing: PairingStore; close(): Promise<void> }> {
  const { config, db } = openOperatorDatabase(configFlag);
  const shared = await operatorShared(config, createLogger({ level: logLevel(config, 'warn'), format: config.log.format, stream: process.stderr }));
  return {
    pairing: new PairingStore(shared ?? sqliteDatabase(db)),
    close: async () => {
      await shared?.close();
      db.close();
    },
  };
}
