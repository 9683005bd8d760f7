/**
 * Full collections V8 would not run by itself soon enough, for a thread that knows it has
 * garbage: start-up's, a worker's, or the main thread's under traffic sooner than V8's own
 * (`oldSpaceGuard`). An isolate's old generation is first collected when it
 * reaches its initial limit (half the generation's maximum, up to 256 MB), and an isolate that
 * allocates little never gets there: the recall worker's old space grew 4.6 → 10.4 MB over
 * bench:soak's 50,000 messages without one full collection, until the memory reducer ran at
 * idle and found 4.4 MB live.
 */
import { PerformanceObserver } from 'node:perf_hooks';
import { getHeapSpaceStatistics, setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

/** V8's gc() (as --expose-gc gives it), with the options V8's gc extension takes. */
type Gc = (options: { type: 'major'; execution: 'sync'; flavor?: 'last-resort' }) => void;

/**
 * Node has no API for V8's collections: --expose-gc set at run time puts gc() in the next
 * context made (not in ours), and is unset at once so no later vm context (a tool's, say) sees
 * it. The function works in the thread that took it, for as long as it is kept.
 */
function takeGc(): Gc {
  setFlagsFromString('--expose-gc');
  try {
    return runInNewContext('gc') as Gc;
  } finally {
    setFlagsFromString('--no-expose-gc');
  }
}

/**
 * gc() taken when it is first called: a thread that never needs it makes no vm context (which the
 * function keeps alive for as long as it is kept).
 */
function gcOnFirstUse(): Gc {
  let gc: Gc | undefined;
  return (options) => (gc ??= takeGc())(options);
}

/**
 * V8's memory-reducing collection, what it runs on a low-memory notification: it also shrinks
 * the young generation, which grows back to its initial size as soon as work comes.
 */
export function collectAllAvailable(): void {
  takeGc()({ type: 'major', execution: 'sync', flavor: 'last-resort' });
}

function oldSpaceUsed(): number {
  return getHeapSpaceStatistics().find((space) => space.space_name === 'old_space')?.space_used_size ?? 0;
}

/**
 * For a thread that handles messages: collects now, then returns a function to call after each
 * message, which every `every` calls runs a full collection if the old space has grown more than
 * `slackBytes` since the last one. Costs a few ms per collection, in this thread only.
 */
export function oldSpaceKeeper(slackBytes: number, every: number): () => void {
  const gc = takeGc();
  gc({ type: 'major', execution: 'sync' });
  let settled = oldSpaceUsed();
  let calls = 0;
  return () => {
    if (++calls % every !== 0 || oldSpaceUsed() < settled + slackBytes) return;
    gc({ type: 'major', execution: 'sync' });
    settled = oldSpaceUsed();
  };
}

/**
 * For the main thread under traffic: after any collection (V8's scavenges are when objects are
 * promoted), a full collection of our own once the old space is `slackBytes` over what lived after
 * the last one. V8's own full collections under --optimize-for-size are memory-reducing, and after
 * one V8 lets the old generation grow at least 8 MB (plus the young generation's capacity) before
 * the next (V8 13.6 src/heap/heap.cc CurrentHeapGrowingMode: kMinimal when reducing memory;
 * src/heap/heap-controller.cc MinimumAllocationLimitGrowingStep: 2 MB only in kConservative, 8 MB
 * otherwise): that step is the daemon's RSS swing under traffic, whatever --heap-growing-percent
 * says while what survives is under 16 MB. Ours (no flags) start before V8's limit is reached.
 * The slack is `slackBytes` or `slackRatio` × what lived, the larger: a full collection costs in
 * proportion to what lives, so with a fixed slack a process with a larger heap (a cluster node,
 * with the PostgreSQL driver and pg-boss) paid more for each of as many collections — per message
 * on PostgreSQL (bench:cluster, model at 0 ms, medians of 3) 2.72 ms without the guard, 3.39 with
 * 3 MB, 2.79 with 3 MB or 0.4 × what lived; bench:soak's band −2.6 … +4.4 % with 3 MB, −2.8 …
 * +4.7 % with the larger of the two (one run each). The daemon's values are app/heap.ts's
 * `GUARD_SLACK_BYTES` and `GUARD_SLACK_RATIO`.
 * Nothing runs while idle: no collection, no observer entry. Returns a stop.
 */
export function oldSpaceGuard(slackBytes: number, slackRatio = 0): () => void {
  // started at ready: an idle daemon never collects, so it makes no context for gc()
  const gc = gcOnFirstUse();
  let settled = oldSpaceUsed();
  let stopped = false;
  const observer = new PerformanceObserver(() => {
    // Entries already queued may still be delivered after disconnect(): a stop is a stop.
    if (stopped) return;
    const used = oldSpaceUsed();
    // A collection of V8's (or anyone's) found less alive: measure from there.
    settled = Math.min(settled, used);
    if (used < settled + Math.max(slackBytes, settled * slackRatio)) return;
    // Its own entry comes later (entries are delivered after the collection), finding ~settled.
    gc({ type: 'major', execution: 'sync' });
    settled = oldSpaceUsed();
  });
  observer.observe({ entryTypes: ['gc'] });
  return () => {
    stopped = true;
    observer.disconnect();
  };
}
