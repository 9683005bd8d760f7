/**
 * One process per data_dir: the daemon (and `chat`) hold an exclusive SQLite lock on
 * `switchboard.lock` in the data dir for as long as they run, so a second one fails at once
 * instead of answering the first one's messages twice. The operating system drops the lock
 * when the process dies, even by SIGKILL, so a crash never leaves a stale lock. The main
 * database stays in ordinary WAL mode, so operator commands (`switchboard memory …`) can use
 * it while the daemon runs.
 */
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { createPrivateFile, fileSystemError } from './files.ts';

export class DataDirInUseError extends Error {
  /** The data_dir that is held. */
  readonly dir: string;

  constructor(dir: string) {
    super(
      `the data_dir ${dir} is in use by another Switchboard process. ` +
        'Only one daemon or chat may use a data_dir at a time: stop the other one or set a different data_dir.',
    );
    this.name = 'DataDirInUseError';
    this.dir = dir;
  }
}

export interface DataDirLock {
  release(): void;
}

/** Takes the lock on `dir` (which must exist). Throws DataDirInUseError, or FileSystemError when the lock file cannot be written. */
export function lockDataDir(dir: string): DataDirLock {
  return takeLock(dir, true);
}

function takeLock(dir: string, mayRecreate: boolean): DataDirLock {
  const file = join(dir, 'switchboard.lock');
  let db: Database.Database;
  try {
    createPrivateFile(file);
    db = new Database(file);
  } catch (error) {
    throw fileSystemError(error, `open the lock file ${file}`, file);
  }
  try {
    db.pragma('busy_timeout = 0');
    db.pragma('locking_mode = EXCLUSIVE');
    // The file's row only names the holder: what matters is the lock, which the operating
    // system holds and drops. Its writes need no fsync (measured on this disk: 1.8 ms median,
    // tens of ms when the disk is busy, before ready); a process crash mid-write is still
    // rolled back by the journal, and a file a power loss left damaged is made anew below.
    db.pragma('synchronous = OFF');
    db.exec('CREATE TABLE IF NOT EXISTS holder (pid INTEGER); BEGIN EXCLUSIVE; DELETE FROM holder; INSERT INTO holder VALUES (' + process.pid + '); COMMIT;');
  } catch (error) {
    db.close();
    const code = (error as { code?: string }).code;
    if (code?.startsWith('SQLITE_BUSY')) throw new DataDirInUseError(dir);
    if (mayRecreate && (code?.startsWith('SQLITE_CORRUPT') || code === 'SQLITE_NOTADB')) {
      rmSync(file, { force: true });
      rmSync(`${file}-journal`, { force: true });
      return takeLock(dir, false);
    }
    throw fileSystemError(error, `write the lock file ${file}`, file);
  }
  return { release: () => db.close() };
}
