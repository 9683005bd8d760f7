/** Bounded waiting for tests: poll a condition, or let a moment pass to see that nothing happens. */

/** Resolves once `condition()` holds; rejects after `timeoutMs` naming `what` (plus `context()`, e.g. a log tail). */
export async function until(condition: () => boolean | Promise<boolean>, what: string, timeoutMs = 15_000, context: () => string = () => ''): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${context()}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** Waits a little, to be sure nothing more arrives. */
export const quiet = (ms = 600): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
