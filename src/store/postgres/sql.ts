/**
 * {@link Database} over PostgreSQL (node-postgres `pg`, loaded only when `[store] kind =
 * "postgres"`). `?` placeholders become `$1…$n`; bigint and count(*) come back as numbers; a
 * transaction runs on one pooled connection between BEGIN and COMMIT.
 */
import { createRequire } from 'node:module';
import type { Pool, QueryResult } from 'pg';
import type { Logger } from 'pino';
import type { Database, Sql, SqlValue } from '../sql.ts';
import { postgresMigrations } from './schema.ts';
import { Batcher, batches, type PgParts } from './batch.ts';
import { batchable, Coalescer, SkippedError, TickShared, type Prepared, type Queryable } from './shared.ts';
import { storeUnavailable } from './unavailable.ts';

export interface PostgresOptions {
  readonly url: string;
  readonly log: Logger;
  /** Connections kept open at most. @default 10 */
  readonly maxConnections?: number;
  /**
   * Connections opened as soon as the schema is up to date (in the background: nothing waits for
   * them) and kept open while idle (pg-pool's `min`), at most `maxConnections`. A pool that grows
   * only when a burst comes makes that burst wait for the server to start backends: in the 3-node
   * bench's first 100 ms a turn fetch waited 38–123 ms for a connection being opened, while the
   * nodes' turns were starting. HikariCP, for one, recommends a fixed-size pool for the same
   * reason ("for maximum performance and responsiveness to spike demands"). @default 0
   */
  readonly keepOpen?: number;
}

/** `postgres://user:secret@host/db` → `postgres://user@host/db`: what logs and errors may show. */
export function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    parsed.password = '';
    return parsed.toString();
  } catch {
    return 'postgres://(unparsable url)';
  }
}

/** Numbers `?` placeholders as `$1…$n` (the stores' SQL holds no `?` inside literals). */
function numbered(sql: string): string {
  let n = 0;
  return sql.replace(/\?/g, () => `$${++n}`);
}


/**
 * The stores' statements, numbered once and named: a named statement is parsed and planned once
 * per connection, then each run sends only its parameters (node-postgres skips the Parse message
 * when the connection has it), which saves PostgreSQL the parse and plan of every statement of
 * every turn. A statement without parameters runs as a simple query: DDL and migrations (several
 * statements in one string, which a prepared statement cannot hold) stay on that path.
 */
class Statements {
  // Keyed by the SQL string as the caller holds it: a constant's hash is computed once, where a
  // key built per call (a prefix + the SQL) would be hashed again at every statement.
  readonly #stores = new Map<string, Prepared>();
  readonly #raw = new Map<string, Prepared>();
  #next = 0;

  /** A statement in the stores' `?` placeholders. */
  get(sql: string, parameters: number): Prepared {
    return this.#statement(this.#stores, sql, numbered, parameters);
  }

  /** A statement in PostgreSQL's own `$n` placeholders (pg-boss's, whose SQL may hold jsonb `?` operators). */
  raw(text: string, parameters: number): Prepared {
    return this.#statement(this.#raw, text, (same) => same, parameters);
  }

  #statement(cache: Map<string, Prepared>, sql: string, text: (sql: string) => string, parameters: number): Prepared {
    let statement = cache.get(sql);
    if (statement === undefined) {
      // SQL built at run time (IN lists of any length) could grow this without bound; new names
      // after a clear, since a connection keeps the statements it prepared under the old ones.
      if (cache.size >= 500) cache.clear();
      statement = parameters > 0 ? { name: `sb${++this.#next}`, text: text(sql), batchable: batchable(sql) } : { text: text(sql) };
      cache.set(sql, statement);
    }
    return statement;
  }
}

/** What a transaction's statements tell it (see PostgresDatabase.transaction). */
interface Transaction {
  /** Told of each statement that fails. */
  failed(error: unknown): void;
  /** See Sql.commitAhead. */
  ahead(answers: Promise<unknown>): void;
  /** Whether its COMMIT has gone out: a statement issued now would run outside it. */
  ended(): boolean;
}

