/**
 * Fewer writes and round trips to PostgreSQL on a pipelined connection (src/store/postgres/sql.ts):
 * a connection's statements of one tick sent in one write ({@link Coalescer}), and the statements
 * outside a transaction issued in one turn of the event loop on one connection ({@link TickShared}),
 * its plain reads under one Sync (src/store/postgres/batch.ts).
 */
import type { Pool, PoolClient, Query, QueryResult } from 'pg';

/** A statement as node-postgres takes it: named (prepared once per connection) when it has parameters. */
export interface Prepared {
  readonly name?: string;
  readonly text: string;
  /** A named plain read, which may share a Sync with others outside a transaction ({@link batchable}, decided once per statement). */
  readonly batchable?: boolean;
}

/** A statement not run because one before it under the same Sync failed (PostgreSQL skipped it). */
export class SkippedError extends Error {}

/** node-postgres's Query class (`pg.Query`, loaded with the driver). */
export type QueryClass = typeof Query;

/** Where a PostgresSql sends its statements: a transaction's connection, or {@link TickShared} over the pool. */
export interface Queryable {
  query(statement: Prepared, values: unknown[]): Promise<QueryResult>;
}

/**
 * Runs `statement` on `client` as a Query built from its text, not from a config object: pg's
 * `client.query(config)` copies the config with `Object.defineProperties(…,
 * Object.getOwnPropertyDescriptors(config))` (node_modules/pg/lib/utils.js, cloneQueryConfig) at
 * every statement, 11 ms of the 611 ms the PostgreSQL node spent on 200 messages (V8 profile of
 * the per-message bench); a Query given a text and values copies nothing. pg takes a Query as it
 * is (a submittable) and calls its callback with the result.
 */
export function submit(client: PoolClient, Query: QueryClass, statement: Prepared, values: unknown[]): Promise<QueryResult> {
  return new Promise((resolve, reject) => {
    const query = new Query(statement.text, values, (error: Error | undefined, result: unknown) => (error ? reject(error) : resolve(result as QueryResult)));
    if (statement.name !== undefined) (query as { name?: string }).name = statement.name;
    void client.query(query);
  });
}

/**
 * Holds a connection's writes until the statements issued in the same tick are all queued, then
 * sends them in one write: on a pipelined connection each statement is otherwise a write of its
 * own, and a write to PostgreSQL over loopback costs ~0.1 ms of CPU on each side (the syscall and
 * waking the server), which was a third of a node's CPU per message. The writes go out on
 * `process.nextTick`, after the promise jobs that issued them (a tick queued from a promise job
 * runs once the promise jobs are drained), so no statement waits for I/O or a timer; or, `late`,
 * on `setImmediate`: after the rest of the event loop's turn (see {@link TickShared}).
 */
