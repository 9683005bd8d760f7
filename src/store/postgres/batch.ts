/**
 * A transaction's statements of one tick under one Sync (PostgreSQL's extended query protocol):
 * node-postgres ends every statement with a Sync, and PostgreSQL answers each Sync with
 * ReadyForQuery and flushes its socket (postgres.c, ReadyForQuery → pq_flush): a turn's commit
 * (BEGIN, five statements, COMMIT) was seven answers written apart, seven reads of them here,
 * seven queries in the driver. Under one Sync they are one answer.
 *
 * Inside a transaction block one Sync changes nothing of what runs: a statement that fails aborts
 * the transaction, and PostgreSQL skips the statements after it up to the Sync (each would fail
 * with "current transaction is aborted" otherwise); they are failed here with {@link SkippedError},
 * the COMMIT among them, and the transaction is rolled back (src/store/postgres/sql.ts).
 * Statements outside a transaction never share a Sync: there the Sync ends an implicit
 * transaction, and one failure would roll back the others.
 */
import type { PoolClient, QueryResult } from 'pg';
import type { Coalescer, Prepared, QueryClass, Queryable, Reads } from './shared.ts';
import { SkippedError, submit } from './shared.ts';

/** What a batch needs of node-postgres, loaded with it. */
export interface PgParts {
  readonly Query: QueryClass;
  /** pg's Result (`pg.Result`): a statement's rows, parsed by `types`. */
  readonly Result: new (rowMode: undefined, types: unknown) => ResultBuilder;
  /** pg/lib/utils.js's prepareValue: a parameter as the wire takes it. */
  readonly prepareValue: (value: unknown) => unknown;
  /** The pool's type parsers (its `types` option). */
  readonly types: unknown;
}

interface ResultBuilder extends QueryResult {
  addFields(fields: unknown[]): void;
  parseRow(fields: unknown[]): unknown;
  addRow(row: unknown): void;
  addCommandComplete(message: unknown): void;
}

interface Item {
  readonly name: string | undefined;
  readonly text: string;
  readonly values: unknown[];
  readonly resolve: (result: QueryResult) => void;
  readonly reject: (error: unknown) => void;
  result?: ResultBuilder;
  /** Its row failed to parse here: failed at its CommandComplete. */
  error?: unknown;
  /** Its Parse went out in this batch (not yet known to have been prepared). */
  parsing?: boolean;
}

/** The connection as pg's Connection is used here (node_modules/pg/lib/connection.js). */
interface Connection {
  readonly stream: { cork(): void; uncork(): void };
  readonly parsedStatements: Record<string, string>;
  readonly submittedNamedStatements: Record<string, string>;
  parse(message: { text: string; name: string }): void;
  bind(message: { portal: string; statement: string; values: unknown[] }): void;
  describe(message: { type: 'P'; name: string }): void;
  execute(message: { portal: string }): void;
  sync(): void;
}

/** pg.Query's members a subclass overrides (the typings declare only submit). */
interface QueryInternals {
  callback?: (error: unknown, result?: unknown) => void;
}

/**
 * The batch as one pg Query (pg takes a subclass of Query on a pipelined client, node_modules/pg/lib/client.js):
 * pg hands it every message of the answer up to ReadyForQuery. `name` and `text` are those of the
 * statement being answered, which pg reads at a ParseComplete (it then knows the statement is
 * prepared on the connection) and at an ErrorResponse. One class per database, for its pool's parts.
 */
