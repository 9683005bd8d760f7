/**
 * A turn's reads and writes meeting a failing store — a full disk, a lock, an I/O error, a lost
 * connection — are tried again rather than failing the turn: a full disk once the probe finds
 * room, a passing failure after a backoff. The model's answer is kept in memory meanwhile, so it
 * is neither lost nor asked for twice. When the runtime stops first nothing was recorded, and the
 * message runs again at the next start (answered once).
 */
import type { Logger } from 'pino';
import { DiskFullError, transientStoreError, type StorageHealth } from '../store/storage.ts';
import { backoffDelay, sleep } from '../backoff.ts';

/** A turn's write failed on a passing store failure and the runtime stopped before it went through. */
export class StoreStoppedError extends Error {
  constructor(what: string, cause: unknown) {
    super(`could not ${what} before shutdown: the store kept failing`, { cause });
    this.name = 'StoreStoppedError';
  }
}

/** Whether `error` ended a write because the runtime stopped while the store failed. */
export const stoppedOnStore = (error: unknown): error is DiskFullError | StoreStoppedError => error instanceof DiskFullError || error instanceof StoreStoppedError;

export interface StoreRetryOptions {
  readonly storage: StorageHealth;
  readonly log: Logger;
  /** Aborted when the shutdown grace runs out: no more waiting. */
  readonly signal: AbortSignal;
  /** Whether the runtime is stopping (no new try then). */
  stopping(): boolean;
}

export class StoreRetry {
  readonly #options: StoreRetryOptions;

  constructor(options: StoreRetryOptions) {
    this.#options = options;
  }

  /** Whether `error` is a passing store failure; logs it (with `what`) when given one. */
  passing(error: unknown, what?: string, attempt = 0): string | undefined {
    const code = transientStoreError(error);
    if (code !== undefined && what !== undefined) {
      const fields = { code, what, attempt: attempt + 1, err: error };
      if (attempt < 3) this.#options.log.warn(fields, `could not ${what}: the store failed (${code}); trying again`);
      else this.#options.log.error(fields, `could not ${what}: the store keeps failing (${code}); trying again. Check the database (switchboard doctor)`);
    }
    return code;
  }

  /**
   * Runs one of the turn's transactions, trying again while the store fails. Throws
   * DiskFullError or StoreStoppedError when the runtime stops first.
   */
  commit<T>(what: string, work: () => Promise<T>): Promise<T> {
    return this.untilStopped(what, work, (outcome, error) => {
      throw outcome === 'stopped' ? new StoreStoppedError(what, error) : outcome;
    });
  }

  /**
   * Runs `work`, trying again while the store fails; when the runtime stops first, returns what
   * `stopped` makes of it. An error that is no store failure (a bug) is thrown.
   */
  async untilStopped<T>(what: string, work: () => Promise<T>, stopped: (outcome: 'stopped' | DiskFullError, error: unknown) => T): Promise<T> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await work();
      } catch (error) {
        const outcome = await this.#afterFailure(error, what, attempt);
        if (outcome === 'retry') continue;
        if (outcome === 'other') throw error;
        return stopped(outcome, error);
      }
    }
  }

  /**
   * After a failed read or write: 'retry' once the store may take writes again; a DiskFullError
   * or 'stopped' when the runtime stops first; 'other' when `error` is no store failure.
   */
  async #afterFailure(error: unknown, what: string, attempt: number): Promise<'retry' | 'other' | 'stopped' | DiskFullError> {
    const { storage, signal } = this.#options;
    const full = storage.failed(error, what);
    if (!full && this.passing(error, what, attempt) === undefined) return 'other';
    const stopped = full ?? 'stopped';
    if (signal.aborted || this.#options.stopping()) return stopped;
    try {
      if (full) await storage.writable(signal);
      else await sleep(backoffDelay(attempt, { initialMs: 100, maxMs: 10_000 }), signal);
    } catch {
      return stopped;
    }
    return this.#options.stopping() ? stopped : 'retry';
  }
}
