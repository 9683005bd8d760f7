/**
 * Whether the data_dir takes writes. A write that fails because the disk (or the user's quota)
 * is full is reported here, wherever it happened (the inbox, a turn's commit, a channel's own
 * state file): the first failure is logged at error with the data_dir, the code and the fix,
 * repeats at most once per `repeatLogMs` (with how many writes were refused meanwhile), and
 * the recovery at info. `/readyz` reads {@link StorageHealth.state}.
 *
 * While full, new messages are refused before any write ({@link StorageHealth.refuse}): a
 * small insert can still fit in space SQLite grew its WAL into before a bigger write failed,
 * and taking messages in one at a time while no reply can be recorded only grows the backlog.
 *
 * Recovery needs no restart: while full, a probe writes `probeBytes` to a file in the data_dir
 * every `probeIntervalMs`; the first that goes through clears the state (logged at info). A
 * small write that happens to fit does not count: it proves nothing about the space a turn
 * needs, and would make the state flap.
 */
import { closeSync, fsyncSync, openSync, rmSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { diskFullCode, type DiskFullCode } from '../disk-full.ts';

export { diskFullCode, type DiskFullCode } from '../disk-full.ts';

/**
 * Which passing store failure `error` is, if any: the write lock held past busy_timeout
 * (SQLITE_BUSY / SQLITE_LOCKED), an I/O error (SQLITE_IOERR_*: a flaky disk or network file
 * system), a PostgreSQL connection that broke or a transaction the server aborted to keep
 * order (40001 serialization, 40P01 deadlock, 57P0x shutdown, 08xxx connection, 53300 too many
 * connections). Such a write is tried again after a pause; undefined for anything else — a bug
 * or a damaged database, which retrying cannot fix.
 */
export function transientStoreError(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code === 'string') {
    if (/^SQLITE_(BUSY|LOCKED|IOERR|PROTOCOL)/.test(code)) return code;
    if (/^(08...|40001|40P01|57P0[123]|53300)$/.test(code)) return code;
    if (/^(ECONNRESET|ECONNREFUSED|EPIPE|ETIMEDOUT|EHOSTUNREACH|ENETUNREACH)$/.test(code)) return code;
  }
  const message = error instanceof Error ? error.message : '';
  // pg's own errors for a connection that ended or never came carry no code
  if (/^(Connection terminated|Client has encountered a connection error|timeout exceeded when trying to connect|Query read timeout)/.test(message)) return 'connection lost';
  return undefined;
}

/** A write refused because the data_dir's disk is full; nothing of it was stored. */
export class DiskFullError extends Error {
  readonly code: DiskFullCode;
  /** The data_dir (or "the database" when the store was opened without one). */
  readonly dataDir: string;

  constructor(dataDir: string, code: DiskFullCode, what: string, cause?: unknown) {
    super(`could not ${what}: the disk of the data_dir ${dataDir} is full (${code}); nothing was stored`, { cause });
    this.name = 'DiskFullError';
    this.code = code;
    this.dataDir = dataDir;
  }
}

/** What `/readyz` and `/api/status` say about the data_dir. */
export interface StorageState {
  readonly writable: boolean;
  /** Set while not writable. */
  readonly code?: DiskFullCode;
  /** When the first refused write happened (ms since the epoch). */
  readonly since?: number;
  /** Writes refused since then. */
  readonly refused?: number;
}

export interface StorageHealthOptions {
  readonly log: Logger;
  /** Named in the log line and used by the probe. Omitted (tests on `:memory:`): no probe. */
  readonly dataDir?: string;
  /** How often the probe tries a write while the disk is full. @default 5000 */
  readonly probeIntervalMs?: number;
  /** Least time between two error lines about the same full disk. @default 60000 */
  readonly repeatLogMs?: number;
  /** Bytes the probe writes (and removes): a little more than a turn needs. @default 131072 */
  readonly probeBytes?: number;
}

export class StorageHealth {
  readonly #log: Logger;
  readonly #dataDir: string | undefined;
  readonly #probeIntervalMs: number;
  readonly #repeatLogMs: number;
  readonly #probeBytes: number;
  #full: { code: DiskFullCode; since: number; refused: number; loggedAt: number; refusedAtLog: number } | undefined;
  #probe: NodeJS.Timeout | undefined;
  #waiters: Array<() => void> = [];

