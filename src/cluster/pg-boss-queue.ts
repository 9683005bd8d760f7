/**
 * {@link TurnQueue} on pg-boss (loaded only in cluster mode): one queue with the
 * `key_strict_fifo` policy keyed by conversation, jobs sent inside the inbox transaction (its
 * `db` option), workers woken one at a time by LISTEN/NOTIFY (see {@link wakeOne}), and heartbeats
 * so a turn held by a node that died is handed to another node within `heartbeatSeconds`.
 *
 * A job must never end `failed`: in a `key_strict_fifo` queue a failed job holds back every later
 * job of its conversation. So the worker completes a job whatever its turn did (the turn records an
 * apology itself), and a job that comes back (its node died, or stopped mid-turn) is retried
 * without limit — the inbox's status makes a repeated turn a no-op.
 */
import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import type { PgBoss } from 'pg-boss';
import { rawPostgres } from '../store/postgres/sql.ts';
import { listen, type Listening } from './listen.ts';
import type { Sql } from '../store/sql.ts';
import type { QueuedTurn, TurnQueue, TurnTicket, TurnWorker } from '../runtime/turn-queue.ts';

export interface PgBossQueueOptions {
  readonly url: string;
  readonly log: Logger;
  /** Turns this node runs at once. */
  readonly concurrency: number;
  /** A turn whose node stops sending heartbeats for this long is taken over by another node (pg-boss minimum: 10). */
  readonly heartbeatSeconds: number;
  /** The longest a turn may run (pg-boss expires it after that and hands it on). */
  readonly turnTimeoutSeconds: number;
}

const QUEUE = 'switchboard-turns';
/**
 * The channel pg-boss NOTIFYs when a job of a notify-enabled queue is stored (its payload: the
 * queue's name): `'pgboss_' || left(encode(sha224(schema), 'hex'), 24)` for its default schema.
 */
const BOSS_CHANNEL = `pgboss_${createHash('sha224').update('pgboss').digest('hex').slice(0, 24)}`;

interface TurnJob {
  readonly seq: number;
  readonly conversation: string;
}

