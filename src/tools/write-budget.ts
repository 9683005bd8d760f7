/**
 * The bytes one shell command may write, summed over every file. RLIMIT_FSIZE (set per
 * process in pipeline.ts) stops any single file at the limit the moment it is crossed, but a
 * command that writes many files (an archive bomb, a copy of a copy) stays under it file by
 * file; this watches the free space of the workspace's filesystem while the command runs and
 * stops it once that shrank by more than the limit. Free space is one statfs call, whatever
 * the size of the workspace. It counts every writer on that filesystem, so other processes'
 * writes count against the command too: the limit is meant to be far above what a command
 * normally writes (256 MB by default), where that noise does not matter.
 */
import { statfs } from 'node:fs/promises';

/** Bytes available to us on the filesystem holding `dir`. */
export type MeasureFree = (dir: string) => Promise<number>;

export const freeBytes: MeasureFree = async (dir) => {
  const stats = await statfs(dir);
  return stats.bavail * stats.bsize;
};

export interface WriteWatch {
  /** The most the free space shrank while watched, in bytes. */
  readonly written: () => number;
  /** Measures once more (so a command that ended between two looks is counted) and stops watching. */
  stop(): Promise<number>;
}

/**
 * Starts watching `dir`'s filesystem; calls `over` once when it has shrunk by more than
 * `maxBytes` since the start.
 *
 * @example
 * const watch = await watchWrites(root, policy.maxWriteBytes, () => halt('writes'));
 * … run the command …
 * const written = await watch.stop();
 */
export async function watchWrites(dir: string, maxBytes: number, over: () => void, options: { readonly intervalMs?: number; readonly measure?: MeasureFree } = {}): Promise<WriteWatch> {
  const measure = options.measure ?? freeBytes;
  const start = await measure(dir);
  let most = 0;
  let fired = false;
  let pending: Promise<void> = Promise.resolve();
  const look = (): Promise<void> =>
    (pending = pending.then(async () => {
      const free = await measure(dir).catch(() => start);
      most = Math.max(most, start - free);
      if (most > maxBytes && !fired) {
        fired = true;
        over();
      }
    }));
  const timer = setInterval(() => void look(), options.intervalMs ?? 100);
  timer.unref();
  return {
    written: () => most,
    async stop() {
      clearInterval(timer);
      await look();
      return most;
    },
  };
}
