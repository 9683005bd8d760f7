/**
 * A turn's pg-boss job, stored and ended with statements of ours rather than pg-boss's `send()`
 * and `complete()`.
 *
 * Stored: with the message, in one statement ({@link acceptSql}); or (a turn stored by a command,
 * not by the runtime's accept) issued at once inside the accepting transaction (pg-boss's send builds its statement
 * after awaits of its own, so the transaction's COMMIT could only follow its answer: one round
 * trip more per message), prepared, and without the JSON recordset pg-boss parses for a batch.
 * Written after pg-boss 12's `insertJobs` (node_modules/pg-boss/dist/plans.js) for the one job a
 * turn is: a new id, the queue's own settings (expiry, retention, retries, heartbeat, policy)
 * read from its row as pg-boss's insert reads them, runnable now (priority 0, `start_after` now),
 * keyed by conversation, and the NOTIFY on pg-boss's channel with the queue's name that its
 * insert sends for a job runnable at once (`notifyChannelSql`), in the same transaction.
 *
 * Ended: the statements that end a turn's pg-boss job, ours rather than pg-boss's `complete()`: issued in
 * the transaction that records the turn's end (one statement among its writes, no round trip after
 * the commit), prepared on the store's connections.
 *
 * Written after pg-boss 12's own complete (node_modules/pg-boss/dist/plans.js: `completeJobs` →
 * `completeJobsUpdate`, fenced by `attemptFence`): state `completed`, `completed_on` from its
 * clock function, `output` null (what its worker stores for a handler that returns nothing), and
 * only while the job is `active` under the attempt this node fetched (`retry_count` as fetched: a
 * claim that lapsed — its heartbeat stopped, it expired — and was taken by another node is left
 * alone). `blocked` and `pending_dependencies` are left as they are, as its complete leaves them.
 * Dependants are released out of band by pg-boss itself; turns have none.
 */

import { INBOX_INSERT } from '../store/inbox.ts';

/** What the queue's statements say when the store they are given is not PostgreSQL. */
export function needsPostgres(): Error {
  return new Error('the pg-boss queue needs the PostgreSQL store ([store] kind = "postgres")');
}

/** A fetched job, as pg-boss's fetch returns it (its minimal columns). */
export interface FetchedJob<T> {
  readonly id: string;
  readonly data: T;
  /** The attempt: every claim increments it. */
  readonly retryCount: number;
}

/** Completes job $2 of queue $1 fetched at attempt $3, in pg-boss's `schema` and the queue's job `table` (getQueue's `table`). */
export function completeSql(table: string, schema = 'pgboss'): string {
  return `UPDATE ${schema}.${table}
    SET completed_on = ${schema}.job_now(), state = 'completed', output = NULL
    WHERE name = $1 AND id = $2::uuid AND state = 'active' AND retry_count = $3`;
}

/** The job's insert from `source` (FROM items giving `data` jsonb and `key` text) into the queue named `queue` (an SQL expression). */
function jobInsert(table: string, schema: string, data: string, key: string, source: string, queue: string): string {
  return `INSERT INTO ${schema}.${table} (id, name, data, priority, start_after, created_on, singleton_key, expire_seconds, deletion_seconds,
        keep_until, retry_limit, retry_delay, retry_backoff, retry_delay_max, policy, dead_letter, heartbeat_seconds, blocked, blocking, pending_dependencies)
      SELECT gen_random_uuid(), q.name, ${data}, 0, ${schema}.job_now(), ${schema}.job_now(), ${key}, q.expire_seconds, q.deletion_seconds,
        ${schema}.job_now() + q.retention_seconds * interval '1s', q.retry_limit, q.retry_delay, q.retry_backoff, q.retry_delay_max, q.policy, q.dead_letter, q.heartbeat_seconds, false, false, 0
      FROM ${source}${schema}.queue q WHERE q.name = ${queue}
      ON CONFLICT DO NOTHING
      RETURNING name`;
}

/** Stores a job of queue $1 with data $2 (jsonb) and key $3; NOTIFYs `channel` with the queue's name. */
export function insertSql(table: string, channel: string, schema = 'pgboss'): string {
  return `WITH ins AS (${jobInsert(table, schema, '$2::jsonb', '$3::text', '', '$1')})
    SELECT pg_notify('${channel}', name) FROM ins LIMIT 1`;
}

/**
 * The message and its job in one statement, in the store's `?` placeholders: the inbox row as
 * Inbox.accept stores it (INBOX_INSERT, with inboxRow's parameters), then the job of queue `?` for it with `{ seq, conversation }`, and the
 * NOTIFY — a statement is atomic, so no transaction around them. Returns the message's seq.
 */
export function acceptSql(table: string, channel: string, schema = 'pgboss'): string {
  return `WITH m AS (${INBOX_INSERT} RETURNING seq, conversation),
    ins AS (${jobInsert(table, schema, "jsonb_build_object('seq', m.seq, 'conversation', m.conversation)", 'm.conversation', 'm, ', '?')}),
    notified AS (SELECT pg_notify('${channel}', name) FROM ins LIMIT 1)
    SELECT seq, (SELECT count(*) FROM notified) AS notified FROM m`;
}
