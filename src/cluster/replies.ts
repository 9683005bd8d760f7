/**
 * Waking the node that holds a channel when another node's turn recorded a reply for it:
 * PostgreSQL NOTIFY inside the turn's transaction (delivered only if it commits), LISTEN on a
 * connection of the holder's own. A notification missed while that connection was down is made
 * up for by `onReconnect` (send everything pending) and by the runtime's periodic sweep.
 */
import type { Logger } from 'pino';
import { parseConversationKey } from '../conversation.ts';
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
 * one only if the channel runs here (`runsHere`). The holder is woken by {@link announceReply},
 * unless the turn ran on the holder itself: that turn sends its reply right after the commit, and a
 * NOTIFY would cost the commit a round trip and the holder a second, empty delivery round. Should
 * the channel stop here in between, the node that takes it next sends what is pending when the
 * channel starts there.
 */
export function clusterReplies(runsHere: (channel: string) => boolean): ReplyRoute {
  return {
    recorded: async (tx, conversation) => {
      const channel = parseConversationKey(conversation)?.channel;
      if (channel === undefined || !runsHere(channel)) await announceReply(tx, conversation);
    },
    sendsHere: (_channel, here) => here,
  };
}

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