class PostgresSql implements Sql {
  readonly dialect = 'postgres';
  protected readonly target: Queryable;
  protected readonly statements: Statements;
  readonly #writes: Coalescer | undefined;
  readonly #transaction: Transaction | undefined;

  constructor(target: Queryable, statements: Statements, writes?: Coalescer, transaction?: Transaction) {
    this.target = target;
    this.statements = statements;
    this.#writes = writes;
    this.#transaction = transaction;
    if (transaction) this.commitAhead = transaction.ahead;
  }

  readonly commitAhead?: (answers: Promise<unknown>) => void;

  #send(statement: Prepared, values: readonly unknown[]): Promise<QueryResult> {
    if (this.#transaction?.ended()) return Promise.reject(new Error(`a statement issued after its transaction's COMMIT had gone out, not run: ${statement.text.slice(0, 80)}`));
    this.#writes?.hold();
    const sent = this.target.query(statement, values as unknown[]);
    if (this.#transaction) sent.catch(this.#transaction.failed);
    return sent;
  }

  #query(sql: string, params: readonly SqlValue[]): Promise<QueryResult> {
    return this.#send(this.statements.get(sql, params.length), params);
  }

  async get<Row>(sql: string, params: readonly SqlValue[] = []): Promise<Row | undefined> {
    return (await this.#query(sql, params)).rows[0] as Row | undefined;
  }

  async all<Row>(sql: string, params: readonly SqlValue[] = []): Promise<Row[]> {
    return (await this.#query(sql, params)).rows as Row[];
  }

  async run(sql: string, params: readonly SqlValue[] = []): Promise<number> {
    return (await this.#query(sql, params)).rowCount ?? 0;
  }

  transaction<T>(work: (tx: Sql) => Promise<T>): Promise<T> {
    return work(this);
  }

  /** A statement in PostgreSQL's own placeholders ($1…), for libraries that bring their SQL (pg-boss). */
  async query(text: string, values: readonly unknown[] = []): Promise<{ rows: unknown[] }> {
    const result = await this.#send(this.statements.raw(text, values.length), values);
    return { rows: result.rows };
  }
}

/** The PostgreSQL connection behind `sql` (a database or an open transaction), or undefined on another engine. */
export function rawPostgres(sql: Sql): { query(text: string, values?: readonly unknown[]): Promise<{ rows: unknown[] }> } | undefined {
  if (sql instanceof PostgresSql) return sql;
  // a decorator of the port (the fault seam, src/store/faults.ts) names the Sql it wraps
  const inner = (sql as { readonly inner?: Sql }).inner;
  return inner === undefined ? undefined : rawPostgres(inner);
}

class PostgresDatabase extends PostgresSql implements Database {
  readonly name: string;
  readonly pool: Pool;
  readonly #alone: Sql;

  readonly #parts: PgParts;
  readonly #Batch: ReturnType<typeof batches>;

  constructor(pool: Pool, name: string, parts: PgParts) {
    const statements = new Statements();
    const Batch = batches(parts);
    super(new TickShared(pool, (client, writes) => new Batcher(client, parts, Batch, writes)), statements);
    this.pool = pool;
    this.name = name;
    this.#parts = parts;
    this.#Batch = Batch;
    this.#alone = new PostgresSql({ query: (statement, values) => pool.query({ ...statement, values }) }, statements);
  }

  alone(): Sql {
    return this.#alone;
  }

  override async transaction<T>(work: (tx: Sql) => Promise<T>): Promise<T> {
    const client = await this.pool.connect();
    let broken: unknown;
    // A connection that breaks between two statements emits 'error' on the client (no query to
    // reject); unheard, that would crash the process. The next statement fails and rolls back.
    const onError = (error: Error): void => {
      broken = error;
    };
    client.on('error', onError);
    try {
      // A tick's statements go out as one batch under one Sync (src/store/postgres/batch.ts), in the tick's write.
      const writes: Coalescer = new Coalescer(client, false, () => batcher.flush());
      const batcher = new Batcher(client, this.#parts, this.#Batch, writes);
      // Not awaited: on a pipelined connection (see openPostgres) BEGIN goes out with the first
      // statement (in one write and one batch), one round trip fewer per transaction. BEGIN fails
      // only with the connection, and then so does every statement behind it; its result is
      // checked before the COMMIT.
      const begun = batcher.batched({ text: 'BEGIN' });
      begun.catch(() => undefined);
      /** The first statement of `work` that failed: one whose answer `work` did not wait for fails the transaction all the same. */
      let failure: { readonly error: unknown } | undefined;
      let committing: Promise<QueryResult> | undefined;
      const commit = (): Promise<QueryResult> => (committing ??= batcher.batched({ text: 'COMMIT' }));
      /** Given by work through commitAhead: its statements' answers, and the write they (and maybe the COMMIT) went out in. */
      let ahead: { readonly answers: Promise<unknown>; readonly written: Promise<void>; failed: boolean } | undefined;
      const transaction: Transaction = {
        failed: (error) => (failure ??= { error }),
        ahead: (answers) => {
          if (ahead) throw new Error('commitAhead called twice in one transaction');
          const given = { answers, written: Promise.resolve(), failed: false };
          answers.catch(() => (given.failed = true));
          // Just before the statements' write goes out, every promise job of this tick has run:
          // a failure of `work` on this side (nothing sent) has shown by then, and the COMMIT is left out.
          given.written = new Promise((resolve) =>
            writes.beforeWrite(() => {
              if (!given.failed && failure === undefined) commit().catch(() => undefined);
              resolve();
            }),
          );
          ahead = given;
        },
        ended: () => committing !== undefined,
      };
      try {
        const result = await work(new PostgresSql(batcher, this.statements, writes, transaction));
        if (ahead) {
          await ahead.written;
          // no COMMIT went out: `work` failed on this side; its failure is the transaction's
          if (committing === undefined) await ahead.answers;
        }
        // A transaction a statement failed in is rolled back by its COMMIT, which then answers
        // ROLLBACK, not an error: a statement issued without waiting for its answer (a turn's job,
        // src/cluster/pg-boss-queue.ts, goes out with the COMMIT) would otherwise be lost unseen.
        // Under one Sync with a statement that failed, the COMMIT is not run at all (SkippedError): as a ROLLBACK answer.
        const committed = await commit().catch((error: unknown) => {
          if (error instanceof SkippedError) return undefined;
          throw error;
        });
        await begun;
        if (committed?.command !== 'COMMIT') {
          // work's own reason first (as when it waits for its answers and throws), then the statement's
          const reason = ahead && (await ahead.answers.then(() => undefined, (error: unknown) => ({ error })));
          throw reason?.error ?? failure?.error ?? new Error(`PostgreSQL answered the COMMIT with ${committed?.command ?? 'nothing'}: a statement of the transaction failed`);
        }
        // committed: every statement succeeded; a failure on this side after its answer still fails the call
        await ahead?.answers;
        return result;
      } catch (error) {
        await batcher.single({ text: 'ROLLBACK' }).catch((rollback: unknown) => (broken = rollback));
        throw error;
      }
    } finally {
      client.off('error', onError);
      client.release(broken instanceof Error ? broken : undefined);
    }
  }

  async close(): Promise<void> {
    await this.pool.end();
  }
}

/**
 * Connects to PostgreSQL and brings its schema up to date (once, whichever node gets there
 * first). Throws StoreUnavailableError (src/store/postgres/unavailable.ts) naming the server
 * (never its password), the cause and the fix when it cannot.
 */
export async function openPostgres(options: PostgresOptions): Promise<Database & { readonly pool: Pool }> {
  const { default: pg } = await import('pg');
  const name = redactUrl(options.url);
  const max = options.maxConnections ?? 10;
  const keepOpen = Math.min(options.keepOpen ?? 0, max);
  // one parser for every int8 and numeric column (pg asks for a column's parser at every statement's answer)
  const asNumber = (value: string): number => Number(value);
  const types = { getTypeParser: (oid: number, format?: 'text' | 'binary') => (oid === 20 || oid === 1700 ? asNumber : pg.types.getTypeParser(oid, format as 'text')) } as never;
  const pool = new pg.Pool({
    connectionString: options.url,
    max,
    min: keepOpen,
    connectionTimeoutMillis: 10_000,
    // A statement is written as soon as it is queued, not after the answer to the one before:
    // what lets a transaction's BEGIN travel with its first statement.
    pipeline: true,
    // no statement waits forever on a connection the server dropped without a word
    query_timeout: 30_000,
    idleTimeoutMillis: 30_000,
    // ids and epoch milliseconds (bigint), count(*) and sum() (numeric) as numbers, per pool (not pg's global parsers)
    types,
  });
  // An idle connection that breaks (server restart) is dropped by the pool; without a listener it would crash the process.
  pool.on('error', (error) => options.log.warn({ err: error, database: name }, 'PostgreSQL connection lost; the pool opens a new one on next use'));
  // pg's own mapping of a parameter to the wire (Date, Buffer, arrays, objects as JSON), not re-exported by its index
  const utils = createRequire(import.meta.url)('pg/lib/utils.js') as { prepareValue(value: unknown): unknown };
  const database = new PostgresDatabase(pool, name, { Query: pg.Query, Result: pg.Result as never, prepareValue: utils.prepareValue, types });
  try {
    await migrate(database);
  } catch (error) {
    await pool.end().catch(() => undefined);
    throw storeUnavailable(name, error);
  }
  await warnOfLossyCommits(database, options.log, name);
  if (keepOpen > 0) void openAhead(pool, keepOpen, options.log, name);
  return database;
}

/** Opens `count` connections of `pool` now and leaves them idle in it ({@link PostgresOptions.keepOpen}). */
async function openAhead(pool: Pool, count: number, log: Logger, name: string): Promise<void> {
  const opened = await Promise.allSettled(Array.from({ length: count }, () => pool.connect()));
  for (const result of opened) if (result.status === 'fulfilled') result.value.release();
  const failed = opened.find((result): result is PromiseRejectedResult => result.status === 'rejected');
  // the pool was closed meanwhile (a node stopping at once), or the server is at its max_connections
  if (failed && !pool.ending) log.warn({ err: failed.reason, database: name, keepOpen: count }, 'could not open the PostgreSQL connections kept ready; they open when needed');
}

/**
 * A server with `synchronous_commit = off` acknowledges a commit before its WAL is written, so a
 * crash of the server loses commits the daemon was told about: a message confirmed to the
 * platform (Telegram's offset moved past it) is then gone from the inbox. Said once at start.
 */
async function warnOfLossyCommits(database: Sql, log: Logger, name: string): Promise<void> {
  const setting = (await database.get<{ synchronous_commit: string }>('SHOW synchronous_commit').catch(() => undefined))?.synchronous_commit;
  if (setting === 'off') {
    log.warn({ database: name, synchronous_commit: setting }, 'PostgreSQL runs with synchronous_commit = off: a crash of the database server can lose messages already confirmed to their platforms. Set it to on (the default) for Switchboard\'s database, e.g. ALTER DATABASE … SET synchronous_commit = on');
  }
}

/** Any 64-bit number unique to Switchboard's migrations. */
const MIGRATION_LOCK = 0x5b_0a_4d;

async function migrate(database: PostgresDatabase): Promise<void> {
  // One transaction under one lock: nodes starting together wait here, and the first applies each step.
  await database.transaction(async (tx) => {
    await tx.run(`SELECT pg_advisory_xact_lock(${MIGRATION_LOCK})`);
    await tx.run('CREATE TABLE IF NOT EXISTS switchboard_migrations (version integer PRIMARY KEY, applied_at bigint NOT NULL)');
    const newest = (await tx.get<{ version: number | null }>('SELECT max(version) AS version FROM switchboard_migrations'))?.version ?? 0;
    if (newest > postgresMigrations.length) {
      throw new Error(`its schema version ${newest} is newer than this Switchboard knows (${postgresMigrations.length}); upgrade every node to the same version`);
    }
    for (let version = newest + 1; version <= postgresMigrations.length; version++) {
      await tx.run(postgresMigrations[version - 1]!);
      await tx.run('INSERT INTO switchboard_migrations (version, applied_at) VALUES (?, ?)', [version, Date.now()]);
    }
  });
}
