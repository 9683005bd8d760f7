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
  /** Starts competing for one more channel (a config reload added it); nothing if already competing. */
  add(name: string): void;
  /**
   * Stops competing for a channel and releases its lease if held (a config reload removed it).
   * The caller stops the channel first, so no other node starts it while it still runs here.
   */
  remove(name: string): Promise<void>;
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
  /** Each channel competed for: its own stop signal and its loop. */
  const loops = new Map<string, { readonly stop: AbortController; readonly done: Promise<void> }>();
  const start = (name: string): void => {
    if (loops.has(name) || stopping.signal.aborted) return;
    const stop = new AbortController();
    loops.set(name, { stop, done: compete(name, AbortSignal.any([stopping.signal, stop.signal])) });
  };

  async function connect(): Promise<Client> {
    const client = new pg.Client({ connectionString: options.url, keepAlive: true, keepAliveInitialDelayMillis: 1000, connectionTimeoutMillis: 10_000 });
    client.on('error', () => undefined); // reported by the failing query below
    await client.connect();
    const idle = Math.max(1, Math.floor(options.keepaliveSeconds / 3));
    await client.query(`SET tcp_keepalives_idle = ${idle}; SET tcp_keepalives_interval = 1; SET tcp_keepalives_count = 3; SET application_name = 'switchboard lease'`);
    return client;
  }

  const pause = (ms: number, signal: AbortSignal): Promise<void> =>
    new Promise((resolve) => {
      if (signal.aborted) return resolve();
      const timer = setTimeout(resolve, ms);
      signal.addEventListener('abort', () => (clearTimeout(timer), resolve()), { once: true });
    });

  async function compete(name: string, signal: AbortSignal): Promise<void> {
    const log = options.log.child({ channel: name });
    const key = lockKey(name).toString();
    while (!signal.aborted) {
      let client: Client | undefined;
      try {
        client = await connect();
        for (;;) {
          if (signal.aborted) return;
          const { rows } = await client.query<{ ok: boolean }>('SELECT pg_try_advisory_lock($1::bigint) AS ok', [key]);
          if (rows[0]?.ok) break;
          await pause(options.retryMs, signal);
        }
        if (signal.aborted) return; // the lock goes with the connection, closed below
        held.add(name);
        log.info('this node now holds the channel');
        await events.onAcquired(name);
        // Hold it: a broken connection means the lock is (or soon will be) gone.
        while (!signal.aborted) {
          await pause(options.retryMs, signal);
          if (!signal.aborted) await client.query('SELECT 1');
        }
        if (held.delete(name)) log.info('released the channel lease');
      } catch (error) {
        if (signal.aborted) {
          held.delete(name);
          return;
        }
        if (held.has(name)) {
          held.delete(name);
          log.error({ err: error }, 'lost the channel lease (database connection broke); stopping the channel here — another node may take it');
          await events.onLost(name).catch((failure: unknown) => log.error({ err: failure }, 'stopping the channel failed'));
        } else {
          log.warn({ err: error }, 'cannot compete for the channel lease yet; trying again');
        }
        await pause(options.retryMs, signal);
      } finally {
        await client?.end().catch(() => undefined);
      }
    }
  }

  for (const name of names) start(name);
  return {
    held: () => held,
    add: start,
    async remove(name) {
      const loop = loops.get(name);
      if (!loop) return;
      loops.delete(name);
      loop.stop.abort();
      await loop.done;
    },
    async stop() {
      stopping.abort();
      await Promise.all([...loops.values()].map((loop) => loop.done));
      held.clear();
    },
  };
}
