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
 * limit is set to 1.5 × what survived the last full collection. Measured: the main heap stays
 * near 35 MB and RSS near 150 MB under the same load, for some more CPU per message.
 * It also sets --optimize-for-size, V8's low-memory mode (read at each collection too): the
 * old generation's limit becomes what survived × 1.5, or + 2 MB if that is more (not + 8 MB),
 * so under traffic the main heap stops at ~25 MB committed instead of ~30 (bench:soak, 15,000
 * messages: V8's pages at the highest RSS −7 MB, the daemon's CPU per message unchanged).
 * Set at run time it changes only that and a few run-time checks; on the command line V8 also
 * sized the heap for it at start, and msg/s fell 13 % (docs/benchmarks.md).
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
import { runInNewContext } from 'node:vm';

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

/** V8's gc() (as --expose-gc gives it), with the options V8's gc extension takes. */
type Gc = (options: { type: 'major'; execution: 'sync'; flavor: 'last-resort' }) => void;

/**
 * Once, `afterMs` from now (unref'd: it never keeps the process up), a full collection that
 * gives back what start-up left (module comment). Nothing for `v8`. Returns a cancel.
 */
export function settleHeap(mode: HeapMode, afterMs = SETTLE_AFTER_MS): () => void {
  if (mode === 'v8') return () => undefined;
  const timer = setTimeout(() => collectAllAvailable(), afterMs);
  timer.unref();
  return () => clearTimeout(timer);
}

/**
 * Node has no API for V8's memory-reducing collection: --expose-gc set at run time puts gc()
 * in the next context made (not in ours), and is unset at once so no later vm context
 * (a tool's, say) sees it.
 */
function collectAllAvailable(): void {
  setFlagsFromString('--expose-gc');
  let gc: Gc;
  try {
    gc = runInNewContext('gc') as Gc;
  } finally {
    setFlagsFromString('--no-expose-gc');
  }
  gc({ type: 'major', execution: 'sync', flavor: 'last-resort' });
}
