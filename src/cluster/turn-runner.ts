/**
 * This node's turns from the pg-boss queue, in place of pg-boss's `work()`: pg-boss's worker ends
 * every job with a `complete()` of its own after the handler, one more statement and round trip
 * per turn after the turn's commit, and the conversation's next turn waits for it. Here a turn's
 * job ends inside the transaction that records the turn's end ({@link TurnSettle}); only a turn
 * that ends without one (ignored, answered before, handed back) costs a statement after it.
 *
 * What pg-boss's worker did, kept: jobs fetched with its own fetch (`key_strict_fifo`: a
 * conversation's next job is not fetched while one of it is active, and the settle above is what
 * ends "active"); heartbeats for the jobs running here (one `touch` for all of them every half
 * heartbeat, fenced to the attempts fetched), so a node that dies mid-turn has its job failed by
 * pg-boss's supervisor on another node and retried there; a turn handed back (this node stopping,
 * or the turn crashed) failed with pg-boss's `fail`, so it is retried; at shutdown, what still
 * runs when the grace is over is failed, so another node takes it at once. A job that runs past
 * its expiry is failed by pg-boss's supervisor (the turn's own deadline is far shorter).
 *
 * Fetching: one fetch for all the free slots (not one per slot), woken by a job stored (the
 * queue's NOTIFY), by a turn's end (the conversation's next turn, or one another node's turn
 * released, has no NOTIFY), and by a poll (a job retried after a delay has none either). Tried: fetching after a turn's end only
 * when its conversation had a turn waiting or the last fetch came back full (an empty fetch fewer
 * per message on an idle queue); a slot then sat idle while another node's turn had released a
 * conversation's next one, and the 3-node pickup p99 doubled.
 */
import type { Logger } from 'pino';
import type { Db as IDatabase, PgBoss } from 'pg-boss';
import { rawPostgres } from '../store/postgres/sql.ts';
import type { Sql } from '../store/sql.ts';
import type { TurnSettle, TurnWorker } from '../runtime/turn-queue.ts';
import { completeSql, needsPostgres, type FetchedJob } from './turn-jobs.ts';

export interface TurnJob {
  readonly seq: number;
  readonly conversation: string;
}

export interface TurnRunnerOptions {
  readonly boss: PgBoss;
  readonly queue: string;
  /** The queue's job table (pg-boss's getQueue `table`). */
  readonly table: string;
  /** Where fetches and settles outside a turn's transaction go: the store's pool (prepared statements), or pg-boss's. */
  readonly db: IDatabase;
  /** Where fetches go: a connection of their own each (not one a turn's statements share, which would hold a claim behind them). */
  readonly fetchDb: IDatabase;
  readonly log: Logger;
  readonly concurrency: number;
  readonly heartbeatSeconds: number;
  /** How often to look for jobs no NOTIFY announces (retried after a delay; a NOTIFY missed). */
  readonly pollMs: number;
  /** A turn started or ended here (the queue's counts and idle() follow it). */
  onChange(): void;
}

export class TurnRunner {
  readonly #o: TurnRunnerOptions;
  readonly #worker: TurnWorker;
  readonly #complete: string;
  /** The jobs whose turns run here, by id. */
  readonly #running = new Map<string, FetchedJob<TurnJob>>();
  /** Failed at shutdown while their turn still ran: nothing more is said about them. */
  readonly #abandoned = new Set<string>();
  /** Fetches under way. */
  readonly #fetching = new Set<Promise<void>>();
  /** Slots the fetches under way may fill. */
  #asked = 0;
  /** Something may have become runnable while every slot was asked for: fetch again after a fetch. */
  #again = false;
  #stopping = false;
  readonly #timers: NodeJS.Timeout[] = [];

  constructor(options: TurnRunnerOptions, worker: TurnWorker) {
    this.#o = options;
    this.#worker = worker;
    this.#complete = completeSql(options.table);
  }

  get inFlight(): number {
    return this.#running.size;
  }