export class Coalescer {
  readonly #stream: PoolClient['connection']['stream'];
  #holding = false;
  #beforeWrite: (() => void) | undefined;
  readonly #release = (): void => {
    const before = this.#beforeWrite;
    this.#beforeWrite = undefined;
    before?.();
    this.#flush?.();
    this.#holding = false;
    this.#stream.uncork();
  };

  readonly #late: boolean;
  readonly #flush: (() => void) | undefined;

  /** `flush` queues what was held back (a transaction's batch, src/store/postgres/batch.ts) just before the write goes out. */
  constructor(client: PoolClient, late = false, flush?: () => void) {
    this.#stream = client.connection.stream;
    this.#late = late;
    this.#flush = flush;
  }

  /** Call before queueing a statement. */
  hold(): void {
    if (this.#holding) return;
    this.#holding = true;
    this.#stream.cork();
    if (this.#late) setImmediate(this.#release);
    else process.nextTick(this.#release);
  }

  /** Runs `last` just before the held write goes out (now, when none is held): what it queues travels in that write. */
  beforeWrite(last: () => void): void {
    if (this.#holding) this.#beforeWrite = last;
    else last();
  }
}

/** A share's reads under one Sync (src/store/postgres/batch.ts's Batcher). */
export interface Reads {
  /** In the batch flushed before the share's write goes out. */
  batched(statement: Prepared, values: unknown[]): Promise<QueryResult>;
  /** On its own (after the batch pending, in order). */
  single(statement: Prepared, values: unknown[]): Promise<QueryResult>;
  flush(): void;
}

/**
 * A statement outside a transaction that may share a Sync with others: a plain read. Under one
 * Sync the statements run in one implicit transaction, and one that fails rolls back the others:
 * a write (or a read with an effect: a NOTIFY, a lock, a sequence) answered before it would be
 * undone after its caller was told it succeeded. A read undone changes nothing, and a read skipped
 * runs again on its own.
 */
export function batchable(text: string): boolean {
  return READ.test(text) && !EFFECT.test(text);
}

const READ = /^\s*SELECT\b/i;
const EFFECT = /\b(?:pg_notify|pg_advisory\w*|pg_try_advisory\w*|nextval|setval|switchboard_\w+)\s*\(|\bFOR\s+(?:UPDATE|SHARE|NO\s+KEY\s+UPDATE|KEY\s+SHARE)\b|\b(?:INSERT|UPDATE|DELETE)\b/i;

/** Statements outside a transaction, issued in one turn of the event loop: they share one connection (see {@link TickShared}). */
interface Share {
  readonly connected: Promise<PoolClient>;
  client?: PoolClient;
  writes?: Coalescer;
  reads?: Reads;
  /** Statements on it not yet answered. */
  users: number;
  /** Still taking statements (the turn of the event loop it was opened in). */
  open: boolean;
  /** A statement or the connection failed: the connection is closed rather than pooled (as pool.query does). */
  failed?: Error;
  readonly onError: (error: Error) => void;
}

/**
 * Statements issued outside a transaction in the same turn of the event loop share one pooled
 * connection: pipelined, in one write (see {@link Coalescer}), to one server process. A turn issues
 * its independent reads together; on a connection each they were a pool checkout, a write and a
 * server process woken each. The share stays open until `setImmediate`, i.e. through the I/O
 * callbacks of the same poll, not only the tick that opened it: under load one poll brings the
 * answers of several turns, and what each issues next (one turn's reads, another's mark after its
 * send, a batch's accepts) goes out in one write instead of one each (one node on PostgreSQL:
 * 5.4 → 3.9 writes per message). It waits for no I/O or timer: the statements of a turn of the loop go
 * out at its end. The connection goes back to the pool when the last of them has its answer.
 * Statements issued in different turns of the loop run side by side on connections of their own.
 * A statement that may take long (a bulk DELETE) would hold up the others of its share: it goes on
 * a connection of its own ({@link Sql.alone}).
 */
export class TickShared implements Queryable {
  readonly #pool: Pool;
  readonly #reads: (client: PoolClient, writes: Coalescer) => Reads;
  #open: Share | undefined;

  constructor(pool: Pool, reads: (client: PoolClient, writes: Coalescer) => Reads) {
    this.#pool = pool;
    this.#reads = reads;
  }

  async query(statement: Prepared, values: unknown[]): Promise<QueryResult> {
    const share = this.#share();
    share.users++;
    try {
      const client = await share.connected;
      share.writes ??= new Coalescer(client, true, () => share.reads?.flush());
      const reads = (share.reads ??= this.#reads(client, share.writes));
      share.writes.hold();
      if (statement.batchable !== true) return await reads.single(statement, values);
      return await reads.batched(statement, values).catch((error: unknown) => {
        // skipped by PostgreSQL after another read of its batch failed: run on its own, as it would have been
        if (error instanceof SkippedError) return reads.single(statement, values);
        throw error;
      });
    } catch (error) {
      share.failed ??= error instanceof Error ? error : new Error(String(error));
      throw error;
    } finally {
      share.users--;
      this.#release(share);
    }
  }

  #share(): Share {
    if (this.#open) return this.#open;
    const share: Share = {
      connected: this.#pool.connect().then((client) => {
        share.client = client;
        // A connection that breaks between statements emits 'error' on the client; unheard, that would crash the process.
        client.on('error', share.onError);
        return client;
      }),
      users: 0,
      open: true,
      onError: (error) => (share.failed ??= error),
    };
    share.connected.catch(() => undefined);
    this.#open = share;
    setImmediate(() => {
      share.open = false;
      if (this.#open === share) this.#open = undefined;
      this.#release(share);
    });
    return share;
  }

  #release(share: Share): void {
    if (share.open || share.users > 0 || !share.client) return;
    const { client } = share;
    share.client = undefined;
    client.off('error', share.onError);
    client.release(share.failed);
  }
}
