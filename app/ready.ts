/**
 * The `ready` log line, which says the daemon is up. Once every channel runs it is logged at
 * info. A channel that keeps failing must not hide it: once every channel has either come up
 * or failed its first attempt (or {@link SETTLE_MS} passed), `ready` is logged at warn with
 * the channels that are not running (`notRunning`: name, state, last error) — they keep
 * retrying — and `all channels running` follows when they are.
 */
import type { Logger } from 'pino';
import type { ChannelHealth } from '../src/runtime/supervisor.ts';

/** The longest a slow first connection (a DNS or TLS timeout) holds back the `ready` line. */
export const SETTLE_MS = 15_000;

export interface ReadyOptions {
  /** The runtime's first-ready promise and its health. */
  readonly runtime: { readonly ready: Promise<void>; health(): { readonly channels: readonly ChannelHealth[] } };
  readonly log: Logger;
  /** What the line carries besides `notRunning` (channels, provider, config…); called when it is logged. */
  readonly fields: () => Record<string, unknown>;
  /** Called once, right after `ready` is logged (at info or warn): the work that can follow it. */
  readonly onReady?: () => void;
  /** Stops waiting without logging (shutdown during start). */
  readonly signal: AbortSignal;
  /** @default SETTLE_MS */
  readonly settleMs?: number;
  /** How often the channels are looked at meanwhile. @default 100 */
  readonly pollMs?: number;
}

/** Logs `ready` once (see the module comment). */
export function announceReady(options: ReadyOptions): void {
  const { runtime, log, signal } = options;
  const deadline = performance.now() + (options.settleMs ?? SETTLE_MS); // monotonic
  let announced = false;
  const announce = (): void => {
    if (announced || signal.aborted) return;
    announced = true;
    clearInterval(timer);
    const notRunning = runtime
      .health()
      .channels.filter((channel) => channel.state !== 'running')
      .map((channel) => ({ name: channel.name, state: channel.state, ...(channel.lastError === undefined ? {} : { lastError: channel.lastError }) }));
    if (notRunning.length === 0) {
      log.info(options.fields(), 'ready');
    } else {
      log.warn({ ...options.fields(), notRunning }, 'ready');
      void runtime.ready.then(() => signal.aborted || log.info('all channels running'));
    }
    options.onReady?.();
  };
  const timer = setInterval(() => {
    const settled = runtime.health().channels.every((channel) => channel.state === 'running' || channel.lastError !== undefined);
    if (settled || performance.now() >= deadline) announce();
  }, options.pollMs ?? 100);
  timer.unref();
  signal.addEventListener('abort', () => clearInterval(timer), { once: true });
  void runtime.ready.then(announce);
}
