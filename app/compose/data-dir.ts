/**
 * The logger and the data directory: everything `start` creates in data_dir, up front (0700),
 * the lock that keeps a second daemon out, and the SQLite database. A file-system problem is one
 * paragraph naming the path, the user and the fix (FileSystemError, exit 73), never a crash.
 */
import { existsSync, realpathSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import type { Config } from '../../src/config/schema.ts';
import { createLogger, type Logger, type LogTail } from '../../src/log.ts';
import { openDatabase, type Db } from '../../src/store/db.ts';
import { makeDirectory, withFileContext } from '../../src/store/files.ts';
import { lockDataDir } from '../../src/store/lock.ts';

const levels = new Set(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent']);

type Level = NonNullable<Config['log']['level']>;

/**
 * `$SWITCHBOARD_LOG_LEVEL` wins, then `--verbose` (chat: info, start: debug), then `log.level`,
 * then the command's default: info for `start`, error for `chat` — warnings (a retry, say)
 * stay out of the conversation unless asked for.
 */
export function logLevel(config: Config, fallback: Level, verbose?: Level): Level {
  const fromEnv = process.env.SWITCHBOARD_LOG_LEVEL;
  if (fromEnv !== undefined && levels.has(fromEnv)) return fromEnv as Level;
  return verbose ?? config.log.level ?? fallback;
}

/** The daemon's logger; with the terminal in use, stdout is the conversation, so logs go to stderr. */
export function daemonLogger(config: Config, mode: 'start' | 'chat', verbose: boolean | undefined, names: readonly string[], tap: LogTail | undefined): Logger {
  return createLogger({
    ...(tap ? { tap } : {}),
    level: mode === 'chat' ? logLevel(config, 'error', verbose ? 'info' : undefined) : logLevel(config, 'info', verbose ? 'debug' : undefined),
    format: config.log.format,
    stream: names.includes('terminal') ? process.stderr : process.stdout,
    // Beside a conversation, one line per event.
    singleLine: names.includes('terminal'),
  });
}

export interface DataDir {
  readonly dataDir: string;
  readonly dbPath: string;
  /** For FileSystemError's paragraph: the data_dir and the config file that names it. */
  readonly files: { readonly dataDir: string; readonly configFile: string };
  readonly workspace: string;
  readonly lock: { release(): void };
  readonly db: Db;
  /** Whether the database file was missing before this start (a fresh one hydrates memory from the snapshot). */
  readonly freshDatabase: boolean;
}

/** Creates data_dir, its workspace and each channel's folder, takes the lock and opens the database. */
export function openDataDir(config: Config, file: string, names: readonly string[]): DataDir {
  const dataDir = resolve(dirname(file), config.data_dir);
  const dbPath = join(dataDir, 'switchboard.db');
  const files = { dataDir, configFile: file };
  const { lock, db, freshDatabase } = withFileContext(files, () => {
    for (const dir of [dataDir, join(dataDir, 'workspace'), join(dataDir, 'channels'), ...names.map((name) => join(dataDir, 'channels', name))]) makeDirectory(dir);
    const held = lockDataDir(dataDir);
    const fresh = !existsSync(dbPath);
    try {
      return { lock: held, freshDatabase: fresh, db: openDatabase(dbPath, { durability: config.runtime.durability }) };
    } catch (error) {
      held.release();
      throw error;
    }
  });
  return { dataDir, dbPath, files, workspace: realpathSync(join(dataDir, 'workspace')), lock, db, freshDatabase };
}