  constructor(options: StorageHealthOptions) {
    this.#log = options.log;
    this.#dataDir = options.dataDir;
    this.#probeIntervalMs = options.probeIntervalMs ?? 5000;
    this.#repeatLogMs = options.repeatLogMs ?? 60_000;
    this.#probeBytes = options.probeBytes ?? 128 * 1024;
    if (!(this.#probeIntervalMs > 0)) throw new TypeError(`StorageHealth: probeIntervalMs must be positive, got ${this.#probeIntervalMs}`);
  }

  get state(): StorageState {
    const full = this.#full;
    return full ? { writable: false, code: full.code, since: full.since, refused: full.refused } : { writable: true };
  }

  /**
   * Reports a failed write. Returns a {@link DiskFullError} (to throw instead) when it was the
   * disk being full, else undefined: any other error is the caller's to handle.
   */
  failed(error: unknown, what: string): DiskFullError | undefined {
    if (error instanceof DiskFullError) return error;
    const code = diskFullCode(error);
    if (code === undefined) return undefined;
    const dataDir = this.#dataDir ?? 'the database';
    const now = Date.now();
    const full = this.#full;
    if (!full) {
      this.#full = { code, since: now, refused: 1, loggedAt: now, refusedAtLog: 1 };
      this.#log.error(
        { dataDir, code, what },
        `the disk of the data_dir ${dataDir} is full (${code}): new messages are refused without being acknowledged (platforms deliver them again), replies wait in memory; ` +
          `Switchboard carries on by itself once there is space. Fix: free space on that file system (df -h ${dataDir}), or move data_dir to a larger disk`,
      );
      this.#startProbe();
    } else {
      full.refused++;
      if (now - full.loggedAt >= this.#repeatLogMs) {
        this.#log.error({ dataDir, code, refused: full.refused - full.refusedAtLog, sinceSeconds: Math.round((now - full.since) / 1000) }, `the disk of the data_dir ${dataDir} is still full: writes refused since the last line`);
        full.loggedAt = now;
        full.refusedAtLog = full.refused;
      }
    }
    return new DiskFullError(dataDir, code, what, error);
  }

  /**
   * While the disk is full: counts a refused write and returns the error to throw instead of
   * trying it; undefined when the data_dir takes writes.
   */
  refuse(what: string): DiskFullError | undefined {
    const full = this.#full;
    // Without a probe nothing would clear the state: every write is tried instead.
    if (!full || this.#dataDir === undefined) return undefined;
    return this.failed(Object.assign(new Error('refused while the disk is full'), { code: full.code }), what);
  }

  /** A write of `probeBytes` went through: clears a full state (logged at info). Called by the probe. */
  succeeded(): void {
    const full = this.#full;
    if (!full) return;
    this.#full = undefined;
    if (this.#probe) clearInterval(this.#probe);
    this.#probe = undefined;
    this.#log.info({ dataDir: this.#dataDir ?? 'the database', refused: full.refused, fullForSeconds: Math.round((Date.now() - full.since) / 1000) }, 'the data_dir takes writes again: accepting messages');
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const wake of waiters) wake();
  }

  /**
   * Resolves once the data_dir takes writes again, or after `maxWaitMs` (the caller tries its
   * write then: that is a probe too); rejects when `signal` aborts.
   */
  writable(signal: AbortSignal, maxWaitMs = this.#probeIntervalMs): Promise<void> {
    if (!this.#full) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const done = (): void => {
        clearTimeout(timer);
        signal.removeEventListener('abort', onAbort);
        this.#waiters = this.#waiters.filter((wake) => wake !== done);
        resolve();
      };
      const onAbort = (): void => {
        clearTimeout(timer);
        this.#waiters = this.#waiters.filter((wake) => wake !== done);
        reject(signal.reason instanceof Error ? signal.reason : new Error('aborted'));
      };
      if (signal.aborted) return onAbort();
      const timer = setTimeout(done, maxWaitMs);
      signal.addEventListener('abort', onAbort, { once: true });
      this.#waiters.push(done);
    });
  }

  /** Stops the probe (at shutdown). */
  close(): void {
    if (this.#probe) clearInterval(this.#probe);
    this.#probe = undefined;
  }

  #startProbe(): void {
    const dir = this.#dataDir;
    if (dir === undefined || this.#probe) return;
    this.#probe = setInterval(() => {
      if (probeWrite(join(dir, '.space-probe'), this.#probeBytes)) this.succeeded();
    }, this.#probeIntervalMs);
    this.#probe.unref();
  }
}

/** Writes `bytes` to `file`, syncs and removes it; true when it all went to disk. */
function probeWrite(file: string, bytes: number): boolean {
  let fd: number | undefined;
  try {
    fd = openSync(file, 'w', 0o600);
    const chunk = Buffer.alloc(Math.min(bytes, 64 * 1024));
    for (let written = 0; written < bytes; ) written += writeSync(fd, chunk, 0, Math.min(chunk.length, bytes - written));
    fsyncSync(fd);
    return true;
  } catch {
    return false;
  } finally {
    try {
      if (fd !== undefined) closeSync(fd);
      rmSync(file, { force: true });
    } catch {
      // the next probe tries again (and overwrites the file)
    }
  }
}
