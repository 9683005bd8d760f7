/**
 * The count of replies recorded and not yet sent, kept for health() (which is synchronous): counted
 * again after delivery rounds, at most once per `intervalMs`. A count after every round was a
 * statement per message under load (on PostgreSQL a round trip, which the turn waited for); now
 * rounds ending within one interval share the count that follows it, and no round waits for it.
 */
import type { Logger } from 'pino';

export class PendingCount {
  /** As last counted. */
  value = 0;
  readonly #count: () => Promise<number>;
  readonly #log: Logger;
  readonly #intervalMs: number;
  /** A round ended since the last count began. */
  #stale = false;
  #running: Promise<void> | undefined;
  /** Set while the interval after a count's start runs: the next count waits for it. */
  #cooling: NodeJS.Timeout | undefined;
  #stopped = false;

  /** `intervalMs`: the least time between the starts of two counts. @default 1000 */
  constructor(count: () => Promise<number>, log: Logger, intervalMs = 1000) {
    this.#count = count;
    this.#log = log;
    this.#intervalMs = intervalMs;
  }

  /** A delivery round ended: counts again now, or when the interval since the last count ends. */
  stale(): void {
    if (this.#stopped) return;
    this.#stale = true;
    this.#next();
  }

  /** Resolves once a count begun after the last {@link stale} has ended (without waiting out the interval). */
  async settled(): Promise<void> {
    while (this.#stale || this.#running) {
      if (!this.#running) {
        clearTimeout(this.#cooling);
        this.#cooling = undefined;
        this.#next();
      }
      await this.#running;
    }
  }

  /** No more counts (a round ending later is not counted). */
  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#cooling);
    this.#cooling = undefined;
    this.#stale = false;
  }

  #next(): void {
    if (!this.#stale || this.#running || this.#cooling) return;
    this.#stale = false;
    this.#cooling = setTimeout(() => {
      this.#cooling = undefined;
      this.#next();
    }, this.#intervalMs);
    this.#cooling.unref();
    this.#running = this.#run().finally(() => {
      this.#running = undefined;
      this.#next();
    });
  }

  async #run(): Promise<void> {
    try {
      this.value = await this.#count();
    } catch (error) {
      // a failed count keeps the last one
      this.#log.debug({ err: error }, 'could not count unsent replies');
    }
  }
}
