/**
 * {@link Database} over better-sqlite3: each call runs its statement at once (better-sqlite3 is
 * synchronous and SQLite has one writer); a write's promise settles when it is committed, with
 * the other writes of the same turn of the event loop (see SqliteDatabase: group commit).
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

type Prepared = Statement<unknown[], unknown>;

// A write with RETURNING is run to its end, never stepped once and reset: better-sqlite3's get()
// ignores what sqlite3_reset() returns, and outside a transaction that reset is where the implied
// COMMIT happens — on a full disk it fails and rolls the row back while get() still hands out the
// RETURNING row (an inbox seq that was never stored: issue 22's lost message). all() steps to
// SQLITE_DONE, so a failed commit throws.
const getRow = (statement: Prepared, params: readonly SqlValue[]): unknown => (statement.readonly ? statement.get(...params) : statement.all(...params)[0]);
const allRows = (statement: Prepared, params: readonly SqlValue[]): unknown[] => statement.all(...params);
const changes = (statement: Prepared, params: readonly SqlValue[]): number => statement.run(...params).changes;

/** The calls inside an open transaction: straight to the connection. */
class InTransaction implements Sql {
  readonly dialect = 'sqlite';
  readonly #statements: Statements;

  constructor(statements: Statements) {
    this.#statements = statements;
  }

