/**
 * {@link TurnQueue} on pg-boss (loaded only in cluster mode): one queue with the
 * `key_strict_fifo` policy keyed by conversation, jobs stored inside the inbox transaction (our
 * statement, src/cluster/turn-jobs.ts), and this node's turns run by {@link TurnRunner} (src/cluster/turn-runner.ts: our
 * own fetch loop in place of pg-boss's `work()`, a turn's job ended inside the transaction that
 * records the turn's end, heartbeats so a turn held by a node that died is handed to another node
 * within `heartbeatSeconds`), woken by our own LISTEN on the channel pg-boss NOTIFYs.
 *
 * A job must never end `failed`: in a `key_strict_fifo` queue a failed job holds back every later
 * job of its conversation. So a job is completed whatever its turn did (the turn records an
 * apology itself), and a job that comes back (its node died, or stopped mid-turn) is retried
 * without limit — the inbox's status makes a repeated turn a no-op.
 */
import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import type { PgBoss } from 'pg-boss';
import type { Pool } from 'pg';
import { rawPostgres } from '../store/postgres/sql.ts';
import { listen, type Listening } from './listen.ts';
import type { Database, Sql } from '../store/sql.ts';
import type { QueuedTurn, TurnQueue, TurnTicket, TurnWorker } from '../runtime/turn-queue.ts';
import { TurnRunner, type TurnJob } from './turn-runner.ts';
import { acceptSql, insertSql, needsPostgres } from './turn-jobs.ts';
import { inboxRow } from '../store/inbox.ts';
import type { InboundMessage } from '../channel.ts';

export interface PgBossQueueOptions {
  readonly url: string;
  readonly log: Logger;
  /** Turns this node runs at once. */
  readonly concurrency: number;
  /** A turn whose node stops sending heartbeats for this long is taken over by another node (pg-boss minimum: 10). */
  readonly heartbeatSeconds: number;
  /** The longest a turn may run (pg-boss expires it after that and hands it on). */
  readonly turnTimeoutSeconds: number;
  /**
   * The store (PostgreSQL): fetches and the settles outside a turn's transaction go through its
   * pool, prepared. Without it (a command that only stores turns), pg-boss's own pool.
   */
  readonly database?: Database & { readonly pool?: Pool };
}

const QUEUE = 'switchboard-turns';
/**
 * The channel pg-boss NOTIFYs when a job of a notify-enabled queue is stored (its payload: the
 * queue's name): `'pgboss_' || left(encode(sha224(schema), 'hex'), 24)` for its default schema.
 */
const BOSS_CHANNEL = `pgboss_${createHash('sha224').update('pgboss').digest('hex').slice(0, 24)}`;

