/**
 * {@link Database} over better-sqlite3: each call runs its statement at once (better-sqlite3 is
 * synchronous and SQLite has one writer), so the promise is already settled when returned.
 * A transaction holds the connection until it ends: calls from outside it wait for it, since on
 * one connection they would otherwise land inside it (and roll back with it).
 */
import type { Statement } from 'better-sqlite3';
import type { Db } from './db.ts';
import type { Database, Sql, SqlValue } from './sql.ts';

/** Distinct statements kept prepared; stores use fixed SQL, so this is never reached in practice. */
const MAX_STATEMENTS = 500;

class Statements {
  readonly #db: Db;
  readonly #prepared = new Map<string, Statement<unknown[], unknown>>();

  constructor(db: Db) {
    this.#db = db;
  }

  get(sql: string): Statement<unknown[], unknown> {
    let statement = this.#prepared.get(sql);
    if (!statement) {
      if (this.#prepared.size >= MAX_STATEMENTS) this.#prepared.clear();
      statement = this.#db.prepare(sql);
      this.#prepared.set(sql, statement);
    }
    return statement;
  }
}

/** The calls inside an open transaction: straight to the connection. */
class InTransaction implements Sql {
  readonly dialect = 'sqlite';
  readonly #statements: Statements;

  constructor(statements: Statements) {
    this.#statements = statements;
  }

  async get<Row>(sql: string, params: readonly SqlValue[] = []): Promise<Row | undefined> {
    const statement = this.#statements.get(sql);
    // A write with RETURNING is run to its end, never stepped once and reset: better-sqlite3's
    // get() ignores what sqlite3_reset() returns, and outside a transaction that reset is where
    // the implied COMMIT happens — on a full disk it fails and rolls the row back while get()
    // still hands out the RETURNING row (an inbox seq that was never stored: issue 22's lost
    // message). all() steps to SQLITE_DONE, so a failed commit throws.
    if (!statement.readonly) return statement.all(...params)[0] as Row | undefined;
    return statement.get(...params) as Row | undefined;
  }

  async all<Row>(sql: string, params: readonly SqlValue[] = []): Promise<Row[]> {
    return this.#statements.get(sql).all(...params) as Row[];
  }

  async run(sql: string, params: readonly SqlValue[] = []): Promise<number> {
    return this.#statements.get(sql).run(...params).changes;
  }

  transaction<T>(work: (tx: Sql) => Promise<T>): Promise<T> {
    return work(this);
  }
}

class SqliteDatabase implements Database {
  readonly dialect = 'sqlite';
  readonly db: Db;
  readonly #tx: InTransaction;
  /** Settles when the open transaction ends; undefined when none is open. */
  #open: Promise<void> | undefined;

  constructor(db: Db) {
    this.db = db;
    this.#tx = new InTransaction(new Statements(db));
  }

  get name(): string {
    return this.db.name;
  }

  async get<Row>(sql: string, params?: readonly SqlValue[]): Promise<Row | undefined> {
    while (this.#open) await this.#open;
    return this.#tx.get<Row>(sql, params);
  }

  async all<Row>(sql: string, params?: readonly SqlValue[]): Promise<Row[]> {
    while (this.#open) await this.#open;
    return this.#tx.all<Row>(sql, params);
  }

  async run(sql: string, params?: readonly SqlValue[]): Promise<number> {
    while (this.#open) await this.#open;
    return this.#tx.run(sql, params);
  }

  async transaction<T>(work: (tx: Sql) => Promise<T>): Promise<T> {
    while (this.#open) await this.#open;
    let end!: () => void;
    this.#open = new Promise((resolve) => (end = resolve));
    try {
      this.db.exec('BEGIN IMMEDIATE');
      try {
        const result = await work(this.#tx);
        this.db.exec('COMMIT');
        return result;
      } catch (error) {
        if (this.db.inTransaction) this.db.exec('ROLLBACK');
        throw error;
      }
    } finally {
      this.#open = undefined;
      end();
    }
  }

  async close(): Promise<void> {
    while (this.#open) await this.#open;
    if (this.db.open) this.db.close();
  }
}

/** The async statements over an open better-sqlite3 connection (see openDatabase). */
export function sqliteDatabase(db: Db): Database & { readonly db: Db } {
  return new SqliteDatabase(db);
}
