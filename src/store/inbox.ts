/**
 * The inbox: every inbound message is written here once (unique on channel + platform id)
 * before it is queued, so a crash never loses it and a redelivery is never answered twice.
 */
import type { InboundMessage } from '../channel.ts';
import { conversationKey } from '../conversation.ts';
import type { Db } from './db.ts';

export interface InboxEntry {
  readonly seq: number;
  readonly conversation: string;
  readonly message: InboundMessage;
}

export class Inbox {
  readonly #insert;
  readonly #get;
  readonly #queued;
  readonly #finish;
  readonly #prune;
  readonly #context;

  constructor(db: Db) {
    this.#insert = db.prepare<[string, string, string, string, number], { seq: number }>(
      `INSERT INTO inbox (channel, platform_id, conversation, payload, received_at) VALUES (?, ?, ?, ?, ?)
       ON CONFLICT (channel, platform_id) DO NOTHING RETURNING seq`,
    );
    this.#get = db.prepare<[number], { seq: number; conversation: string; payload: string; status: string }>(
      'SELECT seq, conversation, payload, status FROM inbox WHERE seq = ?',
    );
    this.#queued = db.prepare<[], { seq: number; conversation: string }>(
      "SELECT seq, conversation FROM inbox WHERE status = 'queued' ORDER BY seq",
    );
    this.#finish = db.prepare<[string, number, string | null, number]>(
      "UPDATE inbox SET status = ?, done_at = ?, error = ? WHERE seq = ? AND status = 'queued'",
    );
    this.#prune = db.prepare<[number]>("DELETE FROM inbox WHERE status <> 'queued' AND done_at < ?");
    this.#context = db.prepare<[string, string, number, string, number, number], { payload: string }>(
      `SELECT payload FROM inbox
        WHERE conversation IN (?, ?) AND status = 'ignored' AND error = 'not addressed' AND seq < ?
          AND seq > coalesce((SELECT max(seq) FROM inbox WHERE conversation = ? AND status IN ('done', 'failed') AND seq < ?), 0)
        ORDER BY seq DESC LIMIT ?`,
    );
  }

  /** Marks a message the policy let go unanswered; `reason` says why ('not addressed' ones stay as context). */
  markIgnored(seq: number, reason: string, now = Date.now()): boolean {
    return this.#finish.run('ignored', now, reason, seq).changes === 1;
  }

  /**
   * Unaddressed messages since the conversation's last turn (in it, or in its parent chat when
   * it is a thread), oldest first: what was said around the bot before it was addressed.
   */
  contextBefore(seq: number, conversation: string, parent: string, limit = 20): InboundMessage[] {
    return this.#context
      .all(conversation, parent, seq, conversation, seq, limit)
      .map((row) => JSON.parse(row.payload) as InboundMessage)
      .reverse();
  }

  /** Stores a message; returns its entry, or undefined when it was stored before (a redelivery). */
  accept(message: InboundMessage, now = Date.now()): InboxEntry | undefined {
    const conversation = conversationKey(message);
    const row = this.#insert.get(message.channel, message.id, conversation, JSON.stringify(message), now);
    return row ? { seq: row.seq, conversation, message } : undefined;
  }

  /** The entry with this seq if it still waits for an answer. */
  queuedEntry(seq: number): InboxEntry | undefined {
    const row = this.#get.get(seq);
    if (!row || row.status !== 'queued') return undefined;
    return { seq: row.seq, conversation: row.conversation, message: JSON.parse(row.payload) as InboundMessage };
  }

  /** Every accepted-but-unanswered message, oldest first (used on start-up). */
  queued(): Array<{ seq: number; conversation: string }> {
    return this.#queued.all();
  }

  /** Marks a message answered. Returns false when it was not waiting (already finished). */
  markDone(seq: number, now = Date.now()): boolean {
    return this.#finish.run('done', now, null, seq).changes === 1;
  }

  /** Marks a message as one that could not be answered; `error` says why. */
  markFailed(seq: number, error: string, now = Date.now()): boolean {
    return this.#finish.run('failed', now, error, seq).changes === 1;
  }

  /**
   * Forgets finished messages older than `before`. A platform redelivering a message after
   * that would be answered again, so keep the window longer than any platform's redelivery.
   */
  prune(before: number): number {
    return this.#prune.run(before).changes;
  }
}