export async function createPgBossQueue(options: PgBossQueueOptions): Promise<TurnQueue> {
  const { PgBoss } = await import('pg-boss');
  const log = options.log.child({ component: 'queue' });
  const boss: PgBoss = new PgBoss({
    connectionString: options.url,
    max: Math.max(4, options.concurrency + 2),
    // Its listener wakes its own workers, which we do not run (see TurnRunner); ours wakes our
    // fetch loop. Its sends still NOTIFY: that depends on the queue's `notify`, not on this.
    useListenNotify: false,
    // maintenance (expiry, archive) on every node is safe: pg-boss takes its own locks
    supervise: true,
    schedule: false,
    // A turn whose heartbeats stopped is failed (and so retried elsewhere) by the supervise pass,
    // which runs at the longer of these two intervals: both a third of the heartbeat (default 60 s
    // each, which held a dead node's turn for a minute).
    monitorIntervalSeconds: Math.max(1, Math.floor(options.heartbeatSeconds / 3)),
    superviseIntervalSeconds: Math.max(1, Math.floor(options.heartbeatSeconds / 3)),
  });
  boss.on('error', (error: Error) => log.error({ err: error }, 'pg-boss reported an error; it retries by itself'));
  boss.on('warning', (warning: unknown) => log.warn({ warning }, 'pg-boss warning'));
  await boss.start();
  await boss.createQueue(QUEUE, {
    policy: 'key_strict_fifo',
    notify: true,
    heartbeatSeconds: options.heartbeatSeconds,
    expireInSeconds: Math.ceil(options.turnTimeoutSeconds + 60),
    retryLimit: 1_000_000,
    // A turn that crashed (the database went away mid-turn, say) is tried again, backing off to
    // 10 s at most: its conversation waits meanwhile (FIFO), so a long backoff would hold it up
    // long after the database is back. A node that died: its turn is retried after 1 s.
    retryDelay: 1,
    retryBackoff: true,
    retryDelayMax: 10,
    retentionSeconds: 7 * 86_400,
    deleteAfterSeconds: 86_400,
  });
  let queued = 0;
  let runner: TurnRunner | undefined;
  /** Waiting in idle() for the turns running here to end. */
  const idlers = new Set<() => void>();
  const inFlight = (): number => runner?.inFlight ?? 0;
  const ended = (): void => {
    if (inFlight() > 0) return;
    for (const resolve of idlers) resolve();
    idlers.clear();
  };
  const idle = (): Promise<void> => (inFlight() === 0 ? Promise.resolve() : new Promise<void>((resolve) => idlers.add(resolve)));
  let counting: NodeJS.Timeout | undefined;
  let listening: Listening | undefined;
  const count = async (): Promise<void> => {
    try {
      queued = (await boss.getQueue(QUEUE))?.queuedCount ?? 0;
    } catch (error) {
      log.debug({ err: error }, 'could not count queued turns');
    }
  };

  const table = (await boss.getQueue(QUEUE))?.table;
  if (!table) throw new Error(`pg-boss has no queue ${QUEUE}`);
  const insert = insertSql(table, BOSS_CHANNEL);
  const accepting = acceptSql(table, BOSS_CHANNEL);
  const accept = async (sql: Sql, message: InboundMessage): Promise<QueuedTurn | undefined> => {
    if (sql.dialect !== 'postgres') throw needsPostgres();
    const params = inboxRow(message, Date.now());
    const row = await sql.get<{ seq: number }>(accepting, [...params, QUEUE]);
    return row ? { seq: row.seq, conversation: params[2] } : undefined;
  };
  const enqueue = (tx: Sql, turn: QueuedTurn): Promise<void> => {
    const raw = rawPostgres(tx);
    if (!raw) return Promise.reject(needsPostgres());
    const data: TurnJob = { seq: turn.seq, conversation: turn.conversation };
    // Not waited for: the transaction's COMMIT goes out in the same write. Should the insert fail,
    // so does the transaction: its COMMIT answers ROLLBACK and the accept fails with this error
    // (src/store/postgres/sql.ts), as it would have had it been waited for.
    raw.query(insert, [QUEUE, JSON.stringify(data), turn.conversation]).catch(() => undefined);
    return Promise.resolve();
  };
  // No room to wait for (the queue is in PostgreSQL) and nothing to do after the commit: the job
  // went in with the message, so a message found stored has its job too.
  const ticket: TurnTicket = { enqueue, accept, committed: () => undefined, redelivered: async () => undefined, release: () => undefined };

  return {
    get inFlight() {
      return inFlight();
    },
    get queued() {
      return queued;
    },
    get busy() {
      return inFlight() > 0;
    },
    reserve: async () => ticket,
    idle,
    // Its jobs outlive a restart: nothing to recover from the inbox.
    async start(worker: TurnWorker) {
      const store = options.database ? rawPostgres(options.database) : undefined;
      const db = store ? { executeSql: (text: string, values?: unknown[]) => store.query(text, values ?? []) as Promise<{ rows: never[] }> } : boss.getDb();
      const pool = options.database?.pool;
      // prepared, named by the statement (its text varies only with the batch size)
      const names = new Map<string, string>();
      const named = (text: string): string => {
        let name = names.get(text);
        if (name === undefined) names.set(text, (name = `sbq-${createHash('sha1').update(text).digest('hex').slice(0, 16)}`));
        return name;
      };
      const fetchDb = pool ? { executeSql: async (text: string, values?: unknown[]) => ({ rows: (await pool.query({ name: named(text), text, values: values ?? [] })).rows as never[] }) } : db;
      // pollMs: the fallback when a NOTIFY is missed, and what finds a turn retried after a delay
      // (no NOTIFY for a job not yet runnable) — as often as pg-boss's own workers polled.
      const running = new TurnRunner(
        { boss, queue: QUEUE, table, db, fetchDb, log, concurrency: options.concurrency, heartbeatSeconds: options.heartbeatSeconds, pollMs: 5000, onChange: ended },
        worker,
      );
      runner = running;
      // listening before the first fetch: it finds whatever was stored before
      listening = await listen({
        url: options.url,
        channel: BOSS_CHANNEL,
        log,
        what: 'turn listener',
        onNotice: (queue) => {
          if (queue === QUEUE) running.wake();
        },
        // notifications may have been missed while it was down
        onReconnect: () => running.wake(),
      });
      running.start();
      counting = setInterval(() => void count(), 5000);
      counting.unref();
      await count();
    },
    async stop(graceMs: number) {
      clearInterval(counting);
      await listening?.stop();
      await runner?.stop(graceMs, idle());
      await boss.stop({ graceful: true, timeout: 1000, close: true });
    },
  };
}
