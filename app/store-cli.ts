/**
 * `switchboard store copy --to URL|FILE [--from URL|FILE] [--force]`: moves the whole store from
 * one engine to another (src/store/copy.ts) — the SQLite file in data_dir to the PostgreSQL of
 * a cluster, a PostgreSQL to another, or back to a SQLite file. Refuses while a daemon runs on
 * either side: on SQLite it takes the data_dir lock the daemon holds (src/store/lock.ts), on
 * PostgreSQL it asks the cluster's nodes table for a node seen in the last reports.
 */
import { existsSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import type { Writable } from 'node:stream';
import { parseArgs } from 'node:util';
import type { Logger } from 'pino';
import { NODE_REPORT_MS } from '../src/cluster/nodes.ts';
import type { TurnQueue } from '../src/runtime/turn-queue.ts';
import { copyStore, type TableCount } from '../src/store/copy.ts';
import type { Sql } from '../src/store/sql.ts';
import { openDatabase } from '../src/store/db.ts';
import { makeDirectory, EXIT_CANTCREAT } from '../src/store/files.ts';
import { DataDirInUseError, lockDataDir, type DataDirLock } from '../src/store/lock.ts';
import type { Database } from '../src/store/sql.ts';
import { sqliteDatabase } from '../src/store/sqlite-sql.ts';

export const storeUsage = `Usage: switchboard store copy --to URL|FILE [--from URL|FILE] [--force] [--config FILE]

Copies everything the store holds — conversations (inbox, outbox, history), memories,
pairings, approvals, schedules, per-conversation settings, channel state — from one store
to another, in order, then compares the row counts table by table and prints them.
URL is a postgres:// connection string, FILE a SQLite database (created when missing).
--from defaults to the store this config uses (<data_dir>/switchboard.db, or [store] url).

Moving to a cluster: stop the daemon, run
  switchboard store copy --to 'postgres://switchboard@db.internal:5432/switchboard'
then set [store] kind = "postgres" and url in the config and start the nodes.

Stop the daemon first: the copy refuses a SQLite store a daemon holds, and a PostgreSQL
store a node reported itself on in the last few seconds. A target that already holds
rows is refused (nothing copied) unless --force, which deletes what it holds in those
tables first. An interrupted copy (Ctrl-C, a lost connection) is resumed by running
the same command again: rows already there are not copied twice.

Options:
  --to URL|FILE       where to copy to (required)
  --from URL|FILE     what to copy (default: this config's store)
  --force             empty a target that holds rows, then copy
  -c, --config FILE   config file (default: as for start)
  -h, --help          show this help

Exit codes: 0 copied and the counts match, 1 a daemon runs on the source or target, or the
counts differ, 2 usage error, 66 the source does not exist, 73 the target holds rows
(without --force), 75/78 PostgreSQL unreachable / refused (as for start).
`;

export interface StoreIo {
  readonly stdout: Writable;
  readonly stderr: Writable;
  /** The configured store, for a default --from: a SQLite file or a postgres:// URL. */
  readonly configured: () => string;
  readonly log: () => Logger;
  /** The cluster's turn queue on the PostgreSQL at `url` (pg-boss, as the nodes make it). */
  readonly turnQueue: (url: string) => Promise<TurnQueue>;
}

const isUrl = (spec: string): boolean => /^postgres(?:ql)?:\/\//.test(spec);

/** An open side of the copy. */
interface Side {
  readonly name: string;
  readonly database: Database;
  close(): Promise<void>;
}

class Refused extends Error {
  readonly exitCode: number;

  constructor(message: string, exitCode: number) {
    super(message);
    this.exitCode = exitCode;
  }
}

/** Runs `switchboard store …`; returns the exit code. */
export async function runStoreCommand(args: readonly string[], io: StoreIo): Promise<number> {
  const usage = (message: string): number => {
    io.stderr.write(`switchboard store: ${message}\n${storeUsage}`);
    return 2;
  };
  let parsed;
  try {
    parsed = parseArgs({ args: [...args], allowPositionals: true, strict: true, options: { to: { type: 'string' }, from: { type: 'string' }, force: { type: 'boolean' } } });
  } catch (error) {
    return usage(error instanceof Error ? error.message : String(error));
  }
  const [action, ...extra] = parsed.positionals;
  if (action !== 'copy') return usage(action === undefined ? 'missing the action: copy' : `unknown action "${action}"`);
  if (extra.length > 0) return usage(`unexpected argument "${extra[0]}"`);
  const to = parsed.values.to;
  if (to === undefined || to === '') return usage('missing --to: the postgres:// URL (or SQLite file) to copy to');
  const from = parsed.values.from ?? io.configured();
  const fromKey = isUrl(from) ? from : resolve(from);
  const toKey = isUrl(to) ? to : resolve(to);
  if (fromKey === toKey) return usage('--from and --to are the same store');

  const opened: Side[] = [];
  const started = performance.now();
  try {
    const source = await open(from, 'source', io);
    opened.push(source);
    const target = await open(to, 'target', io);
    opened.push(target);
    io.stdout.write(`Copying ${source.name} → ${target.name}\n`);
    let handedOn = 0;
    const result = await copyStore({
      from: source.database,
      to: target.database,
      fromName: source.name,
      ...(parsed.values.force ? { force: true } : {}),
      // A node takes turns from the queue only, never from the inbox: a message accepted but not
      // yet answered needs its job there. (On SQLite the daemon re-queues them at start.)
      ...(isUrl(to) ? { beforeFinish: async (sql: Sql) => void (handedOn = await handOn(sql, to, io)) } : {}),
    });
    if (!result.ok && result.reason === 'target not empty') {
      io.stderr.write(
        `switchboard store copy: ${target.name} already holds rows (${result.holding.map((entry) => `${entry.table} ${entry.target}`).join(', ')}); nothing was copied. ` +
          'Copy into an empty database, or pass --force to delete what it holds in those tables first.\n',
      );
      return EXIT_CANTCREAT;
    }
    io.stdout.write(formatCounts(result.counts));
    if (!result.ok) {
      io.stderr.write('switchboard store copy: the counts differ (above): did something write to the source meanwhile? Stop it, then run the same command again.\n');
      return 1;
    }
    const rows = result.counts.reduce((sum, entry) => sum + entry.target, 0);
    io.stdout.write(
      `${result.resumed ? 'Resumed and finished' : 'Copied'}: ${rows} rows in ${result.counts.length} tables, every count matches (${((performance.now() - started) / 1000).toFixed(1)} s).\n` +
        (handedOn > 0 ? `${handedOn} message${handedOn === 1 ? '' : 's'} accepted but not yet answered went to the cluster's turn queue: the first node to start answers ${handedOn === 1 ? 'it' : 'them'}.\n` : '') +
        (isUrl(to) ? `Next: set [store] kind = "postgres" and url = "${target.name}" (with its password) in the config, then start the nodes.\n` : ''),
    );
    return 0;
  } catch (error) {
    if (error instanceof Refused) {
      io.stderr.write(`switchboard store copy: ${error.message}\n`);
      return error.exitCode;
    }
    throw error;
  } finally {
    for (const side of opened.reverse()) await side.close().catch(() => undefined);
  }
}

async function open(spec: string, role: 'source' | 'target', io: StoreIo): Promise<Side> {
  if (isUrl(spec)) {
    const { openPostgres } = await import('../src/store/postgres/sql.ts');
    const database = await openPostgres({ url: spec, log: io.log(), maxConnections: 2 });
    try {
      const running = await database.all<{ node: string }>('SELECT node FROM cluster_nodes WHERE seen_at >= ? ORDER BY node', [Date.now() - 3 * NODE_REPORT_MS]);
      if (running.length > 0) {
        throw new Refused(
          `node${running.length === 1 ? '' : 's'} ${running.map((row) => row.node).join(', ')} ${running.length === 1 ? 'is' : 'are'} running on the ${role} ${database.name}; nothing was copied. Stop ${running.length === 1 ? 'it' : 'them'} first (systemctl stop switchboard), so no message is answered while the copy is made.`,
          1,
        );
      }
    } catch (error) {
      await database.close();
      throw error;
    }
    return { name: database.name, database, close: () => database.close() };
  }
  const path = resolve(spec);
  if (role === 'source' && !existsSync(path)) throw new Refused(`there is no database at ${path} (has Switchboard run with this config?); nothing to copy`, 66);
  makeDirectory(dirname(path));
  let lock: DataDirLock;
  try {
    lock = lockDataDir(dirname(path));
  } catch (error) {
    if (error instanceof DataDirInUseError) {
      throw new Refused(`a Switchboard daemon (or chat) is running on the ${role} ${path}; nothing was copied. Stop it first (Ctrl-C, or systemctl stop switchboard), so no message is answered while the copy is made.`, 1);
    }
    throw error;
  }
  try {
    const database = sqliteDatabase(openDatabase(path));
    return {
      name: path,
      database,
      close: async () => {
        await database.close();
        lock.release();
      },
    };
  } catch (error) {
    lock.release();
    throw error;
  }
}

/** Puts each unanswered message of the PostgreSQL target into the turn queue; returns how many. */
async function handOn(sql: Sql, url: string, io: StoreIo): Promise<number> {
  const queued = await sql.all<{ seq: number; conversation: string }>("SELECT seq, conversation FROM inbox WHERE status = 'queued' ORDER BY seq");
  if (queued.length === 0) return 0;
  const queue = await io.turnQueue(url);
  try {
    // A job for a message already answered is skipped by the node (it finds it no longer queued), so a copy run again may add one twice.
    for (const turn of queued) {
      const ticket = await queue.reserve();
      await sql.transaction((tx) => ticket.enqueue(tx, turn));
    }
  } finally {
    await queue.stop(1000);
  }
  return queued.length;
}

function formatCounts(counts: readonly TableCount[]): string {
  const width = Math.max(...counts.map((entry) => entry.table.length));
  return `${counts.map((entry) => `  ${entry.table.padEnd(width)}  ${String(entry.source).padStart(8)} → ${String(entry.target).padEnd(8)} ${entry.source === entry.target ? 'ok' : 'DIFFERS'}`).join('\n')}\n`;
}
