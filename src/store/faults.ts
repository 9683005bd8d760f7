/**
 * A fault-injection seam in the {@link Sql} port, for tests: wraps a Database, numbers every
 * statement and every commit it runs, and makes a chosen one fail the way the engine would —
 * the way SQLite's own tests fail every I/O operation in turn. Nothing in the daemon wraps
 * its database with this: unused, it costs nothing.
 *
 * The faults, as the drivers raise them:
 *   SQLITE_FULL       better-sqlite3 SqliteError 'database or disk is full' (a full disk)
 *   SQLITE_IOERR      SqliteError SQLITE_IOERR_WRITE 'disk I/O error' (a failing disk, an NFS hiccup)
 *   SQLITE_BUSY       SqliteError 'database is locked' (another process holds the write lock past busy_timeout)
 *   PG_CONNECTION     pg's 'Connection terminated unexpectedly' (a restart, a network cut). The worst
 *                     case is taken: the statement or COMMIT reached the server and was applied, and
 *                     only its answer was lost — the caller cannot tell the two apart.
 *   PG_SERIALIZATION  SQLSTATE 40001 'could not serialize access' (nothing was applied)
 */
import BetterSqlite3 from 'better-sqlite3';
import type { Database, Sql, SqlValue } from './sql.ts';

export type StoreFault = 'SQLITE_FULL' | 'SQLITE_IOERR' | 'SQLITE_BUSY' | 'PG_CONNECTION' | 'PG_SERIALIZATION';

/** The faults each engine can raise. */
export const ENGINE_FAULTS: Readonly<Record<Sql['dialect'], readonly StoreFault[]>> = {
  sqlite: ['SQLITE_FULL', 'SQLITE_IOERR', 'SQLITE_BUSY'],
  postgres: ['PG_CONNECTION', 'PG_SERIALIZATION'],
};

/** One numbered operation: a statement (its SQL) or the COMMIT of a transaction. */
export interface Operation {
  readonly index: number;
  readonly kind: 'statement' | 'commit';
  /** The statement's SQL; for a commit, the first statement of its transaction. */
  readonly sql: string;
  readonly inTransaction: boolean;
}

export interface FaultyDatabase extends Database {
  /** Operations run since the last {@link record}, in order. */
  readonly operations: readonly Operation[];
  /** Starts numbering (and recording) operations from 0 again. */
  record(): void;
  /** Makes operation `index` (as numbered since {@link record}) fail with `fault` — and the `times - 1` after it. */
  failAt(index: number, fault: StoreFault, times?: number): void;
  /**
   * Makes the `occurrence`-th operation (from 1, since {@link record}) of this kind and SQL fail
   * with `fault` — steadier than an index when background work (a sweep, a sync) runs between.
   */
  failOn(operation: Pick<Operation, 'kind' | 'sql'>, occurrence: number, fault: StoreFault): void;
  /** No more faults. */
  clear(): void;
  /** How many faults have been raised. */
  readonly raised: number;
  /** The database it wraps. */
  readonly inner: Database;
}

/** The error a driver raises for `fault`. */
export function faultError(fault: StoreFault): Error {
  switch (fault) {
    case 'SQLITE_FULL':
      return new BetterSqlite3.SqliteError('database or disk is full', 'SQLITE_FULL');
    case 'SQLITE_IOERR':
      return new BetterSqlite3.SqliteError('disk I/O error', 'SQLITE_IOERR_WRITE');
    case 'SQLITE_BUSY':
      return new BetterSqlite3.SqliteError('database is locked', 'SQLITE_BUSY');
    case 'PG_CONNECTION':
      return new Error('Connection terminated unexpectedly');
    case 'PG_SERIALIZATION':
      return Object.assign(new Error('could not serialize access due to concurrent update'), { code: '40001', severity: 'ERROR' });
  }
}

/** Whether a fault leaves its operation applied (only its answer lost). */
const applied = (fault: StoreFault): boolean => fault === 'PG_CONNECTION';

type Plan = { from: number; to: number; fault: StoreFault } | { kind: Operation['kind']; sql: string; occurrence: number; fault: StoreFault };

class Counter {
  operations: Operation[] = [];
  next = 0;
  plan: Plan | undefined;
  raised = 0;

