/**
 * How turns reach the node that runs them, when several nodes share one PostgreSQL. The runtime
 * puts each accepted message's turn here in the same transaction that stores it in the inbox, and
 * any node's worker may take it: never two turns of one conversation at once, first in first out
 * within a conversation. (One node with SQLite uses the in-process KeyedPool instead.)
 */
import type { Sql } from '../store/sql.ts';

/** Runs the turn of inbox entry `seq`; 'retry' hands it back (this node is stopping) so another node runs it. */
export type TurnWorker = (seq: number, conversation: string) => Promise<'done' | 'retry'>;

export interface TurnQueue {
  /** Queues the turn of `seq`, inside the transaction `tx` that accepted it. */
  enqueue(tx: Sql, conversation: string, seq: number): Promise<void>;
  /** Starts taking turns. */
  start(worker: TurnWorker): Promise<void>;
  /** Stops taking turns; waits up to `graceMs` for the running ones. */
  stop(graceMs: number): Promise<void>;
  /** Turns running on this node now. */
  readonly inFlight: number;
  /** Turns waiting in the whole cluster, as last counted. */
  readonly queued: number;
}