  async get<Row>(sql: string, params: readonly SqlValue[] = []): Promise<Row | undefined> {
    return getRow(this.#statements.get(sql), params) as Row | undefined;
  }

  async all<Row>(sql: string, params: readonly SqlValue[] = []): Promise<Row[]> {
    return allRows(this.#statements.get(sql), params) as Row[];
  }

  async run(sql: string, params: readonly SqlValue[] = []): Promise<number> {
    return changes(this.#statements.get(sql), params);
  }

  transaction<T>(work: (tx: Sql) => Promise<T>): Promise<T> {
    return work(this);
  }
}

/** One caller's part of a group (see SqliteDatabase): settled when the group's COMMIT is. */
interface Member {
  readonly result: unknown;
  /** Runs the statement again on its own when its group was lost; undefined for a transaction, whose work cannot be run twice. */
  readonly again: (() => unknown) | undefined;
  readonly resolve: (value: unknown) => void;
  readonly reject: (error: unknown) => void;
}

/** The writes of one turn of the event loop, in one open SQLite transaction. */
class Group {
  readonly members: Member[] = [];
  /** Its commit came while a caller's transaction was under way: it commits when that one ends. */
  due = false;

  join<T>(result: T, again: (() => T) | undefined): Promise<T> {
    return new Promise<T>((resolve, reject) => this.members.push({ result, again, resolve: resolve as (value: unknown) => void, reject }));
  }
}

/**
 * Group commit: the writes (and transactions) of one turn of the event loop — concurrent turns
 * and requests landing together — share one transaction, committed at `setImmediate`, so SQLite
 * appends their pages to the WAL once instead of once per write (each commit rewrote the same
 * leaf pages: ~20 µs of CPU and ~50 µs of the main thread each, six per webhook message).
 * Nobody is told sooner: each caller's promise settles when the group's COMMIT has, so "stored
 * before acknowledged" holds as before, and a read behind an uncommitted write waits for it too
 * (what it read must not be rolled back under it). Each caller fails alone: a failed statement
 * is undone by SQLite by itself and a failed transaction rolls back to its savepoint; when the
 * whole group is lost (a full disk or an I/O error can roll it all back, and so can a failed
 * COMMIT), every statement in it is run again on its own and answers for itself, and a
 * transaction in it fails (its work cannot be run twice). What is written straight on `db` while
 * a group is open lands in it and commits with it: the SQLite memory writes through `write()` so
 * that it is told when; the embedding cache and the embedder's vectors, which can be made again,
 * do not wait.
 */
class SqliteDatabase implements Database {
  readonly dialect = 'sqlite';
  readonly db: Db;
  readonly #statements: Statements;
  readonly #tx: InTransaction;
  /** Settles when the open transaction ends; undefined when none is open. */
  #open: Promise<void> | undefined;
  /** The group not yet committed. */
  #group: Group | undefined;

  constructor(db: Db) {
    this.db = db;
    this.#statements = new Statements(db);
    this.#tx = new InTransaction(this.#statements);
  }

  get name(): string {
    return this.db.name;
  }

  async get<Row>(sql: string, params: readonly SqlValue[] = []): Promise<Row | undefined> {
    while (this.#open) await this.#open;
    return this.#alone(sql, (statement) => getRow(statement, params)) as Promise<Row | undefined>;
  }

  async all<Row>(sql: string, params: readonly SqlValue[] = []): Promise<Row[]> {
    while (this.#open) await this.#open;
    return this.#alone(sql, (statement) => allRows(statement, params)) as Promise<Row[]>;
  }

  async run(sql: string, params: readonly SqlValue[] = []): Promise<number> {
    while (this.#open) await this.#open;
    return this.#alone(sql, (statement) => changes(statement, params));
  }

  async transaction<T>(work: (tx: Sql) => Promise<T>): Promise<T> {
    while (this.#open) await this.#open;
    let end!: () => void;
    this.#open = new Promise((resolve) => (end = resolve));
    let group: Group | undefined;
    let joined: Promise<T>;
    try {
      group = this.#group ?? this.#begin();
      this.db.exec('SAVEPOINT work');
      try {
        const result = await work(this.#tx);
        this.db.exec('RELEASE work');
        joined = group.join(result, undefined);
      } catch (error) {
        this.#undo(group, error);
        throw error;
      }
    } finally {
      this.#open = undefined;
      end();
      if (group?.due) this.#commit(group);
    }
    return joined;
  }

  async close(): Promise<void> {
    while (this.#open) await this.#open;
    if (this.#group) this.#commit(this.#group);
    if (this.db.open) this.db.close();
  }

  /**
   * A write made straight on `db` with statements of the caller's own (the SQLite memory's), as
   * a statement of the group: it waits for a transaction under way (it would land in it and roll
   * back with it), settles with the group's COMMIT and is run again on its own when the group is
   * lost — so a memory reported stored is committed, as before group commit.
   */
  async write<T>(work: () => T): Promise<T> {
    while (this.#open) await this.#open;
    return this.#inGroup(false, work);
  }

  /** Runs one statement of a caller outside a transaction: in the open group, or opening one for a write. */
  #alone<T>(sql: string, run: (statement: Prepared) => T): Promise<T> {
    const statement = this.#statements.get(sql);
    return this.#inGroup(statement.readonly, () => run(statement));
  }

  #inGroup<T>(readonly: boolean, run: () => T): Promise<T> {
    // A read with no write waiting for its commit reads what is committed.
    const group = this.#group ?? (readonly ? undefined : this.#begin());
    if (group === undefined) return Promise.resolve(run());
    let result: T;
    try {
      result = run();
    } catch (error) {
      // SQLite undoes a failed statement by itself; when it rolled the whole group back, the others run again.
      if (!this.db.inTransaction) this.#lost(group, error);
      throw error;
    }
    return group.join(result, run);
  }

  #begin(): Group {
    this.db.exec('BEGIN IMMEDIATE');
    const group = new Group();
    this.#group = group;
    setImmediate(() => this.#commit(group));
    return group;
  }

  /** A failed transaction: only its own writes go (to its savepoint), unless SQLite rolled the group back. */
  #undo(group: Group, error: unknown): void {
    if (this.#group !== group) return;
    if (this.db.inTransaction) {
      try {
        this.db.exec('ROLLBACK TO work');
        this.db.exec('RELEASE work');
        return;
      } catch {
        this.#rollback();
      }
    }
    this.#lost(group, error);
  }

  /** Ends the group's transaction after a failure; what it had is run again or failed by #lost. */
  #rollback(): void {
    try {
      if (this.db.inTransaction) this.db.exec('ROLLBACK');
    } catch {
      // nothing better to try here: the next BEGIN reports the connection's state to its caller
    }
  }

  #commit(group: Group): void {
    if (this.#group !== group) return;
    if (this.#open) {
      group.due = true; // a caller's transaction is under way in it
      return;
    }
    try {
      this.db.exec('COMMIT');
    } catch (error) {
      this.#rollback();
      this.#lost(group, error);
      return;
    }
    this.#group = undefined;
    for (const member of group.members) member.resolve(member.result);
  }

  /** The group was rolled back: each statement in it runs again on its own (committing by itself); each transaction fails. */
  #lost(group: Group, error: unknown): void {
    this.#group = undefined;
    for (const member of group.members) {
      if (member.again === undefined) {
        member.reject(error);
        continue;
      }
      try {
        member.resolve(member.again());
      } catch (failure) {
        member.reject(failure);
      }
    }
  }
}

/** The SQLite database's, beside the {@link Database} calls. */
export interface SqliteDatabaseHandle extends Database {
  readonly db: Db;
  /** Runs `work`, a write straight on `db`, in the current group commit; settles when that is committed. */
  write<T>(work: () => T): Promise<T>;
}

/** The async statements over an open better-sqlite3 connection (see openDatabase). */
export function sqliteDatabase(db: Db): SqliteDatabaseHandle {
  return new SqliteDatabase(db);
}