export function batches(parts: PgParts): new (items: Item[]) => object {
  const { Query, Result, prepareValue, types } = parts;
  return class StatementBatch extends (Query as unknown as new (text: string) => QueryInternals) {
    #items: Item[] = [];
    #at = 0;

    constructor(items: Item[]) {
      super('');
      this.#items = items;
    }

    get name(): string | undefined {
      return this.#items?.[this.#at]?.name;
    }

    set name(_: string | undefined) {
      // set by pg's constructor; the current statement's is read from #items
    }

    get text(): string {
      return this.#items?.[this.#at]?.text ?? '';
    }

    set text(_: string) {
      // as name
    }

    submit(connection: Connection): Error | null {
      let values: unknown[][];
      try {
        // mapped before anything is written: a value that cannot be sent fails the batch, not half of it on the wire
        values = this.#items.map((item) => item.values.map((value) => prepareValue(value)));
      } catch (error) {
        return error instanceof Error ? error : new Error(String(error));
      }
      connection.stream.cork();
      try {
        this.#items.forEach((item, i) => {
          const statement = item.name ?? '';
          if (item.name === undefined || (connection.parsedStatements[item.name] === undefined && connection.submittedNamedStatements[item.name] === undefined)) {
            connection.parse({ text: item.text, name: statement });
            if (item.name !== undefined) {
              connection.submittedNamedStatements[item.name] = item.text;
              item.parsing = true;
            }
          }
          connection.bind({ portal: '', statement, values: values[i]! });
          connection.describe({ type: 'P', name: '' });
          connection.execute({ portal: '' });
        });
        connection.sync();
      } finally {
        connection.stream.uncork();
      }
      return null;
    }

    #current(): Item | undefined {
      return this.#items[this.#at];
    }

    #result(item: Item): ResultBuilder {
      return (item.result ??= new Result(undefined, types));
    }

    handleRowDescription(message: { fields: unknown[] }): void {
      const item = this.#current();
      if (item) this.#result(item).addFields(message.fields);
    }

    handleDataRow(message: { fields: unknown[] }): void {
      const item = this.#current();
      if (!item || item.error !== undefined) return;
      try {
        const result = this.#result(item);
        result.addRow(result.parseRow(message.fields));
      } catch (error) {
        item.error = error;
      }
    }

    handleCommandComplete(message: unknown): void {
      const item = this.#current();
      if (!item) return;
      this.#at++;
      if (item.error !== undefined) return item.reject(item.error);
      const result = this.#result(item);
      result.addCommandComplete(message);
      item.resolve(result);
    }

    handleEmptyQuery(): void {
      const item = this.#current();
      if (!item) return;
      this.#at++;
      item.resolve(this.#result(item));
    }

    handlePortalSuspended(): void {
      // no statement here asks for rows in pages
    }

    handleError(error: unknown, connection: Connection | undefined): void {
      const failed = this.#current();
      const skipped = this.#items.slice(this.#at + 1);
      this.#at = this.#items.length;
      for (const item of skipped) {
        // its Parse was skipped: not prepared (pg forgets only the failed statement's, at its ErrorResponse)
        if (item.parsing && item.name !== undefined && connection && connection.parsedStatements[item.name] === undefined) delete connection.submittedNamedStatements[item.name];
      }
      failed?.reject(error);
      for (const item of skipped) item.reject(new SkippedError(`not run: a statement before it in its transaction failed (${item.text.slice(0, 80)})`));
      this.callback?.(error);
    }

    handleReadyForQuery(): void {
      const left = this.#items.slice(this.#at);
      this.#at = this.#items.length;
      for (const item of left) item.reject(new Error(`PostgreSQL answered the batch without this statement: ${item.text.slice(0, 80)}`));
      this.callback?.(null);
    }

    handleCopyInResponse(): void {
      // no COPY here
    }

    handleCopyData(): void {
      // no COPY here
    }
  };
}

/**
 * A transaction's connection as a {@link Queryable}: its prepared statements of one tick (held by
 * its {@link Coalescer}, which calls {@link flush} before the write goes out) go as one batch under
 * one Sync. A statement without parameters (DDL, a migration of several statements: no prepared
 * statement can hold those) goes on its own as a simple query, after the batch before it, in order.
 */
export class Batcher implements Queryable, Reads {
  readonly #client: PoolClient;
  readonly #parts: PgParts;
  readonly #Batch: new (items: Item[]) => object;
  readonly #writes: Coalescer;
  #pending: Item[] = [];

  constructor(client: PoolClient, parts: PgParts, batch: new (items: Item[]) => object, writes: Coalescer) {
    this.#client = client;
    this.#parts = parts;
    this.#Batch = batch;
    this.#writes = writes;
  }

  query(statement: Prepared, values: unknown[]): Promise<QueryResult> {
    if (statement.name === undefined) return this.single(statement, values);
    return this.batched(statement, values);
  }

  /** `statement` in the tick's batch (BEGIN and COMMIT too: a statement without parameters, one command). */
  batched(statement: Prepared, values: unknown[] = []): Promise<QueryResult> {
    this.#writes.hold();
    return new Promise((resolve, reject) => this.#pending.push({ name: statement.name, text: statement.text, values, resolve, reject }));
  }

  /** `statement` on its own (a simple query when it has no parameters), after what is pending. */
  single(statement: Prepared, values: unknown[] = []): Promise<QueryResult> {
    this.flush();
    return submit(this.#client, this.#parts.Query, statement, values);
  }

  /** Sends what is pending as one batch (into the held write). */
  flush(): void {
    if (this.#pending.length === 0) return;
    const items = this.#pending;
    this.#pending = [];
    void this.#client.query(new this.#Batch(items) as never);
  }
}
