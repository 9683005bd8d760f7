/**
 * What the webhook remembers across restarts and takeovers, in the channel state store
 * (ChannelContext.state, one entry `r:<id>` per record): each request (so a replayed
 * Idempotency-Key is recognised and the reply can still go to its callback_url after a
 * restart) and its reply (so a replay gets the first answer without running again), plus
 * replies that had nowhere to go (a reminder in a webhook conversation). Read from the store
 * on every request, so in a cluster any node answers a replay the same.
 *
 * Records older than `maxAgeMs`, beyond the newest `maxEntries`, or beyond `maxBytes` (the
 * size of their JSON, newest kept) are forgotten — oldest first, at each new record (a reply
 * keeps its request's place); a replay after that runs again. Earlier versions kept them in
 * `results.jsonl` in the state dir (JSON lines, the last line for an id winning): imported
 * from there once.
 */
import type { Logger } from 'pino';
import type { ChannelState } from '../../src/channel-state.ts';
import { importStateFile } from '../../src/state-import.ts';

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
  /** Where the records are kept. */
  readonly state: ChannelState;
  /** The channel's state dir, where an earlier version's `results.jsonl` may be. */
  readonly legacyDir?: string;
  readonly log: Logger;
  /** Records kept. @default 10000 */
  readonly maxEntries?: number;
  /** How long a record is kept (from when the store created it). @default 7 days */
  readonly maxAgeMs?: number;
  /** Most bytes the records take (UTF-8 JSON); the newest is kept even when it alone is larger. @default 16 MiB */
  readonly maxBytes?: number;
  /** @default Date.now */
  readonly now?: () => number;
}

const PREFIX = 'r:';

export class ResultStore {
  readonly #state: ChannelState;
  readonly #options: ResultStoreOptions;
  readonly #log: Logger;
  readonly #maxEntries: number;
  readonly #maxAgeMs: number;
  readonly #maxBytes: number;
  readonly #now: () => number;
  #unsolicited = 0;

  constructor(options: ResultStoreOptions) {
    this.#maxEntries = options.maxEntries ?? 10_000;
    this.#maxAgeMs = options.maxAgeMs ?? 7 * 24 * 3600 * 1000;
    this.#maxBytes = options.maxBytes ?? 16 * 1024 * 1024;
    if (!(Number.isInteger(this.#maxEntries) && this.#maxEntries > 0)) throw new TypeError(`ResultStore: maxEntries must be a positive whole number, got ${this.#maxEntries}`);
    if (!(this.#maxAgeMs > 0)) throw new TypeError(`ResultStore: maxAgeMs must be positive, got ${this.#maxAgeMs}`);
    if (!(this.#maxBytes > 0)) throw new TypeError(`ResultStore: maxBytes must be positive, got ${this.#maxBytes}`);
    this.#state = options.state;
    this.#options = options;
    this.#log = options.log;
    this.#now = options.now ?? Date.now;
  }

  /** Imports an earlier version's file (once) and forgets what is beyond the limits: when the channel starts listening. */
  async load(): Promise<void> {
    await importStateFile({
      dir: this.#options.legacyDir,
      file: 'results.jsonl',
      log: this.#log,
      stored: () => this.#state.any(PREFIX),
      load: async (text) => {
        const records = new Map<string, ResultRecord>();
        let skipped = 0;
        for (const line of text.split('\n')) {
          if (line.trim() === '') continue;
          try {
            const record = JSON.parse(line) as ResultRecord;
            if (typeof record.id !== 'string' || typeof record.conversation !== 'string' || typeof record.at !== 'number') throw new Error('not a record');
            records.set(record.id, record); // an update keeps the request's place
          } catch {
            skipped++; // a line torn by a crash mid-append: the rest of the file is still good
          }
        }
        if (skipped > 0) this.#log.warn({ skipped }, 'webhook results: unreadable lines of the old file skipped');
        const oldest = this.#now() - this.#maxAgeMs;
        let kept = 0;
        for (const record of records.values()) {
          if (record.at < oldest) continue;
          await this.#state.put(`${PREFIX}${record.id}`, JSON.stringify(record));
          kept++;
        }
        return kept;
      },
    });
    await this.#prune();
  }

  async get(id: string): Promise<ResultRecord | undefined> {
    const text = await this.#state.get(`${PREFIX}${id}`);
    if (text === undefined) return undefined;
    try {
      return JSON.parse(text) as ResultRecord;
    } catch {
      return undefined;
    }
  }

  /** How many records are kept and the bytes they take. */
  async stats(): Promise<{ size: number; bytes: number }> {
    const entries = await this.#state.list(PREFIX);
    return { size: entries.length, bytes: entries.reduce((sum, entry) => sum + Buffer.byteLength(entry.value), 0) };
  }

  /** Records a request (before it is pushed); rejects, remembering nothing, when it cannot be stored. */
  async addRequest(record: Omit<ResultRecord, 'reply' | 'unsolicited'>): Promise<void> {
    await this.#write(record);
  }

  /** Records the reply to `id`; false when the request is not remembered. */
  async addReply(id: string, reply: string): Promise<boolean> {
    const record = await this.get(id);
    if (!record) return false;
    await this.addReplyTo(record, reply);
    return true;
  }

  /** Records the reply to `record`, which the caller has just read with `get` (one read fewer per reply than `addReply`). */
  async addReplyTo(record: ResultRecord, reply: string): Promise<void> {
    // Keeps the request's place in the order; not pruned here (the reply must stay for a replay).
    await this.#state.put(`${PREFIX}${record.id}`, JSON.stringify({ ...record, reply }));
  }

  /** Keeps a message that had no request to answer and no callback to go to. */
  async addUnsolicited(conversation: string, text: string): Promise<string> {
    const at = this.#now();
    const id = ` ~${at}-${++this.#unsolicited}`;
    await this.#write({ id, conversation, reply: text, at, unsolicited: true });
    return id;
  }

  async #write(record: ResultRecord): Promise<void> {
    await this.#state.put(`${PREFIX}${record.id}`, JSON.stringify(record));
    try {
      await this.#prune();
    } catch (error) {
      // The record is stored; what is beyond the limits goes at the next write.
      this.#log.warn({ err: error }, 'webhook results: could not forget old records (tried again at the next)');
    }
  }

  #prune(): Promise<number> {
    return this.#state.prune(PREFIX, { keep: this.#maxEntries, createdBefore: this.#now() - this.#maxAgeMs, maxBytes: this.#maxBytes });
  }
}
