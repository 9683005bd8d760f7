/**
 * What a reply needs to know about the mail it answers (whom, subject, Message-ID,
 * References), kept per received Message-ID and per thread, and persisted in the channel's
 * state directory so that a reply after a restart (or a crash mid-turn) is still a proper
 * threaded reply. Entries are written before the mail is pushed to the runtime.
 *
 * The file is JSON lines, appended to; the latest entry for an id wins; it is compacted to
 * the newest `limit` entries when it grows past twice that.
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

export class ThreadBook {
  readonly #file: string | undefined;
  readonly #limit: number;
  readonly #byId = new Map<string, ReplyTarget>();
  readonly #byChat = new Map<string, ReplyTarget>();
  #lines = 0;

  /** `dir` undefined: in memory only. */
  constructor(dir: string | undefined, limit = 5000) {
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

  /** Remembers a received mail (durably: written to the file before this returns). */
  record(target: ReplyTarget): void {
    this.#remember(target);
    if (!this.#file) return;
    appendFileSync(this.#file, `${JSON.stringify(target)}\n`, { mode: 0o600 });
    if (++this.#lines > this.#limit * 2) this.#compact(this.#file);
  }

  #remember(target: ReplyTarget): void {
    this.#byId.delete(target.id);
    this.#byId.set(target.id, target);
    this.#byChat.delete(target.chat);
    this.#byChat.set(target.chat, target);
    while (this.#byId.size > this.#limit) this.#byId.delete(this.#byId.keys().next().value!);
    while (this.#byChat.size > this.#limit) this.#byChat.delete(this.#byChat.keys().next().value!);
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
        const target = JSON.parse(line) as ReplyTarget;
        if (typeof target.id === 'string' && typeof target.chat === 'string' && typeof target.address === 'string') this.#remember(target);
      } catch {
        // a line cut short by a crash: skip it
      }
    }
    if (this.#lines > this.#limit * 2) this.#compact(file);
  }

  #compact(file: string): void {
    const temporary = `${file}.tmp`;
    writeFileSync(temporary, [...this.#byId.values()].map((target) => `${JSON.stringify(target)}\n`).join(''), { mode: 0o600 });
    renameSync(temporary, file);
    this.#lines = this.#byId.size;
  }
}
