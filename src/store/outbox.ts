/**
 * The outbox: a reply is recorded (in the turn's transaction) before it is sent and marked
 * sent after, so after a crash every recorded-but-unsent reply is sent once more.
 */
import type { OutboundFile, OutboundMessage } from '../channel.ts';
import { conversationKey } from '../conversation.ts';
import { alone, type Sql } from './sql.ts';

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
  readonly #sql: Sql;

  constructor(sql: Sql) {
    this.#sql = sql;
  }

  /** The same outbox inside a transaction (see Sql.transaction). */
  in(tx: Sql): Outbox {
    return new Outbox(tx);
  }

  /** Records that the first `units` parts of a reply are out (so a retry resumes after them). */
  async markProgress(id: number, units: number): Promise<void> {
    await this.#sql.run('UPDATE outbox SET progress = ? WHERE id = ?', [units, id]);
  }

  /** Records a reply to send (call inside the turn's transaction). */
  async add(message: Reply, inboxSeq: number | null, now = Date.now()): Promise<number> {
    const row = await this.#sql.get<{ id: number }>(
      'INSERT INTO outbox (inbox_seq, channel, conversation, payload, created_at) VALUES (?, ?, ?, ?, ?) RETURNING id',
      [inboxSeq, message.channel, conversationKey(message), JSON.stringify(message), now],
    );
    return row!.id;
  }

  /** Unsent replies of one conversation, in the order they must go out. */
  async pending(conversation: string): Promise<OutboxEntry[]> {
    const rows = await this.#sql.all<Row>(
      "SELECT id, conversation, payload, attempts, progress FROM outbox WHERE conversation = ? AND status = 'pending' ORDER BY id",
      [conversation],
    );
    return rows.map(toEntry);
  }

  /** Conversations with unsent replies, the longest-waiting first. */
  pendingConversations(): Promise<Array<{ conversation: string; channel: string }>> {
    return this.#sql.all(
      "SELECT conversation, min(channel) AS channel, min(id) AS first FROM outbox WHERE status = 'pending' GROUP BY conversation ORDER BY first",
    );
  }

  /** How many replies wait to be sent. */
  async pendingCount(): Promise<number> {
    return (await this.#sql.get<{ n: number }>("SELECT count(*) AS n FROM outbox WHERE status = 'pending'"))!.n;
  }

  async markSent(id: number, now = Date.now()): Promise<void> {
    await this.#sql.run("UPDATE outbox SET status = 'sent', sent_at = ?, attempts = attempts + 1 WHERE id = ?", [now, id]);
  }

  /** Counts a failed try; the reply stays pending. */
  async markAttempt(id: number, error: string): Promise<void> {
    await this.#sql.run('UPDATE outbox SET attempts = attempts + 1, last_error = ? WHERE id = ?', [error, id]);
  }

  /** Gives up on a reply that can never be delivered (kept for inspection until pruned). */
  async markDead(id: number, error: string, now = Date.now()): Promise<void> {
    await this.#sql.run("UPDATE outbox SET status = 'dead', last_error = ?, sent_at = ?, attempts = attempts + 1 WHERE id = ?", [error, now, id]);
  }

  prune(before: number): Promise<number> {
    // a day's replies at once: on a connection of its own, not holding up the turns' statements
    return alone(this.#sql).run("DELETE FROM outbox WHERE status <> 'pending' AND sent_at < ?", [before]);
  }
}
