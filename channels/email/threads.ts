/**
 * The channel's record of mail threads, persisted in its state directory so that it survives
 * a restart (or a crash mid-turn):
 *
 * - per received mail, what a reply to it needs (whom, subject, Message-ID, References) and
 *   the thread it belongs to — written before the mail is pushed to the runtime;
 * - per mail the bot sent, its Message-ID and the thread it belongs to — written before the
 *   mail is handed to SMTP, so that a reply naming only the bot's mail (terse clients put just
 *   that in In-Reply-To / References) continues the thread.
 *
 * The file is JSON lines, appended to; the latest entry for an id wins. Bounded: at most
 * `limit` (default 5,000) received and `limit` sent mails are kept, in memory and in the file
 * — the oldest are dropped first, and the file is compacted to what is kept when it grows past
 * twice that. A reply to a sent mail older than that is looked up in the Sent folder instead.
 * One file for both kinds of entry: a sent entry is `{"kind":"sent", …}`; a received entry has
 * no `kind` (the format before sent mail was recorded, which is still read as it is).
 */
import { appendFileSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

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

/**
 * The record described above: lookups in memory (bounded), every change appended to the file
 * before the method returns. The one place the channel's thread state lives, so that moving
 * channel state behind a storage interface later swaps this class and nothing else.
 */
export class ThreadBook {
  readonly #file: string | undefined;
  readonly #limit: number;
  readonly #byId = new Map<string, ReplyTarget>();
  readonly #byChat = new Map<string, ReplyTarget>();
  readonly #sent = new Map<string, SentMail>();
  #lines = 0;

  /** `dir` undefined: in memory only. `limit`: most received and most sent mails kept (each). */
  constructor(dir: string | undefined, limit = 5000) {
    if (!Number.isInteger(limit) || limit < 1) throw new TypeError(`limit must be a positive integer, got ${limit}`);
    this.#file = dir === undefined ? undefined : join(dir, 'threads.jsonl');
    this.#limit = limit;
    if (this.#file) this.#load(this.#file);
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

  /** Remembers a received mail (durably: written to the file before this returns). */
  record(target: ReplyTarget): void {
    this.#remember(target);
    this.#append(target);
  }

  /** Remembers a mail the bot sends (durably: written to the file before this returns). */
  recordSent(mail: SentMail): void {
    const entry: Entry = { kind: 'sent', id: mail.id, chat: mail.chat, to: mail.to.toLowerCase() };
    this.#remember(entry);
    this.#append(entry);
  }

  #append(entry: Entry): void {
    if (!this.#file) return;
    appendFileSync(this.#file, `${JSON.stringify(entry)}\n`, { mode: 0o600 });
    this.#lines++;
    if (this.#tooLong()) this.#compact(this.#file);
  }

  /** Over twice the lines it keeps (at least `limit`): compacting costs one write per as many appends. */
  #tooLong(): boolean {
    return this.#lines > 2 * Math.max(this.#limit, this.#byId.size + this.#sent.size);
  }

  #remember(entry: Entry): void {
    if (entry.kind === 'sent') {
      refresh(this.#sent, entry.id, { id: entry.id, chat: entry.chat, to: entry.to }, this.#limit);
      return;
    }
    refresh(this.#byId, entry.id, entry, this.#limit);
    refresh(this.#byChat, entry.chat, entry, this.#limit);
  }

  #load(file: string): void {
    let content: string;
    try {
      content = readFileSync(file, 'utf8');
    } catch {
      return; // first start
    }
    for (const line of content.split('\n')) {
      if (line.trim() === '') continue;
      this.#lines++;
      try {
        const entry = valid(JSON.parse(line));
        if (entry) this.#remember(entry);
      } catch {
        // a line cut short by a crash: skip it
      }
    }
    if (this.#tooLong()) this.#compact(file);
  }

  #compact(file: string): void {
    const temporary = `${file}.tmp`;
    const entries: Entry[] = [...this.#byId.values(), ...[...this.#sent.values()].map((sent) => ({ kind: 'sent' as const, ...sent }))];
    writeFileSync(temporary, entries.map((entry) => `${JSON.stringify(entry)}\n`).join(''), { mode: 0o600 });
    renameSync(temporary, file);
    this.#lines = entries.length;
  }
}

/** Sets `key` as the newest entry of `map`, dropping the oldest beyond `limit`. */
function refresh<V>(map: Map<string, V>, key: string, value: V, limit: number): void {
  map.delete(key);
  map.set(key, value);
  while (map.size > limit) map.delete(map.keys().next().value!);
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
