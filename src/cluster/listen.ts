/**
 * LISTEN on a PostgreSQL channel over a connection of its own, kept open: a connection that
 * breaks (a server restart) is replaced, trying again every `retryMs`, and `onReconnect` says
 * when notifications may have been missed meanwhile so the caller can catch up.
 */
import type { Client } from 'pg';
import type { Logger } from 'pino';

export interface Listening {
  /** Stops listening and closes the connection. */
  stop(): Promise<void>;
}

export interface ListenOptions {
  readonly url: string;
  /** The PostgreSQL channel (an identifier: it is not quoted). */
  readonly channel: string;
  readonly log: Logger;
  /** What listens, for log lines: "reply listener", "remote-tool listener". */
  readonly what: string;
  /** @default 2000 */
  readonly retryMs?: number;
  onNotice(payload: string): void;
  /** After the first connection: a new one is listening; anything sent while none was is lost. */
  onReconnect(): void;
}

/** Resolves once listening (retrying until the server answers, or until stopped). */
export async function listen(options: ListenOptions): Promise<Listening> {
  const { default: pg } = await import('pg');
  const { log, channel, what } = options;
  const retryMs = options.retryMs ?? 2000;
  const stopping = new AbortController();
  let client: Client | undefined;
  let first = true;

  const connect = async (): Promise<void> => {
    while (!stopping.signal.aborted) {
      const next = new pg.Client({ connectionString: options.url, keepAlive: true });
      try {
        await next.connect();
        next.on('notification', (note) => {
          if (note.channel === channel && note.payload) options.onNotice(note.payload);
        });
        next.on('error', (error) => {
          log.warn({ err: error }, `${what} connection broke; reconnecting`);
          void next.end().catch(() => undefined);
          if (client === next && !stopping.signal.aborted) void connect();
        });
        await next.query(`LISTEN ${channel}`);
        client = next;
        if (!first) options.onReconnect();
        first = false;
        return;
      } catch (error) {
        await next.end().catch(() => undefined);
        if (stopping.signal.aborted) return;
        log.warn({ err: error }, `${what} cannot listen yet; trying again`);
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