  /** Numbers one operation; returns the fault it must raise, if any. */
  take(kind: Operation['kind'], sql: string, inTransaction: boolean): StoreFault | undefined {
    const index = this.next++;
    this.operations.push({ index, kind, sql, inTransaction });
    const plan = this.plan;
    if (!plan) return undefined;
    if ('from' in plan) {
      if (index < plan.from || index > plan.to) return undefined;
    } else {
      if (plan.kind !== kind || plan.sql !== sql || --plan.occurrence !== 0) return undefined;
      this.plan = undefined;
    }
    this.raised++;
    return plan.fault;
  }
}

/** Statements inside a transaction of the wrapped database. */
class FaultySql implements Sql {
  readonly dialect: Sql['dialect'];
  /** What it wraps (rawPostgres reaches the connection through it: pg-boss enqueues in the same transaction). */
  readonly inner: Sql;
  readonly #inner: Sql;
  readonly #counter: Counter;
  readonly #inTransaction: boolean;
  /** The first statement of the open transaction (names its commit); unset outside one. */
  first: string | undefined;

  constructor(inner: Sql, counter: Counter, inTransaction: boolean) {
    this.dialect = inner.dialect;
    this.inner = inner;
    this.#inner = inner;
    this.#counter = counter;
    this.#inTransaction = inTransaction;
  }

  async #statement<T>(sql: string, run: () => Promise<T>): Promise<T> {
    if (this.#inTransaction) this.first ??= sql;
    const fault = this.#counter.take('statement', sql, this.#inTransaction);
    if (fault === undefined) return run();
    // Inside a transaction an applied statement is rolled back with it; outside, it stays.
    if (applied(fault)) await run();
    throw faultError(fault);
  }

  get<Row>(sql: string, params?: readonly SqlValue[]): Promise<Row | undefined> {
    return this.#statement(sql, () => this.#inner.get<Row>(sql, params));
  }

  all<Row>(sql: string, params?: readonly SqlValue[]): Promise<Row[]> {
    return this.#statement(sql, () => this.#inner.all<Row>(sql, params));
  }

  run(sql: string, params?: readonly SqlValue[]): Promise<number> {
    return this.#statement(sql, () => this.#inner.run(sql, params));
  }

  transaction<T>(work: (tx: Sql) => Promise<T>): Promise<T> {
    if (this.#inTransaction) return work(this);
    return runTransaction(this.#inner, this.#counter, work);
  }
}

async function runTransaction<T>(inner: Sql, counter: Counter, work: (tx: Sql) => Promise<T>): Promise<T> {
  let fault: StoreFault | undefined;
  const result = await inner.transaction(async (tx) => {
    const faulty = new FaultySql(tx, counter, true);
    const value = await work(faulty);
    fault = counter.take('commit', faulty.first ?? '(empty transaction)', true);
    // Not applied: throwing here makes the engine roll the transaction back, as a failed COMMIT does.
    if (fault !== undefined && !applied(fault)) throw faultError(fault);
    return value;
  });
  // Applied: the transaction committed, and its answer is lost on the way back.
  if (fault !== undefined) throw faultError(fault);
  return result;
}

/** Wraps `database` with the seam (see the file comment). */
export function withFaults(database: Database): FaultyDatabase {
  const counter = new Counter();
  const outer = new FaultySql(database, counter, false);
  return {
    dialect: database.dialect,
    get name() {
      return database.name;
    },
    get operations() {
      return counter.operations;
    },
    get raised() {
      return counter.raised;
    },
    record() {
      counter.operations = [];
      counter.next = 0;
    },
    failAt(index, fault, times = 1) {
      counter.plan = { from: index, to: index + times - 1, fault };
    },
    failOn(operation, occurrence, fault) {
      counter.plan = { kind: operation.kind, sql: operation.sql, occurrence, fault };
    },
    clear() {
      counter.plan = undefined;
    },
    get: (sql, params) => outer.get(sql, params),
    all: (sql, params) => outer.all(sql, params),
    run: (sql, params) => outer.run(sql, params),
    transaction: (work) => runTransaction(database, counter, work),
    close: () => database.close(),
    inner: database,
  };
}