export async function createPgBossQueue(options: PgBossQueueOptions): Promise<TurnQueue> {
  const { PgBoss } = await import('pg-boss');
  const log = options.log.child({ component: 'queue' });
  const boss: PgBoss = new PgBoss({
    connectionString: options.url,
    max: Math.max(4, options.concurrency + 2),
    // Its listener would wake every worker of the queue for each job stored (a fetch each: 8 per
    // message per node, 24 in a cluster of three, all but one empty); ours wakes one (wakeOne).
    // Its sends still NOTIFY: that depends on the queue's `notify`, not on this.
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
  let inFlight = 0;
  let queued = 0;
  /** Waiting in idle() for the turns running here to end. */
  const idlers = new Set<() => void>();
  let counting: NodeJS.Timeout | undefined;
  let listening: Listening | undefined;
  const count = async (): Promise<void> => {
    try {
      queued = (await boss.getQueue(QUEUE))?.queuedCount ?? 0;
    } catch (error) {
      log.debug({ err: error }, 'could not count queued turns');
    }
  };

  const enqueue = async (tx: Sql, turn: QueuedTurn): Promise<void> => {
    const raw = rawPostgres(tx);
    if (!raw) throw new Error('the pg-boss queue needs the PostgreSQL store ([store] kind = "postgres")');
    const data: TurnJob = { seq: turn.seq, conversation: turn.conversation };
    await boss.send(QUEUE, data, {
      singletonKey: turn.conversation,
      db: { executeSql: (text: string, values?: unknown[]) => raw.query(text, values ?? []) as Promise<{ rows: never[] }> },
    });
  };
  // No room to wait for (the queue is in PostgreSQL) and nothing to do after the commit: the job
  // went in with the message, so a message found stored has its job too.
  const ticket: TurnTicket = { enqueue, committed: () => undefined, redelivered: async () => undefined, release: () => undefined };

  return {
    get inFlight() {
      return inFlight;
    },
    get queued() {
      return queued;
    },
    get busy() {
      return inFlight > 0;
    },
    reserve: async () => ticket,
    idle: () => (inFlight === 0 ? Promise.resolve() : new Promise<void>((resolve) => idlers.add(resolve))),
    // Its jobs outlive a restart: nothing to recover from the inbox.
    async start(worker: TurnWorker) {
      const workers = (): ReturnType<PgBoss['getWipData']> => boss.getWipData().filter((entry) => entry.name === QUEUE);
      /** Workers woken and not yet back from their fetch: worker id → when it last fetched before. */
      const waking = new Map<string, number | null>();
      /**
       * Wakes one idle worker of this node (the one that fetched longest ago: likely asleep), so a
       * job stored costs each node one fetch, not one per worker. Several jobs stored at once wake
       * as many workers: a worker woken counts as taken until its fetch is back.
       */
      const wakeOne = (): void => {
        const list = workers();
        for (const [id, fetchedOn] of waking) {
          const entry = list.find((candidate) => candidate.id === id);
          if (!entry || entry.count > 0 || (entry.lastFetchedOn ?? null) !== fetchedOn) waking.delete(id);
        }
        const idle = list.filter((entry) => entry.count === 0 && entry.state === 'active' && !waking.has(entry.id));
        idle.sort((a, b) => (a.lastFetchedOn ?? 0) - (b.lastFetchedOn ?? 0));
        const chosen = idle[0];
        if (!chosen) return;
        waking.set(chosen.id, chosen.lastFetchedOn ?? null);
        boss.notifyWorker(chosen.id);
      };
      // A pg-boss worker waits out its polling interval after each job unless it was woken
      // meanwhile, so a backlog queued faster than NOTIFYs arrive would drain at one turn per
      // worker per interval (measured: 8 turns, then 5 s idle). So each turn that ends tells the busy
      // workers (its own among them) to fetch again at once; an idle queue costs each of them one
      // empty fetch, then they sleep until a NOTIFY.
      const fetchAgain = (): void => {
        for (const entry of workers()) if (entry.count > 0) boss.notifyWorker(entry.id);
      };
      // listening before the workers start: their first fetch finds whatever was stored before
      listening = await listen({
        url: options.url,
        channel: BOSS_CHANNEL,
        log,
        what: 'turn listener',
        onNotice: (queue) => {
          if (queue === QUEUE) wakeOne();
        },
        // notifications may have been missed while it was down: every worker looks once
        onReconnect: () => {
          for (const entry of workers()) boss.notifyWorker(entry.id);
        },
      });
      // pollingIntervalSeconds: the fallback when a NOTIFY is missed, and what finds a turn retried
      // after a delay (no NOTIFY for a job not yet runnable) — as often as pg-boss's own listener polled.
      await boss.work<TurnJob>(QUEUE, { localConcurrency: options.concurrency, batchSize: 1, pollingIntervalSeconds: 5 }, async ([job]) => {
        if (!job) return;
        inFlight++;
        try {
          const outcome = await worker(job.data.seq, job.data.conversation);
          // thrown: pg-boss retries it (on this node or another); the inbox keeps it queued meanwhile
          if (outcome === 'retry') throw new Error(`turn of message ${job.data.seq} handed back: this node is stopping`);
        } finally {
          inFlight--;
          if (inFlight === 0) {
            for (const resolve of idlers) resolve();
            idlers.clear();
          }
          fetchAgain();
        }
      });
      counting = setInterval(() => void count(), 5000);
      counting.unref();
      await count();
    },
    async stop(graceMs: number) {
      clearInterval(counting);
      await listening?.stop();
      await boss.stop({ graceful: true, timeout: Math.max(1000, graceMs), close: true });
    },
  };
}
