/** Waiting on work that cannot itself be cancelled. */

/**
 * Settles like `promise`, or rejects with the signal's reason as soon as it aborts — for work
 * that ignores cancellation (a DNS lookup, a tool that does not watch its signal), so the
 * caller stops waiting even though the work may go on.
 */
export function untilAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}

/** Waits `ms`; resolves false (at once) when `signal` aborts first, true otherwise. Never rejects. */
export function pause(ms: number, signal: AbortSignal): Promise<boolean> {
  if (signal.aborted) return Promise.resolve(false);
  return new Promise((resolve) => {
    const done = (value: boolean): void => {
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
      resolve(value);
    };
    const onAbort = (): void => done(false);
    const timer = setTimeout(() => done(true), ms);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

/** A signal with a time limit, whose timer and listener go away as soon as the work is done. */
export interface Deadline {
  /** Aborts when the parent does (with its reason) or after `ms` (a `TimeoutError`, as `AbortSignal.timeout` gives). */
  readonly signal: AbortSignal;
  /** Clears the timer and unhooks from the parent; the signal stays as it is. */
  dispose(): void;
}

/**
 * `AbortSignal.any([parent, AbortSignal.timeout(ms)])` without what that keeps alive:
 * `AbortSignal.timeout` holds its timer and signals until the time runs out, so a daemon
 * answering 200 messages/s with a 300 s turn limit would hold 60,000 of them; a long-lived
 * parent also keeps a reference to each dependent signal. `dispose()` frees both
 * the moment the work ends. The timer is unref'd: a deadline never keeps a process alive.
 */
export function deadline(parent: AbortSignal | undefined, ms: number): Deadline {
  const controller = new AbortController();
  const onAbort = (): void => {
    dispose();
    controller.abort(parent?.reason);
  };
  const timer = setTimeout(() => {
    dispose();
    controller.abort(new DOMException(`The operation timed out after ${ms} ms.`, 'TimeoutError'));
  }, ms);
  timer.unref();
  const dispose = (): void => {
    clearTimeout(timer);
    parent?.removeEventListener('abort', onAbort);
  };
  if (parent?.aborted) onAbort();
  else parent?.addEventListener('abort', onAbort, { once: true });
  return { signal: controller.signal, dispose };
}
