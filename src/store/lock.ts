/**
 * One process per data_dir: the daemon (and `chat`) hold an exclusive SQLite lock on
 * `switchboard.lock` in the data dir for as long as they run, so a second one fails at once
 * instead of answering the first one's messages twice. The operating system drops the lock
 * when the process dies, even by SIGKILL, so a crash never leaves a stale lock. The main
 * database stays in ordinary WAL mode, so operator commands (`switchboard memory …`) can use
 * it while the daemon runs.
 */
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
    db.exec('CREATE TABLE IF NOT EXISTS holder (pid INTEGER); BEGIN EXCLUSIVE; DELETE FROM holder; INSERT INTO holder VALUES (' + process.pid + '); COMMIT;');
  } catch (error) {
    db.close();
    if ((error as { code?: string }).code?.startsWith('SQLITE_BUSY')) throw new DataDirInUseError(dir);
    throw fileSystemError(error, `write the lock file ${file}`, file);
  }
  return { release: () => db.close() };
}
