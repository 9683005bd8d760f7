/**
 * The channel's record of mail threads, kept in the channel state store (ChannelContext.state)
 * so that it survives a restart (or a crash mid-turn), and a takeover by another node:
 *
 * - per received mail (`r:<Message-ID>`), what a reply to it needs (whom, subject, Message-ID,
 *   References) and the thread it belongs to — stored before the mail is pushed to the runtime;
 * - per mail the bot sent (`s:<Message-ID>`), its thread and recipient — stored before the mail
 *   is handed to SMTP, so that a reply naming only the bot's mail (terse clients put just that
 *   in In-Reply-To / References) continues the thread.
 *
 * Bounded: at most `limit` (default 5,000) received and `limit` sent mails are kept, in memory
 * and in the store — the oldest are dropped first. A reply to a sent mail older than that is
 * looked up in the Sent folder instead. Earlier versions kept the record in `threads.jsonl` in
 * the state dir (JSON lines, the latest entry for an id winning; a sent entry is
 * `{"kind":"sent", …}`, a received one has no `kind`): imported from there once.
 */
import { createHash } from 'node:crypto';
import { pino, type Logger } from 'pino';
import type { ChannelContext } from '../../src/channel.ts';
import { MAX_KEY_LENGTH, type ChannelState } from '../../src/channel-state.ts';
import { importStateFile } from '../../src/state-import.ts';
import { BoundedMap } from '../../src/bounded-map.ts';

/** The headers of a received mail that a reply to it is built from. */
export interface ReplyTarget {
  /** Message-ID of the received mail, with angle brackets. */
  readonly id: string;
  /** The thread's root Message-ID (the conversation's `chat`). */
  readonly chat: string;
  /** The person's address (the From of the received mail). */
  readonly address: string;
  readonly name?: string;
  readonly subject: string;
  /** The received mail's References (oldest first). */
  readonly references: readonly string[];
}

/** A mail the bot sent. */
export interface SentMail {
  /** Its Message-ID, with angle brackets. */
  readonly id: string;
  /** The thread (conversation `chat`) it belongs to. */
  readonly chat: string;
  /** The address it went to, lower-cased. */
  readonly to: string;
}

type Entry = ({ readonly kind?: undefined } & ReplyTarget) | ({ readonly kind: 'sent' } & SentMail);

export interface ThreadBookOptions {
  /** Where the record is kept; none: in memory only. */
  readonly state?: ChannelState;
  /** Most received and most sent mails kept (each). @default 5000 */
  readonly limit?: number;
  /** The channel's state dir, where an earlier version's `threads.jsonl` may be. */
  readonly legacyDir?: string;
  readonly log?: Logger;
  /** Where a failed write is reported (a full disk shows in /readyz). */
  readonly storage?: ChannelContext['storage'];
}

const RECEIVED = 'r:';
const SENT = 's:';

/** The store key of a mail: its Message-ID, or a digest of one too long to be a key. */
function keyOf(prefix: string, id: string): string {
  return prefix.length + id.length <= MAX_KEY_LENGTH ? `${prefix}${id}` : `${prefix}sha256:${createHash('sha256').update(id).digest('hex')}`;
}

/**
 * The record described above: lookups in memory (bounded), every change stored before the
 * method returns. Loaded when a listen starts (`reload`) or when a send needs it first.
 */
export class ThreadBook {
  readonly #options: ThreadBookOptions;
  readonly #log: Logger;
  readonly #limit: number;
  readonly #byId: BoundedMap<string, ReplyTarget>;
  readonly #byChat: BoundedMap<string, ReplyTarget>;
  readonly #sent: BoundedMap<string, SentMail>;
  #loaded: Promise<void> | undefined;

  constructor(options: ThreadBookOptions = {}) {
    const limit = options.limit ?? 5000;
    if (!Number.isInteger(limit) || limit < 1) throw new TypeError(`limit must be a positive integer, got ${limit}`);
    this.#options = options;
    this.#log = options.log ?? pino({ enabled: false });
    this.#limit = limit;
    this.#byId = new BoundedMap(limit);
    this.#byChat = new BoundedMap(limit);
    this.#sent = new BoundedMap(limit);
  }

  /** Reads the record from the store now (a listen starts: another node may have added to it). */
  reload(): Promise<void> {
    this.#loaded = this.#load();
    this.#loaded.catch(() => (this.#loaded = undefined)); // the next call tries again
    return this.#loaded;
  }

  /** Resolves once the record is loaded (loading it the first time). */
  ready(): Promise<void> {
    return this.#loaded ?? this.reload();
  }

  /** The mail with this Message-ID, when it was seen. */
  byId(id: string): ReplyTarget | undefined {
    return this.#byId.get(id);
  }

