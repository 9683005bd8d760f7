/**
 * What the webhook remembers across restarts, as JSON lines in `<stateDir>/results.jsonl`:
 * each request (so a replayed Idempotency-Key is recognised and the reply can still go to its
 * callback_url after a restart) and its reply (so a replay gets the first answer without
 * running again), plus replies that had nowhere to go (a reminder in a webhook conversation).
 *
 * Every line is a whole record; the last line for an id wins. Records older than `maxAgeMs`,
 * beyond the newest `maxEntries`, or beyond `maxBytes` (the size of their lines, newest kept)
 * are forgotten — oldest first, in memory at once and in the file when it is next rewritten
 * (atomically, once it has grown to twice what it holds); a replay after that runs again.
 */
import { appendFileSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';

/** One remembered request (or undeliverable message) and, once there is one, its reply. */
export interface ResultRecord {
  /**
   * The Idempotency-Key; `" ~<time>-<n>"` for a message nobody asked for (the leading space
   * keeps these apart: no Idempotency-Key may start with one).
   */
  readonly id: string;
  readonly conversation: string;
  /** SHA-256 of the request body (hex): a reused key with another body is refused. */
  readonly hash?: string;
  readonly callbackUrl?: string;
  /** The reply, once sent. */
  readonly reply?: string;
  /** When the request arrived (ms since the epoch). */
  readonly at: number;
  /** A reply without a request (nowhere to deliver it). */
  readonly unsolicited?: boolean;
}

export interface ResultStoreOptions {
  /** The channel's state dir; the file is `results.jsonl` in it. */
  readonly dir: string;
  readonly log: Logger;
  /** Records kept. @default 10000 */
  readonly maxEntries?: number;
  /** How long a record is kept. @default 7 days */
  readonly maxAgeMs?: number;
  /**
   * Most bytes the records take, counted as their lines in the file (UTF-8 JSON); the record
   * just written is kept even when it alone is larger. @default 16 MiB
   */
  readonly maxBytes?: number;
  /** @default Date.now */
  readonly now?: () => number;
}

/** The store: an in-memory map mirrored to the file. */
export class ResultStore {
  readonly #file: string;
  readonly #log: Logger;
  readonly #maxEntries: number;
  readonly #maxAgeMs: number;
  readonly #maxBytes: number;
  readonly #now: () => number;
  /** Insertion order = arrival order, so the oldest are first; `bytes` = its line's size. */
  readonly #records = new Map<string, { readonly record: ResultRecord; readonly bytes: number }>();
  /** The sum of the records' `bytes`. */
  #bytes = 0;
  #lines = 0;
  #unsolicited = 0;
  /** The last append failed (a full disk) and may have left half a line: the next starts on a new one. */
  #torn = false;

  constructor(options: ResultStoreOptions) {
    this.#maxEntries = options.maxEntries ?? 10_000;
    this.#maxAgeMs = options.maxAgeMs ?? 7 * 24 * 3600 * 1000;
    this.#maxBytes = options.maxBytes ?? 16 * 1024 * 1024;
    if (!(Number.isInteger(this.#maxEntries) && this.#maxEntries > 0)) throw new TypeError(`ResultStore: maxEntries must be a positive whole number, got ${this.#maxEntries}`);
    if (!(this.#maxAgeMs > 0)) throw new TypeError(`ResultStore: maxAgeMs must be positive, got ${this.#maxAgeMs}`);
    if (!(this.#maxBytes > 0)) throw new TypeError(`ResultStore: maxBytes must be positive, got ${this.#maxBytes}`);
    this.#log = options.log;
    this.#now = options.now ?? Date.now;
    mkdirSync(options.dir, { recursive: true, mode: 0o700 });
    this.#file = join(options.dir, 'results.jsonl');
    this.#load();
  }

  get(id: string): ResultRecord | undefined {
    return this.#records.get(id)?.record;
  }

  get size(): number {
    return this.#records.size;
  }

  /** Bytes the remembered records take (their lines in the file). */
  get bytes(): number {
    return this.#bytes;
  }

  /** Records a request (before it is pushed). */
  addRequest(record: Omit<ResultRecord, 'reply' | 'unsolicited'>): void {
    this.#write(record);
  }

  /** Records the reply to `id`; false when the request is not remembered. */
  addReply(id: string, reply: string): boolean {
    const record = this.#records.get(id)?.record;
    if (!record) return false;
    this.#write({ ...record, reply });
    return true;
  }

  /** Keeps a message that had no request to answer and no callback to go to. */
  addUnsolicited(conversation: string, text: string): string {
    const at = this.#now();
    const id = ` ~${at}-${++this.#unsolicited}`;
    this.#write({ id, conversation, reply: text, at, unsolicited: true });
    return id;
  }

  /** Appends the record, then remembers it; throws (remembering nothing) when the file cannot be written. */
  #write(record: ResultRecord): void {
    const line = `${JSON.stringify(record)}\n`;
    try {
      appendFileSync(this.#file, `${this.#torn ? '\n' : ''}${line}`, { mode: 0o600 });
    } catch (error) {
      this.#torn = true;
      throw error;
    }
    this.#torn = false;
    // Re-inserted at the end only when new: an update keeps the request's place in the order.
    this.#remember(record, Buffer.byteLength(line));
    this.#lines++;
    this.#forget(record.id);
    // Rewriting costs the whole file, so only once it carries as many stale lines as live ones.
    if (this.#lines > 2 * Math.max(this.#records.size, 100)) {
      try {
        this.#compact(record.id);
      } catch (error) {
        // The appended file is whole; it is rewritten at the next write that finds room.
        this.#log.warn({ err: error, file: this.#file }, 'webhook results: could not rewrite the file (kept as it is)');
      }
    }
  }

  #load(): void {
    let text: string;
    try {
      text = readFileSync(this.#file, 'utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return;
      throw error;
    }
    let skipped = 0;
    for (const line of text.split('\n')) {
      if (line.trim() === '') continue;
      this.#lines++;
      try {
        const record = JSON.parse(line) as ResultRecord;
        if (typeof record.id !== 'string' || typeof record.conversation !== 'string' || typeof record.at !== 'number') throw new Error('not a record');
        this.#remember(record, Buffer.byteLength(line) + 1);
      } catch {
        skipped++; // a line torn by a crash mid-append: the rest of the file is still good
      }
    }
    if (skipped > 0) this.#log.warn({ file: this.#file, skipped }, 'webhook results: unreadable lines skipped');
    this.#compact();
  }

  #remember(record: ResultRecord, bytes: number): void {
    this.#bytes += bytes - (this.#records.get(record.id)?.bytes ?? 0);
    this.#records.set(record.id, { record, bytes });
  }

  /** Forgets what is too old, too many or too large, oldest first (never `keep`, the record just written, unless expired). */
  #forget(keep?: string): void {
    const oldest = this.#now() - this.#maxAgeMs;
    for (const [id, { record, bytes }] of this.#records) {
      const expired = record.at < oldest;
      if (!expired && this.#records.size <= this.#maxEntries && this.#bytes <= this.#maxBytes) break;
      if (id === keep && !expired) continue;
      this.#records.delete(id);
      this.#bytes -= bytes;
    }
  }

  /** Rewrites the file with what is remembered. */
  #compact(keep?: string): void {
    this.#forget(keep);
    const body = [...this.#records.values()].map(({ record }) => `${JSON.stringify(record)}\n`).join('');
    const temp = `${this.#file}.${process.pid}.tmp`;
    try {
      writeFileSync(temp, body, { mode: 0o600 });
      renameSync(temp, this.#file);
    } catch (error) {
      rmSync(temp, { force: true });
      throw error;
    }
    this.#lines = this.#records.size;
  }
}
