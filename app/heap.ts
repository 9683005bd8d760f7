/**
 * How much of the V8 heap the daemon keeps around. V8 sizes its heap for throughput on the
 * machine it finds: on a host with a few GB of RAM a busy daemon's main-thread heap grew to
 * ~210 MB while ~25 MB of it was live (young generation up to 64 MB, the old generation
 * collected only when it reached its initial limit), and the same again in each worker — RSS
 * went from 80 to 340 MB in 5,000 messages and stayed there when idle.
 *
 * `compact` (the default) sets two V8 flags that V8 reads at every collection, so they work
 * when set at run time (unlike --max-old-space-size, which only the command line can set):
 * the young generation keeps its initial size instead of doubling, and the old generation's
 * limit is set to 1.5 × what survived the last full collection (at least + 8 MB: below). Measured: the main heap stays
 * near 35 MB and RSS near 150 MB under the same load, for some more CPU per message.
 * It also sets --optimize-for-size, V8's low-memory mode (read at each collection too): every
 * full collection is then a memory-reducing one (`--trace-gc` prints each as "Mark-Compact
 * (reduce)"), so under traffic the main heap stops at ~25 MB committed instead of ~30
 * (bench:soak, 15,000 messages: V8's pages at the highest RSS −7 MB, the daemon's CPU per
 * message unchanged). Set at run time it changes only that and a few run-time
 * checks; on the command line V8 also sized the heap for it at start, and msg/s fell 13 %
 * (docs/benchmarks.md). In that mode --heap-growing-percent no longer decides
 * anything while what survives is small: with 25 instead of 50, bench:soak ran the same number of
 * full collections (442 against 437 in 50,000 messages) with the same swing of the main old
 * space, ~9 MB after each to ~17 MB before the next. V8's source says why (V8 13.6, Node 24):
 * every full collection V8 starts itself is then memory-reducing (heap.h
 * GCFlagsForIncrementalMarking), a reducing collection sizes the next limit in the "minimal"
 * growing mode (heap.cc CurrentHeapGrowingMode), and in any mode but "conservative" the limit is
 * at least 8 MB over what survived, plus the young generation's capacity
 * (heap-controller.cc MinimumAllocationLimitGrowingStep, BoundAllocationLimit): 1.5 × what
 * survived is more only past 16 MB. `--trace-gc-verbose` prints it: "old size: 7055 KB, new
 * limit: 16271 KB". No flag changes that step (a young generation 4 × larger, which promoted
 * less, --incremental-marking-hard-trigger=80 and --no-concurrent-marking were measured too);
 * a collection with no flags (gc()) is sized "conservative", 2 MB.
 * So under traffic the daemon collects the main old space itself once it is 2 MB (or 0.2 × what
 * lived, if more) over what lived after the last full collection ({@link settleHeap}'s
 * `oldSpaceGuard`, src/full-gc.ts), before V8's 8 MB step is reached. With a fixed 3 MB a
 * cluster node, whose heap holds more, paid ~0.65 ms per message on PostgreSQL for it. With
 * 3 MB or 0.4 × (the eighth pass) bench:soak's daemon (~9 MB live) had ~3.7 MB of slack: in
 * three alternated pairs its band's span was 6.6–7.0 % with that and 4.8–5.6 % with 2 MB or
 * 0.2 ×, for ~0.1–0.25 ms more per message on PostgreSQL (docs/benchmarks.md, ninth pass).
 * Measured (bench:soak, 50,000 messages, four interleaved runs each; docs/benchmarks.md, sixth
 * pass): RSS band after 5,000 at its widest −6.4 … +7.8 % before, −3.9 … +4.8 % after; highest
 * over idle median +47.6 → +44.1 MB. The price: atomic collections of ~9–11 ms on the main
 * thread, ~2.4 × as many as V8's concurrent ones, +0.1–0.2 ms of it per message, the event
 * loop's lag p99 ~8 → ~13 ms under that load, bench:webhook's msg/s −3 % in the medians of six
 * runs and up to −12 % in a pair of single runs.
 * The flags are the process's, so the recall worker's isolate runs with them too; V8 still never
 * collected its old generation under traffic, so the worker collects it itself
 * (`oldSpaceKeeper` in src/full-gc.ts).
 * `v8` leaves V8's own sizing (and whatever NODE_OPTIONS sets).
 *
 * `compact` also settles the heap once, a few seconds after `ready` ({@link settleHeap}):
 * start-up allocates far more than an idle daemon keeps (config, schemas, ~250 modules'
 * top-level code), and V8 keeps the young generation it grew for that and the old pages
 * it filled until a collection it has no reason to run while idle. One "last resort" full
 * collection (what V8 runs on a low-memory notification: it also shrinks the young
 * generation, which grows back to its initial size as soon as work comes) took ~20 ms and
 * measured, 10 s after ready with the terminal channel: private memory 26.3 → 18.6 MB, RSS
 * 76.7 → 69.5 MB.
 */
import { setFlagsFromString } from 'node:v8';
import { collectAllAvailable, oldSpaceGuard } from '../src/full-gc.ts';

export type HeapMode = 'compact' | 'v8';

/** The V8 flags `compact` sets. */
export const compactHeapFlags = ['--semi-space-growth-factor=1', '--heap-growing-percent=50', '--optimize-for-size'] as const;

/** Applies `mode` to this process (and the worker threads it starts later). */
export function tuneHeap(mode: HeapMode): void {
  if (mode === 'v8') return;
  for (const flag of compactHeapFlags) setFlagsFromString(flag);
}

/** How long after `ready` the heap is settled: past the first polls and connections. */
export const SETTLE_AFTER_MS = 3_000;

/**
 * How far the main old space may grow over what lived after the last full collection before the
 * daemon collects it itself (module comment). More slack: fewer collections, a wider RSS band.
 */
export const GUARD_SLACK_BYTES = 2 * 1024 * 1024;

/** …or this share of what lived, when that is more (a larger heap costs more to collect: src/full-gc.ts). */
export const GUARD_SLACK_RATIO = 0.2;

/**
 * Once, `afterMs` from now (unref'd: it never keeps the process up), a full collection that
 * gives back what start-up left; and from now on, the main old space's guard against V8's 8 MB
 * step (module comment). Nothing for `v8`. Returns a cancel (of both). `collect` is the settle's
 * collection (tests count it: V8's last-resort collection is not flagged forced, and the
 * compact flags shrink the young generation at any scavenge, so neither tells it apart).
 */
export function settleHeap(mode: HeapMode, afterMs = SETTLE_AFTER_MS, collect: () => void = collectAllAvailable): () => void {
  if (mode === 'v8') return () => undefined;
  const stopGuard = oldSpaceGuard(GUARD_SLACK_BYTES, GUARD_SLACK_RATIO);
  const timer = setTimeout(collect, afterMs);
  timer.unref();
  return () => {
    clearTimeout(timer);
    stopGuard();
  };
}

