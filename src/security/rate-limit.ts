/**
 * Per-key sliding-window rate limit (a key is usually a sender): at most `limit` takes in any
 * `windowMs`. Exact (one timestamp per take inside the window), and bounded in memory: keys
 * whose window has passed are dropped, and past `maxKeys` the least recently used 1 % go (at
 * least one; in a batch, because finding a Map's oldest key costs more the more were deleted
 * before it — one at a time, every take at the bound would cost a scan).
 */

export interface RateLimiterOptions {
  /** Takes allowed per key in any window; a positive integer. */
  readonly limit: number;
  /** Window length in milliseconds; positive. */
  readonly windowMs: number;
  /** Keys remembered at once; the least recently used is evicted beyond it. @default 10_000 */
  readonly maxKeys?: number;
  /** Clock in milliseconds; monotonic, so a wall clock step neither holds a window shut nor opens it early. @default performance.now */
  readonly now?: () => number;
}

export type RateLimitDecision = { readonly ok: true } | { readonly ok: false; readonly retryAfterMs: number };

export interface RateLimiter {
  /** Counts one event for `key` if the window has room; otherwise says when it will. */
  take(key: string): RateLimitDecision;
  /** Keys currently remembered (for tests and health). */
  size(): number;
}

/** @example const limiter = createRateLimiter({ limit: 20, windowMs: 60_000 }); limiter.take(senderId) */
export function createRateLimiter(options: RateLimiterOptions): RateLimiter {
  const { limit, windowMs, maxKeys = 10_000, now = () => performance.now() } = options;
  if (!Number.isInteger(limit) || limit < 1) throw new TypeError(`rate limit: limit must be a positive integer, got ${String(limit)}`);
  if (!Number.isFinite(windowMs) || windowMs <= 0) throw new TypeError(`rate limit: windowMs must be a positive number, got ${String(windowMs)}`);
  if (!Number.isInteger(maxKeys) || maxKeys < 1) throw new TypeError(`rate limit: maxKeys must be a positive integer, got ${String(maxKeys)}`);

  // Insertion order doubles as recency: a key is re-inserted on every take.
  const windows = new Map<string, number[]>();
  let lastSweep = now();

  /** Drops every key whose newest take has left the window; at most once per window. */
  const sweep = (t: number): void => {
    if (t - lastSweep < windowMs) return;
    lastSweep = t;
    for (const [key, times] of windows) if (times.at(-1)! <= t - windowMs) windows.delete(key);
  };

  return {
    take(key) {
      const t = now();
      sweep(t);
      const times = windows.get(key) ?? [];
      windows.delete(key);
      let expired = 0;
      while (expired < times.length && times[expired]! <= t - windowMs) expired++;
      if (expired > 0) times.splice(0, expired);
      if (times.length >= limit) {
        windows.set(key, times);
        return { ok: false, retryAfterMs: Math.max(1, times[0]! + windowMs - t) };
      }
      times.push(t);
      windows.set(key, times);
      if (windows.size > maxKeys) {
        let evict = Math.max(1, Math.floor(maxKeys / 100));
        for (const oldest of windows.keys()) {
          if (evict-- === 0) break;
          windows.delete(oldest);
        }
      }
      return { ok: true };
    },
    size: () => windows.size,
  };
}
