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
}

export class KeyedPool<T> {
  readonly #options: KeyedPoolOptions<T>;
  readonly #queues = new Map<string, T[]>();
  /** Keys with waiting items and nothing running, in the order they became ready. */
  readonly #ready: string[] = [];
  readonly #running = new Set<string>();
  readonly #waiters: Array<() => void> = [];
  readonly #idleWaiters: Array<() => void> = [];
  #queued = 0;
  #reserved = 0;

  constructor(options: KeyedPoolOptions<T>) {
    if (!(options.concurrency >= 1)) throw new RangeError(`concurrency must be ≥ 1, got ${options.concurrency}`);
    if (!(options.maxQueued >= 1)) throw new RangeError(`maxQueued must be ≥ 1, got ${options.maxQueued}`);
    this.#options = options;
  }

  /** Items waiting to run. */
  get queued(): number {
    return this.#queued;
  }

  /** Items running now. */
  get inFlight(): number {
    return this.#running.size;
  }

  /**
   * Waits for room in the queue and reserves it. Every resolved `acquire()` must be followed
   * by exactly one `enqueue(…, { reserved: true })` or `release()`.
   */
  async acquire(): Promise<void> {
    while (this.#queued + this.#reserved >= this.#options.maxQueued) {
      await new Promise<void>((resolve) => this.#waiters.push(resolve));
    }
    this.#reserved++;
  }

  /** Gives back a reservation that will not be used. */
  release(): void {
    this.#reserved--;
    this.#wakeProducer();
  }

  /** Adds an item; with `reserved` it consumes a reservation from `acquire()`. */
  enqueue(key: string, item: T, options: { reserved?: boolean } = {}): void {
    if (options.reserved) this.#reserved--;
    let queue = this.#queues.get(key);
    if (!queue) {
      queue = [];
      this.#queues.set(key, queue);
    }
    queue.push(item);
    this.#queued++;
    if (queue.length === 1 && !this.#running.has(key)) this.#ready.push(key);
    this.#pump();
  }

  /** Resolves when nothing is queued or running. */
  idle(): Promise<void> {
    if (this.#queued === 0 && this.#running.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.#idleWaiters.push(resolve));
  }

  /** Drops every waiting item (they stay in the durable inbox) and returns how many. */
  clearQueued(): number {
    const dropped = this.#queued;
    this.#queues.clear();
    this.#ready.length = 0;
    this.#queued = 0;
    this.#wakeProducer();
    this.#checkIdle();
    return dropped;
  }

  #pump(): void {
    while (this.#running.size < this.#options.concurrency && this.#ready.length > 0) {
      const key = this.#ready.shift()!;
      const queue = this.#queues.get(key)!;
      const item = queue.shift()!;
      this.#queued--;
      this.#running.add(key);
      this.#wakeProducer();
      void this.#run(key, item);
    }
  }

  async #run(key: string, item: T): Promise<void> {
    try {
      await this.#options.worker(item, key);
    } catch (error) {
      this.#options.onError(error, item, key);
    } finally {
      this.#running.delete(key);
      const queue = this.#queues.get(key);
      if (queue && queue.length > 0) this.#ready.push(key);
      else this.#queues.delete(key);
      this.#pump();
      this.#checkIdle();
    }
  }

  #wakeProducer(): void {
    // A woken producer re-checks for room, so waking one too many is harmless.
    let room = this.#options.maxQueued - this.#queued - this.#reserved;
    while (room-- > 0 && this.#waiters.length > 0) this.#waiters.shift()!();
  }

  #checkIdle(): void {
    if (this.#queued === 0 && this.#running.size === 0) {
      for (const resolve of this.#idleWaiters.splice(0)) resolve();
    }
  }
}
