/**
 * A damaged database file — truncated, garbage in a page, not a database at all — is found
 * when it is opened, and explained in one paragraph naming the file, what is wrong and the way
 * back (restore a backup), instead of a stack trace from deep inside a query. Switchboard does
 * not run on it: the inbox and outbox are in it, and guessing at them could lose a message or
 * answer one twice.
 *
 * What is checked, and what it costs:
 * * every open: the 100-byte header (magic, page size) and, after a clean stop (no -wal left),
 *   that the file is as long as its header says — microseconds;
 * * `PRAGMA quick_check` (every page of every b-tree is read) when it is affordable: the file is
 *   at most {@link QUICK_CHECK_MAX_BYTES}, or the last run did not stop cleanly (a -wal file was
 *   left behind: a crash or power loss, when a torn write is likeliest). Measured on a 65 MB
 *   database: ~80–95 ms from the page cache, ~0.5–0.9 s from a cold virtio disk (more on an SD
 *   card), too much for every start of a big database;
 * * SQLite's own SQLITE_CORRUPT / SQLITE_NOTADB from opening or migrating.
 * `switchboard backup` runs quick_check on every copy it makes.
 */
import { closeSync, openSync, readSync, statSync } from 'node:fs';
import type Database from 'better-sqlite3';

/**
 * Exit code when the database is damaged (EX_DATAERR from sysexits.h: the input data was
 * incorrect). Restarting does not help: the systemd unit does not retry it.
 */
export const EXIT_DATAERR = 65;

/** Largest database checked with `PRAGMA quick_check` at every start (after a clean stop). */
export const QUICK_CHECK_MAX_BYTES = 32 * 1024 * 1024;

/** The database file is damaged. `message` is the whole explanation. */
export class DatabaseDamagedError extends Error {
  readonly path: string;
  /** SQLITE_CORRUPT, SQLITE_NOTADB, or TRUNCATED / BAD_HEADER from the header check. */
  readonly code: string;
  /** What is wrong, in a few words. */
  readonly problem: string;

  constructor(path: string, code: string, problem: string, cause?: unknown) {
    super(
      `The database ${path} is damaged: ${problem} (${code}). Switchboard does not run on a damaged database: the inbox and outbox are in it, and guessing at them could lose a message or answer one twice. ` +
        `Fix: move it aside (mv ${path} ${path}.damaged, and its -wal and -shm files if any) and restore the last backup (docs/operating.md, "Backup and restore": switchboard backup makes one), ` +
        `or start without it (a new empty database: conversations and memories are gone). To salvage what is still readable: sqlite3 ${path}.damaged .recover | sqlite3 ${path}`,
      { cause },
    );
    this.name = 'DatabaseDamagedError';
    this.path = path;
    this.code = code;
    this.problem = problem;
  }
}

/** A {@link DatabaseDamagedError} for SQLite's "corrupt" and "not a database" errors; undefined for any other. */
export function damagedDatabaseError(error: unknown, path: string): DatabaseDamagedError | undefined {
  if (error instanceof DatabaseDamagedError) return error;
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code !== 'string') return undefined;
  const detail = error instanceof Error ? error.message : String(error);
  if (code.startsWith('SQLITE_NOTADB')) return new DatabaseDamagedError(path, 'SQLITE_NOTADB', `SQLite says "${detail}"`, error);
  if (code.startsWith('SQLITE_CORRUPT')) return new DatabaseDamagedError(path, 'SQLITE_CORRUPT', `SQLite says "${detail}"`, error);
  return undefined;
}

const MAGIC = Buffer.from('SQLite format 3\0', 'latin1');

/**
 * Checks the file's header without SQLite: the magic string, the page size and — when no -wal
 * file is left over, so the file alone is the whole database — that the file is as long as
 * the header says. An empty or missing file is a new database. Throws DatabaseDamagedError.
 */
export function checkDatabaseHeader(path: string): void {
  let size: number;
  try {
    size = statSync(path).size;
  } catch {
    return; // not there yet: opening creates it (or says why it cannot)
  }
  if (size === 0) return;
  const header = Buffer.alloc(100);
  const fd = openSync(path, 'r');
  let read: number;
  try {
    read = readSync(fd, header, 0, 100, 0);
  } finally {
    closeSync(fd);
  }
  if (read < 100) throw new DatabaseDamagedError(path, 'TRUNCATED', `it is ${size} bytes long, shorter than the 100-byte header every SQLite database starts with`);
  if (!header.subarray(0, 16).equals(MAGIC)) {
    const start = header.subarray(0, 16).toString('latin1').replace(/[^\x20-\x7e]/g, '.');
    throw new DatabaseDamagedError(path, 'SQLITE_NOTADB', `it is not a SQLite database (it starts with "${start}", not "SQLite format 3")`);
  }
  const rawPageSize = header.readUInt16BE(16);
  const pageSize = rawPageSize === 1 ? 65536 : rawPageSize;
  if (pageSize < 512 || (pageSize & (pageSize - 1)) !== 0) throw new DatabaseDamagedError(path, 'BAD_HEADER', `its header gives an impossible page size (${rawPageSize})`);
  const pages = header.readUInt32BE(28);
  // The header's page count is valid only when its change counter matches "version-valid-for".
  const countValid = pages > 0 && header.readUInt32BE(24) === header.readUInt32BE(92);
  if (countValid && !hasWal(path) && size < pages * pageSize) {
    throw new DatabaseDamagedError(path, 'TRUNCATED', `it is ${size} bytes long, but its header says it holds ${pages} pages of ${pageSize} bytes (${pages * pageSize} bytes): the end is missing`);
  }
}

/** Whether a -wal file with content is next to the database: the last run did not stop cleanly (or another process has it open). */
export function hasWal(path: string): boolean {
  try {
    return statSync(`${path}-wal`).size > 0;
  } catch {
    return false;
  }
}

/** Runs `PRAGMA quick_check` (every page read; see the module comment for its cost). Throws DatabaseDamagedError. */
export function quickCheck(db: Database.Database, path: string): void {
  let rows: Array<{ quick_check: string }>;
  try {
    rows = db.pragma('quick_check(5)') as Array<{ quick_check: string }>;
  } catch (error) {
    const damaged = damagedDatabaseError(error, path);
    if (!damaged) throw error;
    throw new DatabaseDamagedError(path, damaged.code, `PRAGMA quick_check stopped at a page it could not read (SQLite says "${error instanceof Error ? error.message : String(error)}")`, error);
  }
  const problems = rows.map((row) => row.quick_check).filter((line) => line !== 'ok');
  if (problems.length > 0) throw new DatabaseDamagedError(path, 'SQLITE_CORRUPT', `PRAGMA quick_check found ${problems.length === 5 ? 'at least 5 problems' : `${problems.length} problem${problems.length === 1 ? '' : 's'}`}, the first: ${problems[0]}`);
}
