/**
 * Images referenced by workspace path (what history keeps), read and prepared for one
 * provider's limits. A small LRU keeps the prepared bytes, so the several model calls of one
 * tool loop — and the next few turns, which show the same recent images — decode each photo
 * once. A path that leaves the workspace (`..`, a symlink out) is refused like a missing file.
 */
import { readFile, realpath, stat } from 'node:fs/promises';
import { isAbsolute, relative, resolve } from 'node:path';
import type { ImageLimits, ImagePreparer, ImageResult } from './image.ts';
import { BoundedMap } from '../bounded-map.ts';

export type LoadedImage = ImageResult | { readonly ok: false; readonly gone: true };

export interface WorkspaceImages {
  /** The image at `path` (relative to the workspace), prepared for `limits`. Never throws. */
  load(path: string, limits: ImageLimits): Promise<LoadedImage>;
}

export interface WorkspaceImagesOptions {
  /** Absolute, real path of the workspace. */
  readonly workspace: string;
  readonly preparer: ImagePreparer;
  /** Prepared images kept (a phone photo prepared is ~0.2–1 MB). @default 8 */
  readonly cacheSize?: number;
  /** Files larger than this are not read. @default 64 MiB */
  readonly maxFileBytes?: number;
}

const GONE = { ok: false, gone: true } as const;

export function createWorkspaceImages(options: WorkspaceImagesOptions): WorkspaceImages {
  const cacheSize = options.cacheSize ?? 8;
  const maxFileBytes = options.maxFileBytes ?? 64 * 1024 * 1024;
  const cache = new BoundedMap<string, Promise<ImageResult>>(cacheSize);

  const inside = (path: string): boolean => {
    const rel = relative(options.workspace, path);
    return rel !== '' && !rel.startsWith('..') && !isAbsolute(rel);
  };

  return {
    async load(path, limits) {
      const full = resolve(options.workspace, path);
      if (!inside(full)) return GONE;
      let real: string;
      let size: number;
      let mtime: number;
      try {
        real = await realpath(full);
        if (!inside(real)) return GONE;
        const info = await stat(real);
        if (!info.isFile()) return GONE;
        size = info.size;
        mtime = info.mtimeMs;
      } catch {
        return GONE;
      }
      if (size > maxFileBytes) return { ok: false, reason: `the file is ${(size / 1024 / 1024).toFixed(1)} MB, over the ${Math.round(maxFileBytes / 1024 / 1024)} MB read for images` };
      const key = `${real}\0${size}\0${mtime}\0${limits.longEdge}\0${limits.maxBytes}`;
      let entry = cache.get(key);
      if (entry) {
        cache.setNewest(key, entry); // most recently used last
        return entry;
      }
      entry = readFile(real).then(
        (bytes) => options.preparer.prepare(bytes, limits),
        (error: unknown) => ({ ok: false as const, reason: `the file could not be read (${(error as NodeJS.ErrnoException).code ?? 'read error'})` }),
      );
      cache.set(key, entry);
      return entry;
    },
  };
}
