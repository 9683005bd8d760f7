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
 * `v8` leaves V8's own sizing (and whatever NODE_OPTIONS sets).
 */
import { setFlagsFromString } from 'node:v8';

export type HeapMode = 'compact' | 'v8';

/** The V8 flags `compact` sets. */
export const compactHeapFlags = ['--semi-space-growth-factor=1', '--heap-growing-percent=50'] as const;

/** Applies `mode` to this process (and the worker threads it starts later). */
export function tuneHeap(mode: HeapMode): void {
  if (mode === 'v8') return;
  for (const flag of compactHeapFlags) setFlagsFromString(flag);
}
