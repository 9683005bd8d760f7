/**
 * What channel-state.ts knows of a prefix's entries without counting them again: their number,
 * bytes and oldest creation time as of the last full count, carried forward by this instance's
 * own writes. A channel prunes at each write (the webhook's results: up to 10,000 entries), and
 * counting them each time, then finding the cut past the newest 10,000, cost 4.2 ms per webhook
 * request once 10,000 were kept (0.18 ms with these figures), so prune() decides from them when
 * they are sure and counts only when they are not.
 *
 * The figures stay safe to decide from: `entries` exact, `bytes` never below the truth, `oldest`
 * never above it. Another writer of the same channel (a second node, or a second instance over
 * the same database) is noticed when one of this instance's inserts gets a `seq` that is not
 * the next one: everything known is then forgotten and the next prune counts again. (Another
 * node's update in place between two of ours goes unseen until that next insert; pruning is then
 * one write late, as it is when that node's own write raced ours.)
 */
import type { PruneLimits } from '../channel-state.ts';

export interface PrefixTotals {
  /** Entries of the prefix: exact (counted, then followed insert by insert and delete by delete). */
  entries: number;
  /** UTF-8 bytes of their values, never fewer than the truth (an update adds its new size). */
  bytes: number;
  /** Earliest created_at, never later than the truth. */
  oldest: number;
}

/** Which limits the known figures might break. */
export interface Over {
  readonly age: boolean;
  readonly count: boolean;
  readonly bytes: boolean;
}

/** Most prefixes remembered (channels use a few fixed ones). */
const MAX_PREFIXES = 16;

export class ChannelStateTotals {
  readonly #byPrefix = new Map<string, PrefixTotals>();
  /** The channel's highest seq after this instance's last insert or count; undefined when unknown. */
  #lastSeq: number | undefined;

  get(prefix: string): PrefixTotals | undefined {
    return this.#byPrefix.get(prefix);
  }

  /** After a full count (in the transaction that made it) that deleted nothing. */
  counted(prefix: string, totals: { entries: number; bytes: number; oldest: number }, lastSeq: number): void {
    if (this.#lastSeq !== lastSeq) this.#byPrefix.clear(); // others wrote since: what else we knew is stale
    if (this.#byPrefix.size >= MAX_PREFIXES && !this.#byPrefix.has(prefix)) this.#byPrefix.clear();
    this.#byPrefix.set(prefix, { ...totals });
    this.#lastSeq = lastSeq;
  }

  /** After a put of `key` (`bytes` long, created at `at` if new) came back with `seq`. */
  put(key: string, bytes: number, at: number, seq: number, renew: boolean): void {
    if (this.#lastSeq === undefined) return this.forget();
    if (seq === this.#lastSeq + 1 && !renew) {
      // A new entry, and nobody inserted since our last count or insert.
      this.#lastSeq = seq;
      for (const [prefix, totals] of this.#byPrefix) {
        if (!key.startsWith(prefix)) continue;
        totals.entries++;
        totals.bytes += bytes;
        totals.oldest = Math.min(totals.oldest, at);
      }
      return;
    }
    if (seq <= this.#lastSeq && !renew) {
      // An update in place: same count, size at most the new value's more.
      for (const [prefix, totals] of this.#byPrefix) if (key.startsWith(prefix)) totals.bytes += bytes;
      return;
    }
    this.forget(); // a renewed entry moved, or someone else inserted meanwhile
  }

  /** After `deleted` entries of `prefix` (of `bytes` in all) went by the known figures. */
  removed(prefix: string, deleted: number, bytes: number): void {
    const totals = this.#byPrefix.get(prefix);
    if (!totals) return;
    totals.entries -= deleted;
    totals.bytes -= bytes;
    // Other prefixes cached over the same keys ('' and 'r:') no longer know their count.
    for (const [other] of this.#byPrefix) if (other !== prefix) this.#byPrefix.delete(other);
  }

  /** Anything this instance cannot follow (deletes by key, a transaction of writes, a failure): count again. */
  forget(): void {
    this.#byPrefix.clear();
    this.#lastSeq = undefined;
  }
}

/** The limits the figures might break (all false: surely within them). */
export function overLimits(totals: { entries: number; bytes: number; oldest: number | null }, limits: PruneLimits): Over {
  return {
    age: limits.createdBefore !== undefined && (totals.oldest ?? Infinity) < limits.createdBefore,
    count: limits.keep !== undefined && totals.entries > limits.keep,
    bytes: limits.maxBytes !== undefined && totals.bytes > limits.maxBytes,
  };
}
