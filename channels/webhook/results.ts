/**
 * What the webhook remembers across restarts, as JSON lines in `<stateDir>/results.jsonl`:
 * each request (so a replayed Idempotency-Key is recognised and the reply can still go to its
 * callback_url after a restart) and its reply (so a replay gets the first answer without
 * running again), plus replies that had nowhere to go (a reminder in a webhook conversation).
 *
 * Every line is a whole record; the last line for an id wins. The file is rewritten
 * (atomically) when it has grown to twice what it holds, and records beyond the newest
 * `maxEntries` or older than `maxAgeMs` are forgotten then — a replay after that runs again.
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
  /** @default Date.now */
  readonly now?: () => number;
}

/** The store: an in-memory map mirrored to the file. */
export class ResultStore {
  readonly #file: string;
  readonly #log: Logger;
  readonly #maxEntries: number;
  readonly #maxAgeMs: number;
  readonly #now: () => number;
  /** Insertion order = arrival order, so the oldest are first. */
  readonly #records = new Map<string, ResultRecord>();
  #lines = 0;
  #unsolicited = 0;
  /** The last append failed (a full disk) and may have left half a line: the next starts on a new one. */
  #torn = false;

  constructor(options: ResultStoreOptions) {
    this.#maxEntries = options.maxEntries ?? 10_000;
    this.#maxAgeMs = options.maxAgeMs ?? 7 * 24 * 3600 * 1000;
    if (!(Number.isInteger(this.#maxEntries) && this.#maxEntries > 0)) throw new TypeError(`ResultStore: maxEntries must be a positive whole number, got ${this.#maxEntries}`);
    if (!(this.#maxAgeMs > 0)) throw new TypeError(`ResultStore: maxAgeMs must be positive, got ${this.#maxAgeMs}`);
    this.#log = options.log;
    this.#now = options.now ?? Date.now;
    mkdirSync(options.dir, { recursive: true, mode: 0o700 });
    this.#file = join(options.dir, 'results.jsonl');
    this.#load();
  }

  get(id: string): ResultRecord | undefined {
    return this.#records.get(id);
  }

  get size(): number {
    return this.#records.size;
  }

  /** Records a request (before it is pushed). */
  addRequest(record: Omit<ResultRecord, 'reply' | 'unsolicited'>): void {
    this.#write(record);
  }

  /** Records the reply to `id`; false when the request is not remembered. */
  addReply(id: string, reply: string): boolean {
    const record = this.#records.get(id);
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
    try {
      appendFileSync(this.#file, `${this.#torn ? '\n' : ''}${JSON.stringify(record)}\n`, { mode: 0o600 });
    } catch (error) {
      this.#torn = true;
      throw error;
    }
    this.#torn = false;
    // Re-inserted at the end only when new: an update keeps the request's place in the order.
    this.#records.set(record.id, record);
    this.#lines++;
    this.#forget();
    // Rewriting costs the whole file, so only once it carries as many stale lines as live ones.
    if (this.#lines > 2 * Math.max(this.#records.size, 100)) {
      try {
        this.#compact();
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
        this.#records.set(record.id, record);
      } catch {
        skipped++; // a line torn by a crash mid-append: the rest of the file is still good
      }
    }
    if (skipped > 0) this.#log.warn({ file: this.#file, skipped }, 'webhook results: unreadable lines skipped');
    this.#compact();
  }

  /** Forgets what is too old or too many (the oldest come first in the map). */
  #forget(): void {
    const oldest = this.#now() - this.#maxAgeMs;
    for (const [id, record] of this.#records) {
      if (record.at >= oldest && this.#records.size <= this.#maxEntries) break;
      this.#records.delete(id);
    }
  }

  /** Rewrites the file with what is remembered. */
  #compact(): void {
    this.#forget();
    const body = [...this.#records.values()].map((record) => `${JSON.stringify(record)}\n`).join('');
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
