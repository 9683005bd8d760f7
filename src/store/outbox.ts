/**
 * The outbox: a reply is recorded (in the turn's transaction) before it is sent and marked
 * sent after, so after a crash every recorded-but-unsent reply is sent once more.
 */
import type { OutboundFile, OutboundMessage } from '../channel.ts';
import { conversationKey } from '../conversation.ts';
import type { Db } from './db.ts';

/** A recorded reply: its text, the files that go after it, and the streamed draft it finalises. */
export interface Reply extends OutboundMessage {
  readonly files?: readonly OutboundFile[];
  /** Platform id of the message streamed during the turn; the reply's first part replaces its text. */
  readonly draftId?: string;
}

export interface OutboxEntry {
  readonly id: number;
  readonly conversation: string;
  readonly message: Reply;
  readonly attempts: number;
  /** Units (text parts, then files) already sent. */
  readonly progress: number;
}

interface Row {
  id: number;
  conversation: string;
  payload: string;
  attempts: number;
  progress: number;
}

const toEntry = (row: Row): OutboxEntry => ({
  id: row.id,
  conversation: row.conversation,
  attempts: row.attempts,
  progress: row.progress,
  message: JSON.parse(row.payload) as Reply,
});

export class Outbox {
  readonly #add;
  readonly #pending;
  readonly #conversations;
  readonly #sent;
  readonly #attempt;
  readonly #dead;
  readonly #count;
  readonly #prune;
  readonly #progress;

  constructor(db: Db) {
    this.#add = db.prepare<[number | null, string, string, string, number], { id: number }>(
      'INSERT INTO outbox (inbox_seq, channel, conversation, payload, created_at) VALUES (?, ?, ?, ?, ?) RETURNING id',
    );
    this.#pending = db.prepare<[string], Row>(
      "SELECT id, conversation, payload, attempts, progress FROM outbox WHERE conversation = ? AND status = 'pending' ORDER BY id",
    );
    this.#conversations = db.prepare<[], { conversation: string; channel: string }>(
      "SELECT conversation, channel, min(id) AS first FROM outbox WHERE status = 'pending' GROUP BY conversation ORDER BY first",
    );
    this.#sent = db.prepare<[number, number]>("UPDATE outbox SET status = 'sent', sent_at = ?, attempts = attempts + 1 WHERE id = ?");
    this.#attempt = db.prepare<[string, number]>('UPDATE outbox SET attempts = attempts + 1, last_error = ? WHERE id = ?');
    this.#dead = db.prepare<[string, number, number]>(
      "UPDATE outbox SET status = 'dead', last_error = ?, sent_at = ?, attempts = attempts + 1 WHERE id = ?",
    );
    this.#count = db.prepare<[], { n: number }>("SELECT count(*) AS n FROM outbox WHERE status = 'pending'");
    this.#prune = db.prepare<[number]>("DELETE FROM outbox WHERE status <> 'pending' AND sent_at < ?");
    this.#progress = db.prepare<[number, number]>('UPDATE outbox SET progress = ? WHERE id = ?');
  }

  /** Records that the first `units` parts of a reply are out (so a retry resumes after them). */
  markProgress(id: number, units: number): void {
    this.#progress.run(units, id);
  }

  /** Records a reply to send (call inside the turn's transaction). */
  add(message: Reply, inboxSeq: number | null, now = Date.now()): number {
    return this.#add.get(inboxSeq, message.channel, conversationKey(message), JSON.stringify(message), now)!.id;
  }

  /** Unsent replies of one conversation, in the order they must go out. */
  pending(conversation: string): OutboxEntry[] {
    return this.#pending.all(conversation).map(toEntry);
  }

  /** Conversations with unsent replies, the longest-waiting first. */
  pendingConversations(): Array<{ conversation: string; channel: string }> {
    return this.#conversations.all();
  }

  /** How many replies wait to be sent. */
  pendingCount(): number {
    return this.#count.get()!.n;
  }

  markSent(id: number, now = Date.now()): void {
    this.#sent.run(now, id);
  }

  /** Counts a failed try; the reply stays pending. */
  markAttempt(id: number, error: string): void {
    this.#attempt.run(error, id);
  }

  /** Gives up on a reply that can never be delivered (kept for inspection until pruned). */
  markDead(id: number, error: string, now = Date.now()): void {
    this.#dead.run(error, now, id);
  }

  prune(before: number): number {
    return this.#prune.run(before).changes;
  }
}
