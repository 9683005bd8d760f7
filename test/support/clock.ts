/** A Clock whose wall time can be set to jump while its monotonic time runs on, as a real clock step does. */
import type { MockTracker } from 'node:test';
import type { Clock } from '../../src/clock.ts';

export interface JumpingClock extends Clock {
  /** Moves the wall clock by `ms` (negative = backwards); the monotonic clock does not move. */
  jump(ms: number): void;
  /** Lets `ms` pass on both clocks (for clocks that do not follow real time). */
  advance(ms: number): void;
}

/**
 * With `realTime` (the default) both clocks follow the process's own, the wall one offset by the
 * jumps so far; without it both stand still until `advance`. With `mock` (a test's `t.mock`),
 * `Date.now()` follows the wall clock too for the rest of the test, so code that reads the system
 * wall clock directly instead of the injected one sees the jump as well (and fails the test).
 */
export function jumpingClock(options: { readonly realTime?: boolean; readonly start?: number; readonly mock?: MockTracker } = {}): JumpingClock {
  const realTime = options.realTime ?? true;
  const wallBase = options.start ?? Date.now();
  const monoBase = performance.now();
  let offset = 0;
  let elapsed = 0;
  const passed = (): number => (realTime ? performance.now() - monoBase : 0) + elapsed;
  const clock: JumpingClock = {
    now: () => wallBase + passed() + offset,
    monotonic: () => monoBase + passed(),
    jump: (ms) => void (offset += ms),
    advance: (ms) => void (elapsed += ms),
  };
  options.mock?.method(Date, 'now', () => Math.round(clock.now()));
  return clock;
}

export const HOUR_MS = 3_600_000;
export const DAY_MS = 86_400_000;
