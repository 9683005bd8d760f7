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
  /**
   * Inside a transaction whose COMMIT fails when any statement issued in it failed on the server
   * (PostgreSQL), and only there: `work` has issued every statement it will, and `answers`
   * settles once they are answered, rejecting when `work` fails. `work` may then return without
   * waiting: the COMMIT goes out in the same write as the statements (one round trip, not two)
   * unless `answers` rejected first, and the transaction fails if `answers` rejects. A statement
   * issued after that fails rather than running outside the transaction.
   */
  commitAhead?(answers: Promise<unknown>): void;
  /**
   * PostgreSQL, outside a transaction: the same database with each statement on a connection of
   * its own, for a statement that may run long (a bulk DELETE). Statements issued together share
   * a connection and are answered in order (src/store/postgres/shared.ts): such a statement would
   * hold up the turns' statements that shared its connection.
   */
  alone?(): Sql;
}

/** `sql` with each statement on a connection of its own where the engine shares them ({@link Sql.alone}), else `sql`. */
export function alone(sql: Sql): Sql {
  return sql.alone?.() ?? sql;
}

/** The whole database: the statements, and how to close it. */
export interface Database extends Sql {
  /** What to call it in messages (a file path, or the server without its password). */
  readonly name: string;
  close(): Promise<void>;
}
