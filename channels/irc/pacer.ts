/**
 * A token bucket for the lines (and other commands) the bot sends: at most `rate` per second
 * on average, with `burst` lines allowed at once after a quiet spell. IRC servers throttle or
 * kick a client that floods (ngircd processes about 3 commands a second per client and holds
 * back the rest); one bucket per channel instance paces every target together. Slots are
 * handed out in the order they were asked for.
 */

export interface Clock {
  now(): number;
  sleep(ms: number): Promise<void>;
}

export const realClock: Clock = {
  now: () => performance.now(),
  sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
};

interface Waiter {
  readonly resolve: () => void;
  readonly reject: (error: unknown) => void;
  readonly signal: AbortSignal | undefined;
  readonly onAbort: () => void;
}

export class Pacer {
  readonly rate: number;
  readonly burst: number;
  readonly #clock: Clock;
  #tokens: number;
  #last: number;
  readonly #queue: Waiter[] = [];
  #pumping = false;

  constructor(ratePerSecond: number, burst: number, clock: Clock = realClock) {
    if (!(ratePerSecond > 0)) throw new Error('the line rate must be positive');
    this.rate = ratePerSecond;
    this.burst = Math.max(1, burst);
    this.#clock = clock;
    this.#tokens = this.burst;
    this.#last = clock.now();
  }

  /** Lines that could go out right now without waiting. */
  available(): number {
    this.#refill();
    return Math.floor(this.#tokens);
  }

  /** Resolves when the caller may send one line; rejects if `signal` aborts first. */
  take(signal?: AbortSignal): Promise<void> {
    if (signal?.aborted) return Promise.reject(signal.reason);
    return new Promise<void>((resolve, reject) => {
      const waiter: Waiter = {
        resolve,
        reject,
        signal,
        onAbort: () => {
          const index = this.#queue.indexOf(waiter);
          if (index !== -1) this.#queue.splice(index, 1);
          reject(signal!.reason);
        },
      };
      signal?.addEventListener('abort', waiter.onAbort, { once: true });
      this.#queue.push(waiter);
      void this.#pump();
    });
  }

  #refill(): void {
    const now = this.#clock.now();
    this.#tokens = Math.min(this.burst, this.#tokens + ((now - this.#last) / 1000) * this.rate);
    this.#last = now;
  }

  async #pump(): Promise<void> {
    if (this.#pumping) return;
    this.#pumping = true;
    try {
      while (this.#queue.length > 0) {
        this.#refill();
        if (this.#tokens >= 1) {
          this.#tokens -= 1;
          const waiter = this.#queue.shift()!;
          waiter.signal?.removeEventListener('abort', waiter.onAbort);
          waiter.resolve();
          continue;
        }
        await this.#clock.sleep(Math.ceil(((1 - this.#tokens) / this.rate) * 1000));
      }
    } finally {
      this.#pumping = false;
    }
  }
}
