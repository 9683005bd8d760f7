/**
 * `switchboard backup FILE`: an online copy of the database with SQLite's backup API. Safe
 * while the daemon runs: the database is in WAL mode, so the copy reads one consistent moment
 * while the daemon keeps writing. FILE is written under a temporary name beside it, checked
 * with `PRAGMA quick_check`, and renamed into place, so it is never half-written.
 */
import { existsSync, fsyncSync, openSync, closeSync, renameSync, rmSync, statSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import type { Writable } from 'node:stream';
import { parseArgs } from 'node:util';
import Database from 'better-sqlite3';
import { createPrivateFile, EXIT_CANTCREAT } from '../src/store/files.ts';
import { checkDatabaseHeader, damagedDatabaseError, EXIT_DATAERR, quickCheck } from '../src/store/integrity.ts';

/** No database to back up (EX_NOINPUT). */
export const EXIT_NOINPUT = 66;

export const backupUsage = `Usage: switchboard backup FILE [--force] [--config FILE]

Copies the database, <data_dir>/switchboard.db (inbox, outbox, conversation history,
memories, pairing, schedules), to FILE with SQLite's online backup. Safe while the daemon
runs: the copy is one consistent moment, and the daemon keeps answering meanwhile. FILE is
written under a temporary name next to it, checked (PRAGMA quick_check) and renamed into
place, so it is never half-written; it is one self-contained file, mode 600.

Not in FILE: the channels' own state in <data_dir>/channels/ (the Matrix device, Discord
positions, webhook results), MEMORY_SNAPSHOT.md, and with memory backend "markdown"
MEMORY.md and memory/ — plain files: copy them with cp -a.
To restore, see "Backup and restore" in docs/operating.md.

Options:
  --force             replace FILE if it exists
  -c, --config FILE   config file (default: as for start)
  -h, --help          show this help

With [store] kind = "postgres" nothing is copied: it prints the pg_dump line that backs
up that database (and the pg_restore line), and exits 69.

Exit codes: 0 written, 2 usage error, 65 the database is damaged (nothing written),
66 there is no database yet, 69 the store is PostgreSQL (use the pg_dump line printed),
73 FILE exists (without --force) or cannot be written, 78 config error.

Example:
  switchboard backup /var/backups/switchboard-$(date +%F).db
`;

export interface BackupIo {
  readonly stdout: Writable;
  readonly stderr: Writable;
  /**
   * The configured store: the SQLite file to copy (from the config's data_dir), or the URL of a
   * PostgreSQL store (`[store] kind = "postgres"`), which this command does not copy.
   */
  readonly database: () => string | { readonly postgres: string };
}

/** Refused: the store is PostgreSQL, whose own pg_dump is the tool (EX_UNAVAILABLE). */
export const EXIT_UNAVAILABLE = 69;

/** A word for a POSIX shell, single-quoted when it needs to be. */
function shellWord(word: string): string {
  return /^[A-Za-z0-9_./:@%+=,-]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`;
}

/**
 * The pg_dump line that backs up the PostgreSQL store at `url` to `file` (custom format: one file,
 * compressed, for pg_restore), and the pg_restore line that restores it. The password is never
 * in them: pg_dump asks for it, or reads PGPASSWORD or ~/.pgpass.
 */
export function pgDumpCommands(url: string, file: string): { dump: string; restore: string; hasPassword: boolean } {
  const parsed = new URL(url);
  const hasPassword = parsed.password !== '';
  parsed.password = '';
  const target = parsed.toString();
  return {
    dump: `pg_dump --format=custom --file=${shellWord(file)} ${shellWord(target)}`,
    restore: `pg_restore --clean --if-exists --no-owner --dbname=${shellWord(target)} ${shellWord(file)}`,
    hasPassword,
  };
}

/** Runs `switchboard backup`; returns the exit code. */
export async function runBackup(args: readonly string[], io: BackupIo): Promise<number> {
  const usage = (message: string): number => {
    io.stderr.write(`switchboard backup: ${message}\n${backupUsage}`);
    return 2;
  };
  let parsed;
  try {
    parsed = parseArgs({ args: [...args], allowPositionals: true, strict: true, options: { force: { type: 'boolean' } } });
  } catch (error) {
    return usage(error instanceof Error ? error.message : String(error));
  }
  const [target, ...extra] = parsed.positionals;
  if (target === undefined) return usage('missing FILE: where to write the copy');
  if (extra.length > 0) return usage(`unexpected argument "${extra[0]}"`);

  const store = io.database();
  const file = resolve(target);
  if (typeof store !== 'string') {
    // Never the SQLite file in data_dir: in a cluster it holds no conversation, and a copy of it would look like a backup.
    const { dump, restore, hasPassword } = pgDumpCommands(store.postgres, file);
    io.stderr.write(
      `switchboard backup: the store is PostgreSQL ([store] kind = "postgres"), which this command does not copy; nothing was written. Back it up with PostgreSQL's own tool (it runs beside the nodes, one consistent snapshot):\n` +
        `  ${dump}\n` +
        `${hasPassword ? 'It asks for the password in [store] url (or set PGPASSWORD, or put it in ~/.pgpass). ' : ''}Use a pg_dump at least as new as the server (pg_dump --version). Restore, nodes stopped:\n` +
        `  ${restore}\n`,
    );
    return EXIT_UNAVAILABLE;
  }
  const source = store;
  if (!existsSync(source)) {
    io.stderr.write(`switchboard backup: there is no database at ${source} yet (has Switchboard run with this config?); nothing to back up\n`);
    return EXIT_NOINPUT;
  }
  if (file === resolve(source) || file.startsWith(`${resolve(source)}-`)) {
    io.stderr.write(`switchboard backup: ${file} is the database itself (or one of its files); choose a FILE outside the data_dir\n`);
    return 2;
  }
  if (!existsSync(dirname(file))) {
    io.stderr.write(`switchboard backup: the directory ${dirname(file)} does not exist; nothing was written. Create it (mkdir -p ${dirname(file)}) or choose another FILE\n`);
    return EXIT_CANTCREAT;
  }
  if (existsSync(file) && !parsed.values.force) {
    io.stderr.write(`switchboard backup: ${file} exists; nothing was written. Choose another name, or pass --force to replace it\n`);
    return EXIT_CANTCREAT;
  }

  const started = performance.now();
  // Beside FILE, so the rename is atomic (same file system); the leading dot keeps it out of globs.
  const temp = join(dirname(file), `.${basename(file)}.${process.pid}.tmp`);
  let db: Database.Database | undefined;
  try {
    checkDatabaseHeader(source);
    db = new Database(source, { fileMustExist: true });
    db.pragma('busy_timeout = 5000');
    createPrivateFile(temp); // 0600 before SQLite writes into it: conversations are in it
    // One step copies everything: a multi-step copy restarts whenever the daemon writes
    // between steps, and in WAL mode the one read it takes blocks no writer.
    await db.backup(temp, { progress: () => 0x7fffffff });
    const copy = new Database(temp);
    try {
      quickCheck(copy, source);
      // Self-contained: no -wal beside it. The daemon turns WAL back on when it opens a restored copy.
      copy.pragma('journal_mode = DELETE');
    } finally {
      copy.close();
    }
    syncFile(temp);
    renameSync(temp, file);
    syncFile(dirname(file));
  } catch (error) {
    rmSync(temp, { force: true });
    rmSync(`${temp}-journal`, { force: true });
    const damaged = damagedDatabaseError(error, source);
    if (damaged) {
      io.stderr.write(`switchboard backup: nothing was written. ${damaged.message}\n`);
      return EXIT_DATAERR;
    }
    // Not the data_dir's problem: say what failed, without fixes about data_dir.
    const code = (error as { code?: unknown } | null)?.code;
    const full = typeof code === 'string' && /^(ENOSPC|EDQUOT|SQLITE_FULL)/.test(code) ? ` — no space left on the file system of ${dirname(file)} (df -h ${dirname(file)})` : '';
    io.stderr.write(`switchboard backup: could not write ${file}: ${error instanceof Error ? error.message : String(error)}${typeof code === 'string' ? ` (${code})` : ''}${full}. Nothing was written.\n`);
    return EXIT_CANTCREAT;
  } finally {
    db?.close();
  }
  const seconds = (performance.now() - started) / 1000;
  io.stdout.write(`Backed up ${source} to ${file}: ${formatBytes(statSync(file).size)} in ${seconds.toFixed(2)} s\n`);
  return 0;
}

function syncFile(path: string): void {
  const fd = openSync(path, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

function formatBytes(bytes: number): string {
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KiB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
}
