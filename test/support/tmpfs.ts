/** A small tmpfs for disk-full tests: mounted on a temp dir, filled with a filler file, emptied, unmounted. */
import { execFileSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface Tmpfs {
  readonly dir: string;
  /** Writes a file until the disk is full; returns its path. */
  fill(name?: string): string;
  unmount(): void;
}

/**
 * Mounts a tmpfs of `size` (e.g. "2m") on a new temp dir. Returns the reason when this machine
 * does not allow it (not root, no mount in a container), found by trying.
 */
export function mountTmpfs(size: string): Tmpfs | { skip: string } {
  const dir = mkdtempSync(join(tmpdir(), 'sb-tmpfs-'));
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${size},mode=0700`, 'tmpfs', dir], { stdio: 'pipe' });
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    const detail = ((error as { stderr?: Buffer }).stderr?.toString().trim() || (error instanceof Error ? error.message : String(error))).split('\n')[0];
    return { skip: `mounting a tmpfs is not permitted here (needs root and mount rights): ${detail}` };
  }
  return {
    dir,
    fill(name = 'filler') {
      const file = join(dir, name);
      const fd = openSync(file, 'a');
      const chunk = Buffer.alloc(4096, 1);
      try {
        for (;;) writeSync(fd, chunk);
      } catch (error) {
        if ((error as { code?: string }).code !== 'ENOSPC') throw error;
      } finally {
        closeSync(fd);
      }
      // The last page may hold a partial chunk: fill that too, a byte at a time.
      const tail = openSync(file, 'a');
      try {
        for (;;) writeSync(tail, Buffer.alloc(1, 1));
      } catch (error) {
        if ((error as { code?: string }).code !== 'ENOSPC') throw error;
      } finally {
        closeSync(tail);
      }
      return file;
    },
    unmount() {
      try {
        execFileSync('umount', [dir], { stdio: 'pipe' });
      } catch {
        execFileSync('umount', ['-l', dir], { stdio: 'pipe' });
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
