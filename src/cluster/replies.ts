/**
 * Waking the node that holds a channel when another node's turn recorded a reply for it:
 * PostgreSQL NOTIFY inside the turn's transaction (delivered only if it commits), LISTEN on a
 * connection of the holder's own. A notification missed while that connection was down is made
 * up for by `onReconnect` (send everything pending) and by the runtime's periodic sweep.
 */
import type { Logger } from 'pino';
import type { ReplyRoute } from '../runtime/reply-route.ts';
import type { Sql } from '../store/sql.ts';
import { listen } from './listen.ts';

const CHANNEL = 'switchboard_replies';

/** Inside a transaction: tells the cluster a reply to `conversation` waits to be sent. */
export async function announceReply(tx: Sql, conversation: string): Promise<void> {
  await tx.get('SELECT pg_notify(?, ?)', [CHANNEL, conversation]);
}

/**
 * The cluster's {@link ReplyRoute}: a reply goes out from the node holding its channel — this
 * one only if the channel runs here; the holder is woken by {@link announceReply}.
 */
export const clusterReplies: ReplyRoute = {
  recorded: announceReply,
  sendsHere: (_channel, runsHere) => runsHere,
};

export interface ReplyListener {
  stop(): Promise<void>;
}

export async function listenForReplies(
  url: string,
  log: Logger,
  events: { onReply(conversation: string): void; onReconnect(): void },
  retryMs = 2000,
): Promise<ReplyListener> {
  return listen({ url, channel: CHANNEL, log, what: 'reply listener', retryMs, onNotice: events.onReply, onReconnect: events.onReconnect });
}