  start(): void {
    const beat = setInterval(() => void this.#beat(), Math.max(1000, (this.#o.heartbeatSeconds * 1000) / 2));
    const poll = setInterval(() => this.wake(), this.#o.pollMs);
    beat.unref();
    poll.unref();
    this.#timers.push(beat, poll);
    this.wake();
  }

  /** A job was stored (or may have been: a listener that reconnected): fetch if a slot is free. */
  wake(): void {
    this.#pump();
  }

  /**
   * Fetches for the slots neither running a turn nor asked for by a fetch under way: a turn's end
   * does not wait for another slot's fetch to come back (one at a time, a claim waited for two
   * fetches in a row; the 3-node claim p99 rose from ~50 to ~120 ms).
   */
  #pump(): void {
    if (this.#stopping) return;
    const free = this.#o.concurrency - this.#running.size - this.#asked;
    if (free <= 0) {
      if (this.#asked > 0) this.#again = true;
      return;
    }
    this.#again = false;
    this.#asked += free;
    const fetching: Promise<void> = this.#fetch(free).finally(() => {
      this.#asked -= free;
      this.#fetching.delete(fetching);
      if (this.#again) this.#pump();
    });
    this.#fetching.add(fetching);
  }

  async #fetch(free: number): Promise<void> {
    let jobs: FetchedJob<TurnJob>[];
    try {
      jobs = await this.#o.boss.fetch<TurnJob>(this.#o.queue, { batchSize: free, db: this.#o.fetchDb });
    } catch (error) {
      // the poll tries again
      this.#o.log.warn({ err: error }, 'could not fetch turns; trying again at the next poll');
      return;
    }
    if (this.#stopping) {
      // claimed as the node began stopping: handed back at once, for another node
      await this.#fail(jobs, 'this node stopped before the turn started');
      return;
    }
    for (const job of jobs) void this.#run(job);
  }

  async #run(job: FetchedJob<TurnJob>): Promise<void> {
    this.#running.set(job.id, job);
    this.#o.onChange();
    let committed = false;
    const settle: TurnSettle = {
      in: async (tx: Sql) => {
        const raw = rawPostgres(tx);
        if (!raw) throw needsPostgres();
        await raw.query(this.#complete, [this.#o.queue, job.id, job.retryCount]);
      },
      committed: () => {
        committed = true;
      },
    };
    let outcome: 'done' | 'retry';
    try {
      outcome = await this.#worker(job.data.seq, job.data.conversation, settle);
    } catch (error) {
      this.#o.log.error({ err: error, seq: job.data.seq }, 'the turn worker threw; its turn is tried again');
      outcome = 'retry';
    }
    try {
      if (this.#abandoned.has(job.id)) {
        // failed by stop(): another node has it
      } else if (outcome === 'retry') {
        await this.#fail([job], `turn of message ${job.data.seq} handed back: this node is stopping`);
      } else if (!committed) {
        await this.#o.db.executeSql(this.#complete, [this.#o.queue, job.id, job.retryCount]);
      }
    } catch (error) {
      this.#o.log.warn({ err: error, seq: job.data.seq }, 'could not end the turn\'s job; pg-boss hands it on when its heartbeat stops (the turn, answered, runs as a no-op)');
    } finally {
      this.#running.delete(job.id);
      this.#abandoned.delete(job.id);
      this.#o.onChange();
      this.#pump();
    }
  }

  /** Fails `jobs` (fenced to the attempts fetched): pg-boss retries them, on any node. */
  async #fail(jobs: readonly FetchedJob<TurnJob>[], message: string): Promise<void> {
    if (jobs.length === 0) return;
    await this.#o.boss.fail(
      this.#o.queue,
      jobs.map((job) => ({ id: job.id, retryCount: job.retryCount })),
      { message },
      { db: this.#o.db },
    );
  }

  async #beat(): Promise<void> {
    const held = [...this.#running.values()].filter((job) => !this.#abandoned.has(job.id));
    if (held.length === 0) return;
    try {
      await this.#o.boss.touch(
        this.#o.queue,
        held.map((job) => ({ id: job.id, retryCount: job.retryCount })),
        { db: this.#o.db },
      );
    } catch (error) {
      this.#o.log.warn({ err: error }, 'could not send the running turns\' heartbeat; tried again in a moment');
    }
  }

  /**
   * Stops fetching, waits up to `graceMs` for the running turns, then fails what still runs (their
   * turns go on until the runtime cuts them off; another node runs them again, as a no-op if they
   * got answered here after all).
   */
  async stop(graceMs: number, ended: Promise<void>): Promise<void> {
    this.#stopping = true;
    for (const timer of this.#timers) clearInterval(timer);
    await Promise.all(this.#fetching);
    if (this.#running.size > 0) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([ended, new Promise<void>((resolve) => (timer = setTimeout(resolve, Math.max(1000, graceMs))))]);
      clearTimeout(timer);
    }
    const left = [...this.#running.values()];
    for (const job of left) this.#abandoned.add(job.id);
    await this.#fail(left, 'this node stopped before the turn ended').catch((error: unknown) => this.#o.log.warn({ err: error }, 'could not hand back the turns still running; pg-boss hands them on when their heartbeat stops'));
  }
}
