/**
 * The local {@link TurnQueue} (one node): turns in memory, on a keyed pool over p-queue. Nothing
 * here outlives the process: the inbox is what is durable, and at start every message it holds
 * unanswered is queued again.
 */
import PQueue from 'p-queue';
import type { QueuedTurn, TurnQueue, TurnTicket, TurnWorker } from './turn-queue.ts';

/**
 * A keyed worker pool: at most `concurrency` items run at once, never two of one key at
 * once, FIFO within a key, keys served in the order they became ready. When `maxQueued`
 * items wait, `acquire()` waits too — backpressure reaches the producer instead of memory
 * growing.
 */
export interface KeyedPoolOptions<T> {
  /** Items running at once. Must be ≥ 1. */
  readonly concurrency: number;
  /** Items waiting (not running) before `acquire()` blocks. Must be ≥ 1. */
  readonly maxQueued: number;
  /** Runs one item. A rejection is reported to `onError`; the pool goes on. */
  readonly worker: (item: T, key: string) => Promise<void>;
  readonly onError: (error: unknown, item: T, key: string) => void;
  /** Whether items run as soon as they are added; false = from {@link KeyedPool.start}. @default true */
  readonly autoStart?: boolean;
}

/**
 * p-queue does the scheduling: its `concurrency` bounds the turns in flight, its FIFO order
 * serves keys in the order they became ready, its `pending` / `size` / `onIdle()` / events
 * are the pool's figures and signals. What p-queue has no notion of is a key, so the pool
 * hands it at most one item per key — the head of a key that is neither queued in p-queue
 * nor running — and keeps the rest of that key's items here, in arrival order, until the
 * item before them has finished. Since a key with held items always has one item in
 * p-queue, `onIdle()` means the pool is idle.
 */
export class KeyedPool<T> {
  readonly #options: KeyedPoolOptions<T>;
  readonly #queue: PQueue;
  /**
   * A key is here while one of its items is in p-queue (waiting or running); the array holds
   * its later items, which wait for that one to finish.
   */
  readonly #held = new Map<string, T[]>();
  /** Keys whose item is running (p-queue knows how many, not which). */
  readonly #running = new Set<string>();
  #heldCount = 0;
  /** acquire()s granted but not yet turned into enqueue() or release(). */
  #reserved = 0;
  /** Wakes producers blocked in acquire() when a reservation is given back. */
  readonly #released = new Set<() => void>();

  constructor(options: KeyedPoolOptions<T>) {
    if (!(options.concurrency >= 1)) throw new RangeError(`concurrency must be ≥ 1, got ${options.concurrency}`);
    if (!(options.maxQueued >= 1)) throw new RangeError(`maxQueued must be ≥ 1, got ${options.maxQueued}`);
    this.#options = options;
    this.#queue = new PQueue({ concurrency: options.concurrency, autoStart: options.autoStart ?? true });
  }

  /** Items waiting to run: p-queue's own queue plus the later items of busy keys. */
  get queued(): number {
    return this.#queue.size + this.#heldCount;
  }

  /** Items running now. */
  get inFlight(): number {
    return this.#queue.pending;
  }

