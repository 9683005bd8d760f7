/**
 * Turns `[memory]` into a Memory backend (with cached embeddings when configured), hydrates a
 * fresh database from MEMORY_SNAPSHOT.md, and runs the hygiene pass (expiry + snapshot) from
 * `startHygiene()` and every `hygiene_hours` after. The daemon starts it once `ready` is
 * logged: the pass's SQL (a DELETE over old memories on a big database) runs on the main
 * thread, and its snapshot write starts libuv's thread pool — neither needs to come before ready.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { Config } from '../../src/config/schema.ts';
import type { EmbeddingProvider, Memory } from '../../src/memory.ts';
import type { Db } from '../../src/store/db.ts';
import type { Sql } from '../../src/store/sql.ts';

export interface BuiltMemory {
  readonly memory: Memory;
  /** Runs the first hygiene pass now and starts its timer (once; nothing when hygiene is off). */
  startHygiene(): void;
  /** Stops the hygiene timer and the backend. */
  close(): Promise<void>;
}

export interface MemoryDeps {
  readonly config: Config;
  readonly db: Db;
  /** The daemon's SQLite store's group-commit write (see SqliteMemoryOptions.write); absent = writes commit at once. */
  readonly write?: <T>(work: () => T) => Promise<T>;
  readonly dbPath: string;
  readonly dataDir: string;
  /** Whether the database file existed before this start (a missing one hydrates from the snapshot). */
  readonly freshDatabase: boolean;
  readonly log: Logger;
  /** Run the hygiene pass (at start and on a timer). Off for one-shot operator commands. @default true */
  readonly hygiene?: boolean;
  /** Cluster mode: the shared PostgreSQL database, where memories live instead of the SQLite (or Markdown) backend. */
  readonly shared?: Sql;
}

export async function buildMemory(deps: MemoryDeps): Promise<BuiltMemory> {
  const settings = deps.config.memory;
  const log = deps.log.child({ component: 'memory' });
  let memory: Memory;
  let deleteOlderThan: ((category: string, beforeMs: number) => Promise<number> | number) | undefined;
  switch (deps.shared && settings.backend !== 'none' ? 'postgres' : settings.backend) {
    case 'postgres': {
      const { createPostgresMemory } = await import('../../src/memory/postgres.ts');
      if (settings.backend === 'markdown') log.info('[store] kind = "postgres": memories are kept in PostgreSQL (shared by every node), not in Markdown files');
      const postgres = createPostgresMemory({ sql: deps.shared!, log, ...((await embeddings(deps, log)) ?? {}), vectorWeight: settings.vector_weight, keywordWeight: settings.keyword_weight });
      memory = postgres;
      deleteOlderThan = (category, before) => postgres.deleteOlderThan(category, before);
      break;
    }
    case 'none': {
      const { createNoneMemory } = await import('../../src/memory/none.ts');
      return { memory: createNoneMemory(), startHygiene: () => undefined, close: async () => undefined };
    }
    case 'markdown': {
      const { createMarkdownMemory } = await import('../../src/memory/markdown.ts');
      memory = createMarkdownMemory({ dir: deps.dataDir, log });
      break;
    }
    case 'sqlite': {
      const { createSqliteMemory } = await import('../../src/memory/sqlite.ts');
      const sqlite = createSqliteMemory({
        db: deps.db,
        ...(deps.write ? { write: deps.write } : {}),
        path: deps.dbPath,
        ...((await embeddings(deps, log)) ?? {}),
        vectorWeight: settings.vector_weight,
        keywordWeight: settings.keyword_weight,
        maxIndexMb: settings.max_index_mb,
        log,
      });
      memory = sqlite;
      deleteOlderThan = (category, before) => sqlite.deleteOlderThan(category, before);
      break;
    }
  }
  const snapshotFile = join(deps.dataDir, 'MEMORY_SNAPSHOT.md');
  const { createHygiene, hydrateFromSnapshot } = await import('../../src/memory/snapshot.ts');
  if (deps.freshDatabase && settings.backend === 'sqlite' && !deps.shared && existsSync(snapshotFile)) {
    const restored = await hydrateFromSnapshot(memory, snapshotFile);
    log.info({ restored, snapshot: snapshotFile }, 'fresh database: core memories restored from the snapshot');
  }
  if (deps.hygiene === false) return { memory, startHygiene: () => undefined, close: async () => memory.close?.() };
  const hygiene = createHygiene({ memory, snapshotFile, retentionDays: settings.conversation_retention_days, ...(deleteOlderThan ? { deleteOlderThan } : {}), log });
  const runHygiene = (): void =>
    void hygiene.run().then(
      (result: { expired: number; snapshotted: number }) => log.debug(result, 'memory hygiene pass'),
      (error: unknown) => log.warn({ err: error }, 'memory hygiene pass failed; will try again'),
    );
  let timer: NodeJS.Timeout | undefined;
  let closed = false;
  return {
    memory,
    startHygiene: () => {
      if (timer !== undefined || closed) return;
      runHygiene();
      timer = setInterval(runHygiene, settings.hygiene_hours * 3_600_000);
      timer.unref();
    },
    close: async () => {
      closed = true;
      clearInterval(timer);
      await memory.close?.();
    },
  };
}

async function embeddings(deps: MemoryDeps, log: Logger): Promise<{ embeddings: EmbeddingProvider } | undefined> {
  const settings = deps.config.memory.embeddings;
  if (settings.kind === 'none') return undefined;
  const { createOpenAIEmbeddings } = await import('../../src/memory/embeddings.ts');
  const { EmbeddingCache, createCachedEmbeddings } = await import('../../src/memory/embedding-cache.ts');
  const provider = createOpenAIEmbeddings({
    baseUrl: settings.base_url,
    model: settings.model,
    timeoutMs: settings.timeout_seconds * 1000,
    ...(settings.api_key === undefined ? {} : { apiKey: settings.api_key }),
    ...(settings.dimensions === undefined ? {} : { dimensions: settings.dimensions }),
  });
  return { embeddings: createCachedEmbeddings(provider, new EmbeddingCache(deps.db), { maxEntries: settings.cache_size, log }) };
}