  /** The latest mail received in a thread. */
  byChat(chat: string): ReplyTarget | undefined {
    return this.#byChat.get(chat);
  }

  /** Whether mail of the thread with this root was received (and is still kept). */
  hasThread(chat: string): boolean {
    return this.#byChat.has(chat);
  }

  /** The thread of the mail the bot sent to `to` with this Message-ID; undefined when it sent none (or to someone else). */
  sentThread(id: string, to: string): string | undefined {
    const sent = this.#sent.get(id);
    return sent !== undefined && sent.to === to.toLowerCase() ? sent.chat : undefined;
  }

  /** Remembers a received mail (durably: stored before this resolves). */
  async record(target: ReplyTarget): Promise<void> {
    await this.ready();
    await this.#store(target, `record mail ${target.id}`);
  }

  /** Remembers a mail the bot sends (durably: stored before this resolves). */
  async recordSent(mail: SentMail): Promise<void> {
    await this.ready();
    await this.#store({ kind: 'sent', id: mail.id, chat: mail.chat, to: mail.to.toLowerCase() }, `record sent mail ${mail.id}`);
  }

  async #store(entry: Entry, what: string): Promise<void> {
    const state = this.#options.state;
    try {
      if (state) await state.put(keyOf(entry.kind === 'sent' ? SENT : RECEIVED, entry.id), JSON.stringify(entry), { renew: true });
    } catch (error) {
      throw this.#options.storage?.failed(error, what) ?? error;
    }
    const dropped = this.#remember(entry);
    // Only the owner of the channel writes it, so what memory drops is what the store holds beyond the limit.
    if (state && dropped.length > 0) await state.delete(dropped).catch((error: unknown) => this.#log.warn({ err: error }, 'could not drop old mail thread records (dropped at the next start)'));
  }

  /** Remembers an entry; returns the store keys of the entries that fell out. */
  #remember(entry: Entry): string[] {
    if (entry.kind === 'sent') return this.#sent.setNewest(entry.id, { id: entry.id, chat: entry.chat, to: entry.to }).map((id) => keyOf(SENT, id));
    const dropped = this.#byId.setNewest(entry.id, entry).map((id) => keyOf(RECEIVED, id));
    this.#byChat.setNewest(entry.chat, entry);
    return dropped;
  }

  async #load(): Promise<void> {
    const state = this.#options.state;
    if (!state) return;
    await importStateFile({
      dir: this.#options.legacyDir,
      file: 'threads.jsonl',
      log: this.#log,
      stored: async () => (await state.any(RECEIVED)) || (await state.any(SENT)),
      load: async (text) => {
        this.#clear();
        for (const line of text.split('\n')) {
          if (line.trim() === '') continue;
          try {
            const entry = valid(JSON.parse(line));
            if (entry) this.#remember(entry);
          } catch {
            // a line cut short by a crash: skip it
          }
        }
        const kept: Entry[] = [...this.#byId.values(), ...[...this.#sent.values()].map((sent) => ({ kind: 'sent' as const, ...sent }))];
        for (const entry of kept) await state.put(keyOf(entry.kind === 'sent' ? SENT : RECEIVED, entry.id), JSON.stringify(entry), { renew: true });
        return kept.length;
      },
    });
    // Beyond the limit (a lower limit than before): dropped, oldest first.
    await state.prune(RECEIVED, { keep: this.#limit });
    await state.prune(SENT, { keep: this.#limit });
    const entries = [...(await state.list(RECEIVED)), ...(await state.list(SENT))];
    this.#clear();
    for (const { value } of entries) {
      try {
        const entry = valid(JSON.parse(value));
        if (entry) this.#remember(entry);
      } catch {
        // not ours to read
      }
    }
  }

  #clear(): void {
    this.#byId.clear();
    this.#byChat.clear();
    this.#sent.clear();
  }
}

/** A line of the file as an entry, or undefined when it is not one. */
function valid(value: unknown): Entry | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const { kind, id, chat, to, address, name, subject, references } = value as Record<string, unknown>;
  if (typeof id !== 'string' || typeof chat !== 'string') return undefined;
  if (kind === 'sent') return typeof to === 'string' ? { kind, id, chat, to } : undefined;
  if (kind !== undefined || typeof address !== 'string') return undefined; // `kind`: written by a later version, not ours to read
  return {
    id,
    chat,
    address,
    ...(typeof name === 'string' ? { name } : {}),
    subject: typeof subject === 'string' ? subject : '',
    references: Array.isArray(references) ? references.filter((reference): reference is string => typeof reference === 'string') : [],
  };
}
