/**
 * The one door every durable store goes through: a few async calls that SQLite
 * (better-sqlite3, src/store/sqlite-sql.ts) and PostgreSQL (pg, src/store/postgres/sql.ts) both
 * implement. Stores write portable SQL with `?` placeholders (PostgreSQL's adapter numbers
 * them), so one store class serves both engines and the storage contract suite
 * (src/store/store.contract.test.ts) holds them to the same behaviour. Where the engines truly
 * differ (full-text search) a store has one implementation per engine.
 *
 * Integers come back as JavaScript numbers on both (PostgreSQL's bigint included: ids and
 * epoch milliseconds stay far below 2^53).
 */
export type SqlValue = string | number | bigint | Buffer | null;

export interface Sql {
  readonly dialect: 'sqlite' | 'postgres';
  /** The first row, or undefined. */
  get<Row>(sql: string, params?: readonly SqlValue[]): Promise<Row | undefined>;
  all<Row>(sql: string, params?: readonly SqlValue[]): Promise<Row[]>;
  /** Runs a statement; returns how many rows it changed. */
  run(sql: string, params?: readonly SqlValue[]): Promise<number>;
  /**
   * Runs `work` in one transaction: every call on `tx` commits together or not at all.
   * Calls on the outer object wait until it ends. Inside a transaction this runs `work` in it.
   */
  transaction<T>(work: (tx: Sql) => Promise<T>): Promise<T>;
}

/** The whole database: the statements, and how to close it. */
export interface Database extends Sql {
  /** What to call it in messages (a file path, or the server without its password). */
  readonly name: string;
  close(): Promise<void>;
}