  /**
   * Waits for room in the queue and reserves it. Every resolved `acquire()` must be followed
   * by exactly one `enqueue(…, { reserved: true })` or `release()`.
   */
  async acquire(): Promise<void> {
    while (this.queued + this.#reserved >= this.#options.maxQueued) await this.#room();
    this.#reserved++;
  }

  /** Gives back a reservation that will not be used. */
  release(): void {
    this.#reserved--;
    for (const wake of this.#released) wake();
  }

  /** Adds an item; with `reserved` it consumes a reservation from `acquire()`. */
  enqueue(key: string, item: T, options: { reserved?: boolean } = {}): void {
    if (options.reserved) this.#reserved--;
    const held = this.#held.get(key);
    if (held) {
      held.push(item);
      this.#heldCount++;
      return;
    }
    this.#held.set(key, []);
    this.#schedule(key, item);
  }

  /** Starts running items (a pool made with `autoStart: false`). */
  start(): void {
    this.#queue.start();
  }

  /** Resolves when nothing is queued or running. */
  idle(): Promise<void> {
    return this.#queue.onIdle();
  }

  /** Drops every waiting item (they stay in the durable inbox) and returns how many. */
  clearQueued(): number {
    const dropped = this.queued;
    for (const [key, held] of this.#held) {
      if (this.#running.has(key)) held.length = 0;
      else this.#held.delete(key);
    }
    this.#heldCount = 0;
    // Emits p-queue's 'next' (and 'idle' when nothing runs): blocked producers and idle() see it.
    this.#queue.clear();
    return dropped;
  }

  #schedule(key: string, item: T): void {
    void this.#queue.add(() => this.#run(key, item));
  }

  async #run(key: string, item: T): Promise<void> {
    this.#running.add(key);
    try {
      await this.#options.worker(item, key);
    } catch (error) {
      this.#options.onError(error, item, key);
    } finally {
      this.#running.delete(key);
      // Hand the key's next item to p-queue before this task counts as finished, so it
      // takes its place at the back of p-queue's line and onIdle() cannot fire in between.
      const held = this.#held.get(key);
      if (held !== undefined && held.length > 0) {
        this.#heldCount--;
        this.#schedule(key, held.shift() as T);
      } else this.#held.delete(key);
    }
  }

  /**
   * Resolves when the queue may have room again: an item started (p-queue 'active'), p-queue
   * moved on or was cleared ('next'), or a reservation was given back.
   */
  #room(): Promise<void> {
    return new Promise((resolve) => {
      const wake = (): void => {
        this.#queue.off('active', wake);
        this.#queue.off('next', wake);
        this.#released.delete(wake);
        resolve();
      };
      this.#queue.on('active', wake);
      this.#queue.on('next', wake);
      this.#released.add(wake);
    });
  }
}

export interface LocalQueueOptions {
  /** Turns running at once. */
  readonly concurrency: number;
  /** Turns waiting in memory before `reserve()` waits. */
  readonly maxQueued: number;
}

/**
 * The turn queue of one node. A turn is scheduled once its message's transaction committed
 * (a turn started inside it could read the inbox before the message is there); turns queued
 * before `start` wait for it.
 */
export function createLocalQueue(options: LocalQueueOptions): TurnQueue {
  let worker: TurnWorker | undefined;
  const pool = new KeyedPool<number>({
    concurrency: options.concurrency,
    maxQueued: options.maxQueued,
    autoStart: false,
    // 'retry' needs nothing here: the message stays in the inbox, queued again at the next start.
    worker: async (seq, conversation) => void (await worker?.(seq, conversation)),
    onError: () => undefined, // a TurnWorker does not reject
  });
  const ticket: TurnTicket = {
    enqueue: async () => undefined,
    committed: (turn) => pool.enqueue(turn.conversation, turn.seq, { reserved: true }),
    async redelivered(waiting) {
      const turn = await waiting().catch(() => undefined);
      if (turn) pool.enqueue(turn.conversation, turn.seq, { reserved: true });
      else pool.release();
    },
    release: () => pool.release(),
  };
  return {
    async reserve() {
      await pool.acquire();
      return ticket;
    },
    async start(run, unanswered) {
      worker = run;
      for (const turn of await unanswered()) pool.enqueue(turn.conversation, turn.seq);
      pool.start();
    },
    async stop() {
      pool.clearQueued();
      await pool.idle();
    },
    idle: () => pool.idle(),
    get busy() {
      return pool.queued > 0 || pool.inFlight > 0;
    },
    get queued() {
      return pool.queued;
    },
    get inFlight() {
      return pool.inFlight;
    },
  };
}

export type { QueuedTurn };
