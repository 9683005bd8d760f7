/**
 * Which node sends a recorded reply — the one difference between one node and a cluster that
 * the outbound side sees. One node sends every reply itself. In a cluster a reply goes out from
 * the node holding its channel's lease: a turn on another node wakes that one when it records
 * the reply (src/cluster/replies.ts), and each node's sweep retries only its own channels' replies.
 */
import type { Sql } from '../store/sql.ts';

export interface ReplyRoute {
  /** Inside the transaction that recorded a reply to `conversation`: tells the node that sends it (on commit). */
  recorded(tx: Sql, conversation: string): Promise<void>;
  /** Whether this node sends the replies of `channel`; `runsHere` = whether the channel runs on this node. */
  sendsHere(channel: string, runsHere: boolean): boolean;
}

/**
 * One node: every reply is sent here — a reply of a channel that is not running (removed by a
 * reload) waits in the outbox, and each round says so in the log.
 */
export const localReplies: ReplyRoute = {
  recorded: async () => undefined,
  sendsHere: () => true,
};
