/**
 * Where a process's resident memory is, by mapping (/proc/<pid>/smaps), for bench:soak's
 * "where it went" table: the growth over idle is mostly V8's pages, malloc and the pages of the
 * node binary that code run only under traffic touched, and each has its own levers.
 */
import { readFileSync } from 'node:fs';

export interface MapsMb {
  /** Anonymous mappings that are not malloc's: both isolates' V8 heaps and code, thread stacks. */
  readonly v8: number;
  /** glibc malloc: the main arena ([heap], brk) and the other arenas (64 MB-aligned heaps). */
  readonly malloc: number;
  /** File pages of the node executable (its code and read-only data). */
  readonly nodeBinary: number;
  /** Everything else: shared libraries, better-sqlite3's addon, the database's -shm, [stack]. */
  readonly other: number;
}

/** glibc's HEAP_MAX_SIZE on 64-bit: a non-main arena is a heap of this size, aligned to it. */
const ARENA_BYTES = 64 * 1024 * 1024;

interface Mapping {
  readonly start: number;
  readonly end: number;
  readonly perms: string;
  readonly path: string;
  rssKb: number;
}

function parse(text: string): Mapping[] {
  const maps: Mapping[] = [];
  for (const line of text.split('\n')) {
    const head = /^([0-9a-f]+)-([0-9a-f]+) (\S+) \S+ \S+ \S+\s*(.*)$/.exec(line);
    if (head) {
      maps.push({ start: parseInt(head[1]!, 16), end: parseInt(head[2]!, 16), perms: head[3]!, path: head[4]!, rssKb: 0 });
      continue;
    }
    const rss = /^Rss:\s+(\d+) kB/.exec(line);
    if (rss && maps.length > 0) maps.at(-1)!.rssKb = Number(rss[1]);
  }
  return maps;
}

/** Resident MB of `pid` by kind of mapping (see {@link MapsMb}); NaN for each if smaps cannot be read. */
export function readMapsMb(pid: number): MapsMb {
  let maps: Mapping[];
  try {
    maps = parse(readFileSync(`/proc/${pid}/smaps`, 'utf8'));
  } catch {
    return { v8: Number.NaN, malloc: Number.NaN, nodeBinary: Number.NaN, other: Number.NaN };
  }
  const kb = { v8: 0, malloc: 0, nodeBinary: 0, other: 0 };
  maps.forEach((map, i) => {
    const next = maps[i + 1];
    // An arena's heap: its used part (rw) at a 64 MB boundary, the rest of the 64 MB reserved (---p).
    const arena = map.start % ARENA_BYTES === 0 && map.perms.startsWith('rw') && (map.end - map.start === ARENA_BYTES || (next !== undefined && next.start === map.end && next.end - map.start === ARENA_BYTES && next.perms.startsWith('---')));
    if (map.path === '[heap]' || (map.path === '' && arena)) kb.malloc += map.rssKb;
    else if (map.path === '') kb.v8 += map.rssKb;
    else if (/\/node$/.test(map.path)) kb.nodeBinary += map.rssKb;
    else kb.other += map.rssKb;
  });
  return { v8: kb.v8 / 1024, malloc: kb.malloc / 1024, nodeBinary: kb.nodeBinary / 1024, other: kb.other / 1024 };
}
