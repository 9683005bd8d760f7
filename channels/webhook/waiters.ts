/**
 * Requests waiting for the reply to their message id. Several may wait for one id (the first
 * request and a replay of it); each is answered at most once — by the reply, by its timeout,
 * by its client going away, or by the channel stopping.
 */
import { BoundedSet } from '../../src/bounded-map.ts';

/** One wait: `reply` resolves with the text, or undefined when it ended without one. */
export interface Wait {
  readonly reply: Promise<string | undefined>;
  /** Stops waiting (the client went away): the reply will not count as delivered here. */
  cancel(): void;
}

export class Waiters {
  readonly #waiting = new Map<string, Set<(reply: string | undefined) => void>>();
  /** Ids answered 202 with a callback_url: the callback is owed even if a replay gets the reply. */
  readonly #owed = new BoundedSet<string>(10_000);

  /** Notes that a request for `id` was told its reply will come to its callback_url. */
  owe(id: string): void {
    // Replies the runtime never sends (an ignored sender) would leave ids here: bounded.
    this.#owed.add(id);
  }

  /** True (once) when the callback for `id` is owed. */
  takeOwed(id: string): boolean {
    return this.#owed.delete(id);
  }

  /** Waits up to `timeoutMs` for the reply to `id`. */
  wait(id: string, timeoutMs: number): Wait {
    let settle!: (reply: string | undefined) => void;
    const reply = new Promise<string | undefined>((resolve) => {
      const timer = setTimeout(() => settle(undefined), timeoutMs);
      settle = (value) => {
        clearTimeout(timer);
        const set = this.#waiting.get(id);
        if (!set?.delete(settle)) return; // already answered
        if (set.size === 0) this.#waiting.delete(id);
        resolve(value);
      };
    });
    const set = this.#waiting.get(id) ?? new Set();
    set.add(settle);
    this.#waiting.set(id, set);
    return { reply, cancel: () => settle(undefined) };
  }

  /** Answers everyone waiting for `id`; returns how many took the reply. */
  deliver(id: string, reply: string): number {
    const set = this.#waiting.get(id);
    if (!set) return 0;
    const all = [...set];
    for (const settle of all) settle(reply);
    return all.length;
  }

  /** Ends every wait without a reply (the channel is stopping). */
  releaseAll(): void {
    for (const set of [...this.#waiting.values()]) for (const settle of [...set]) settle(undefined);
  }

  get size(): number {
    let n = 0;
    for (const set of this.#waiting.values()) n += set.size;
    return n;
  }
}
