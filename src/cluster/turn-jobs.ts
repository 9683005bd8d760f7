/**
 * The statements that end a turn's pg-boss job, ours rather than pg-boss's `complete()`: issued in
 * the transaction that records the turn's end (one statement among its writes, no round trip after
 * the commit), prepared on the store's connections, and telling whether the conversation has a
 * turn waiting behind this one (so a node knows whether a fetch after the turn can find anything).
 *
 * Written after pg-boss 12's own complete (node_modules/pg-boss/dist/plans.js: `completeJobs` →
 * `completeJobsUpdate`, fenced by `attemptFence`): state `completed`, `completed_on` from its
 * clock function, `output` null (what its worker stores for a handler that returns nothing), and
 * only while the job is `active` under the attempt this node fetched (`retry_count` as fetched: a
 * claim that lapsed — its heartbeat stopped, it expired — and was taken by another node is left
 * alone). `blocked` and `pending_dependencies` are left as they are, as its complete leaves them.
 * Dependants are released out of band by pg-boss itself; turns have none.
 */

/** A fetched job, as pg-boss's fetch returns it (its minimal columns). */
export interface FetchedJob<T> {
  readonly id: string;
  readonly data: T;
  /** The attempt: every claim increments it. */
  readonly retryCount: number;
}

/** pg-boss's schema (its default, which the queue uses) and job table of the queue (from getQueue). */
export function completeSql(table: string, schema = 'pgboss'): string {
  // `next`: a job of the same conversation not yet started (created or retry), i.e. what
  // key_strict_fifo held back behind this one and releases with this commit.
  return `UPDATE ${schema}.${table} AS j
    SET completed_on = ${schema}.job_now(), state = 'completed', output = NULL
    WHERE j.name = $1 AND j.id = $2::uuid AND j.state = 'active' AND j.retry_count = $3
    RETURNING EXISTS (SELECT 1 FROM ${schema}.${table} n WHERE n.name = j.name AND n.singleton_key = j.singleton_key AND n.state < 'active') AS next`;
}

/** What {@link completeSql} returns: no row when the claim was gone. */
export interface Completed {
  readonly next: boolean;
}
