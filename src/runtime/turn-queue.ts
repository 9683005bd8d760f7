/**
 * How an accepted message's turn reaches the worker that runs it — the one port for both
 * modes. The runtime reserves room before it stores a message, queues the turn inside the
 * transaction that stores it, and starts and stops the queue with itself; it never asks which
 * queue it has. Two implementations: the local one on p-queue (one node, src/runtime/local-queue.ts)
 * and pg-boss (several nodes on one PostgreSQL, src/cluster/pg-boss-queue.ts). Both run turns
 * first in first out within a conversation, never two of one conversation at once, and many
 * conversations in parallel; test/contracts/turn-queue.ts holds them to it.
 */
import type { InboundMessage } from '../channel.ts';
import type { Sql } from '../store/sql.ts';

/** One turn: the inbox entry `seq` of `conversation` (the key nothing runs two of at once). */
export interface QueuedTurn {
  readonly seq: number;
  readonly conversation: string;
}

/**
 * Runs the turn of inbox entry `seq`. 'retry' = it is not answered (it crashed, or this node is
 * stopping): a shared queue hands it to a node again; the local queue leaves it in the inbox,
 * which queues it again at the next start. Must not reject.
 */
export type TurnWorker = (seq: number, conversation: string, settle?: TurnSettle) => Promise<'done' | 'retry'>;

/**
 * A shared queue's job for the turn, ended in the transaction that records the turn's end: the
 * conversation's next turn may start the moment that transaction commits, with no statement of the
 * queue's after it. A turn that ends without such a transaction (ignored, answered before, handed
 * back) leaves its job to the queue.
 */
export interface TurnSettle {
  /** Inside the transaction that ends the turn: settles the job with it. */
  in(tx: Sql): Promise<void>;
  /** That transaction committed. */
  committed(): void;
}

/**
 * Room for one message's turn, taken before the message is stored (so a full queue holds back
 * the channel's `push`). Exactly one of `committed`, `redelivered` or `release` ends it.
 */
export interface TurnTicket {
  /** Inside the transaction that accepted the message: a shared queue stores the turn's job with it. */
  enqueue(tx: Sql, turn: QueuedTurn): Promise<void>;
  /**
   * Stores the message in the inbox and its turn's job in one statement (a shared queue on
   * PostgreSQL: no transaction around the two, one statement instead of four); undefined for a
   * message stored before. Without it, the message is stored and {@link enqueue} called in one transaction.
   */
  accept?(sql: Sql, message: InboundMessage): Promise<QueuedTurn | undefined>;
  /** That transaction committed (or was found committed after its answer was lost): the local queue schedules the turn now. */
  committed(turn: QueuedTurn): void;
  /**
   * The message was in the inbox already. `waiting` reads it back if still unanswered: the local
   * queue runs it (an earlier push may have stored it and failed before queueing); a shared
   * queue got its job in the transaction that stored it, and reads nothing.
   */
  redelivered(waiting: () => Promise<QueuedTurn | undefined>): Promise<void>;
  /** Nothing was stored: gives the room back. */
  release(): void;
}

export interface TurnQueue {
  /** Waits until there is room for one more turn and takes it. */
  reserve(): Promise<TurnTicket>;
  /**
   * Starts running turns with `worker`. `unanswered` lists what the inbox holds unanswered from
   * an earlier run: the local queue (which keeps nothing across a restart) runs those first; a
   * shared queue kept their jobs and does not call it.
   */
  start(worker: TurnWorker, unanswered: () => Promise<readonly QueuedTurn[]>): Promise<void>;
  /**
   * Stops taking turns (the waiting ones stay durable: in the inbox, or in the shared queue for
   * the other nodes) and resolves when the running ones have ended. `graceMs` is how long a shared
   * queue's own shutdown waits for them; the runtime cuts them off when its grace runs out.
   */
  stop(graceMs: number): Promise<void>;
  /** Resolves when no turn waits or runs here (a shared queue: none runs on this node). */
  idle(): Promise<void>;
  /** Whether a turn waits or runs here now (what {@link idle} waits for). */
  readonly busy: boolean;
  /** Turns waiting, as the status shows them (a shared queue: the whole cluster's, as last counted). */
  readonly queued: number;
  /** Turns running on this node now. */
  readonly inFlight: number;
}
