/**
 * Channel ownership across nodes: each channel account is listened to by exactly one node at a
 * time (a Telegram token allows one poller, an IRC nick one connection, IMAP IDLE one session).
 * The owner holds a PostgreSQL session advisory lock named after the channel, on a connection of
 * its own. When the owner dies its connection closes and PostgreSQL releases the lock; another node
 * that has the channel configured takes it at its next try (every `retryMs`). TCP keepalives on
 * both ends bound how long a vanished host (no FIN) can hold it.
 *
 * A holder that loses its connection stops the channel at once (`onLost`), before anyone else can
 * take the lock, and tries again to take it like any other node.
 */
import { createHash } from 'node:crypto';
import type { Client } from 'pg';
import type { Logger } from 'pino';

export interface LeaseOptions {
  readonly url: string;
  readonly log: Logger;
  /** How often a node without the lease tries to take it, and the holder checks its connection. */
  readonly retryMs: number;
  /** Seconds before the server drops a connection whose peer vanished (TCP keepalive). */
  readonly keepaliveSeconds: number;
}

export interface LeaseEvents {
  /** This node now holds the channel: start listening. */
  onAcquired(name: string): Promise<void>;
  /** This node lost the channel (its connection broke): stop listening now. */
  onLost(name: string): Promise<void>;
}

export interface Leases {
  /** Channels this node holds now. */
  held(): ReadonlySet<string>;
  /** Releases every lease (shutdown). */
  stop(): Promise<void>;
}

/** A 64-bit advisory lock key for a channel name (stable across nodes and versions). */
export function lockKey(name: string): bigint {
  return createHash('sha256').update(`switchboard channel ${name}`).digest().readBigInt64BE(0);
}

/** Competes for each of `names` until stopped. */
export async function startLeases(names: readonly string[], options: LeaseOptions, events: LeaseEvents): Promise<Leases> {
  const { default: pg } = await import('pg');
  const held = new Set<string>();
  const stopping = new AbortController();
  const loops = names.map((name) => compete(name));

  async function connect(): Promise<Client> {
    const client = new pg.Client({ connectionString: options.url, keepAlive: true, keepAliveInitialDelayMillis: 1000, connectionTimeoutMillis: 10_000 });
    client.on('error', () => undefined); // reported by the failing query below
    await client.connect();
    const idle = Math.max(1, Math.floor(options.keepaliveSeconds / 3));
    await client.query(`SET tcp_keepalives_idle = ${idle}; SET tcp_keepalives_interval = 1; SET tcp_keepalives_count = 3; SET application_name = 'switchboard lease'`);
    return client;
  }

  const pause = (ms: number): Promise<void> =>
    new Promise((resolve) => {
      const timer = setTimeout(resolve, ms);
      stopping.signal.addEventListener('abort', () => (clearTimeout(timer), resolve()), { once: true });
    });

  async function compete(name: string): Promise<void> {
    const log = options.log.child({ channel: name });
    const key = lockKey(name).toString();
    while (!stopping.signal.aborted) {
      let client: Client | undefined;
      try {
        client = await connect();
        for (;;) {
          if (stopping.signal.aborted) return;
          const { rows } = await client.query<{ ok: boolean }>('SELECT pg_try_advisory_lock($1::bigint) AS ok', [key]);
          if (rows[0]?.ok) break;
          await pause(options.retryMs);
        }
        held.add(name);
        log.info('this node now holds the channel');
        await events.onAcquired(name);
        // Hold it: a broken connection means the lock is (or soon will be) gone.
        while (!stopping.signal.aborted) {
          await pause(options.retryMs);
          if (!stopping.signal.aborted) await client.query('SELECT 1');
        }
      } catch (error) {
        if (stopping.signal.aborted) return;
        if (held.has(name)) {
          held.delete(name);
          log.error({ err: error }, 'lost the channel lease (database connection broke); stopping the channel here — another node may take it');
          await events.onLost(name).catch((failure: unknown) => log.error({ err: failure }, 'stopping the channel failed'));
        } else {
          log.warn({ err: error }, 'cannot compete for the channel lease yet; trying again');
        }
        await pause(options.retryMs);
      } finally {
        await client?.end().catch(() => undefined);
      }
    }
  }

  return {
    held: () => held,
    async stop() {
      stopping.abort();
      await Promise.all(loops);
      held.clear();
    },
  };
}
