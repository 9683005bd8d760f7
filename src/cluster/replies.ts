/**
 * Waking the node that holds a channel when another node's turn recorded a reply for it:
 * PostgreSQL NOTIFY inside the turn's transaction (delivered only if it commits), LISTEN on a
 * connection of the holder's own. A notification missed while that connection was down is made
 * up for by `onReconnect` (send everything pending) and by the runtime's periodic sweep.
 */
import type { Client } from 'pg';
import type { Logger } from 'pino';
import type { Sql } from '../store/sql.ts';

const CHANNEL = 'switchboard_replies';

/** Inside a transaction: tells the cluster a reply to `conversation` waits to be sent. */
export async function announceReply(tx: Sql, conversation: string): Promise<void> {
  await tx.get('SELECT pg_notify(?, ?)', [CHANNEL, conversation]);
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
  const { default: pg } = await import('pg');
  const stopping = new AbortController();
  let client: Client | undefined;
  let first = true;

  const connect = async (): Promise<void> => {
    while (!stopping.signal.aborted) {
      const next = new pg.Client({ connectionString: url, keepAlive: true });
      try {
        await next.connect();
        next.on('notification', (note) => {
          if (note.channel === CHANNEL && note.payload) events.onReply(note.payload);
        });
        next.on('error', (error) => {
          log.warn({ err: error }, 'reply listener connection broke; reconnecting');
          void next.end().catch(() => undefined);
          if (client === next && !stopping.signal.aborted) void connect();
        });
        await next.query(`LISTEN ${CHANNEL}`);
        client = next;
        if (!first) events.onReconnect();
        first = false;
        return;
      } catch (error) {
        await next.end().catch(() => undefined);
        log.warn({ err: error }, 'cannot listen for replies yet; trying again');
        await new Promise((resolve) => setTimeout(resolve, retryMs).unref());
      }
    }
  };
  await connect();
  return {
    async stop() {
      stopping.abort();
      await client?.end().catch(() => undefined);
    },
  };
}
