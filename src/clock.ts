/**
 * The two clocks, kept apart on purpose. The wall clock (`now`) is what a person or another
 * machine means by a time: stored and shown timestamps, cron due times, expiry stamps that must
 * survive a restart. It jumps whenever the system time is set (NTP step, a Raspberry Pi booting
 * without an RTC, an operator's `date -s`), backwards as well as forwards. The monotonic clock
 * never jumps: every duration, timeout, watchdog, backoff and rate window is measured on it,
 * so a jump neither fires a watchdog early nor keeps a window open for an extra hour.
 *
 * Timers (`setTimeout`, `setInterval`) already run on monotonic time in Node; only readings of
 * "now" need the choice made here.
 */
export interface Clock {
  /** Wall time, ms since the epoch. Jumps with the system clock: use it for meanings, not durations. */
  now(): number;
  /** Monotonic ms from an arbitrary origin (this process). Never jumps: use it for durations and deadlines. */
  monotonic(): number;
}

/** The process's real clocks: `Date.now()` and `performance.now()`. */
export const systemClock: Clock = {
  now: () => Date.now(),
  monotonic: () => performance.now(),
};

/**
 * Whether something stamped with wall time `stampedAt` (persisted, so it outlives restarts) is
 * older than `ttlMs`, in a way no clock step stretches: it is older on the wall clock (a step
 * forward ages it early); or its stamp lies more than `ttlMs` in the future (the clock was stepped
 * back past it and its real age is unknown); or `ttlMs` has passed on the monotonic clock since
 * this process first saw it (`firstSeen`, a `monotonic()` reading), whatever the wall clock says.
 */
export function outlived(stampedAt: number, ttlMs: number, clock: Clock, firstSeen: number): boolean {
  const age = clock.now() - stampedAt;
  return age > ttlMs || age < -ttlMs || clock.monotonic() - firstSeen > ttlMs;
}
