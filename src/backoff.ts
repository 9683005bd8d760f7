/** Exponential backoff with jitter and an abortable sleep: shared by the supervisor, the outbox, the providers, MCP, transcription and channels. */
export interface BackoffOptions {
  /** First delay in ms. */
  readonly initialMs: number;
  /** Upper bound in ms. */
  readonly maxMs: number;
  /** Fraction of the delay randomised either way; 0.2 = ±20 %. @default 0.2 */
  readonly jitter?: number;
}

/**
 * Delay before retry number `attempt` (0-based): initial × 2^attempt, capped, with jitter.
 * `random` is injectable so tests are deterministic.
 */
export function backoffDelay(attempt: number, options: BackoffOptions, random: () => number = Math.random): number {
  const base = Math.min(options.maxMs, options.initialMs * 2 ** Math.min(attempt, 30));
  const jitter = options.jitter ?? 0.2;
  const factor = 1 + jitter * (random() * 2 - 1);
  return Math.max(0, Math.round(Math.min(options.maxMs, base * factor)));
}

/** Resolves after `ms`, or rejects with the signal's reason when it aborts first. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason as Error);
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal?.reason as Error);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
