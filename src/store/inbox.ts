/**
 * The inbox: every inbound message is written here once (unique on channel + platform id)
 * before it is queued, so a crash never loses it and a redelivery is never answered twice.
 */
import type { InboundMessage } from '../channel.ts';
import { conversationKey } from '../conversation.ts';
import { alone, type Sql } from './sql.ts';

/**
 * A message's inbox row, as every path that stores one writes it (Inbox.accept; the cluster's
 * one-statement accept wraps it with its turn's job): nothing for a message stored before.
 * Parameters: {@link inboxRow}. Add `RETURNING …`.
 */
export const INBOX_INSERT = `INSERT INTO inbox (channel, platform_id, conversation, payload, received_at) VALUES (?, ?, ?, ?, ?)
       ON CONFLICT (channel, platform_id) DO NOTHING`;

/** {@link INBOX_INSERT}'s parameters for `message`, received at `now` (epoch ms). */
export function inboxRow(message: InboundMessage, now: number): [string, string, string, string, number] {
  return [message.channel, message.id, conversationKey(message), JSON.stringify(message), now];
}

export interface InboxEntry {
  readonly seq: number;
  readonly conversation: string;
  readonly message: InboundMessage;
}

const FINISH = "UPDATE inbox SET status = ?, done_at = ?, error = ? WHERE seq = ? AND status = 'queued'";

/**
 * {@link FINISH} on PostgreSQL inside a turn's commit: a message no longer queued fails the
 * statement on the server (SQLSTATE {@link NOT_QUEUED}, raised by a function of the schema,
 * src/store/postgres/schema.ts), and with it the transaction — so its COMMIT need not wait for
 * this answer: it goes out in the same write and answers ROLLBACK.
 */
const FINISH_OR_FAIL = `WITH finished AS (${FINISH} RETURNING seq)
  SELECT CASE WHEN EXISTS (SELECT 1 FROM finished) THEN 1 ELSE switchboard_not_queued(?) END AS finished`;

/** The SQLSTATE of {@link Inbox.finish}'s failure on PostgreSQL: the message no longer waits. */
const NOT_QUEUED = 'SB001';

/** Whether `error` is PostgreSQL's answer to {@link Inbox.finish} of a message that no longer waits. */
export function notQueued(error: unknown): boolean {
  return (error as { code?: unknown } | null)?.code === NOT_QUEUED;
}

export class Inbox {
  readonly #sql: Sql;

  constructor(sql: Sql) {
    this.#sql = sql;
  }

  /** The same inbox inside a transaction (see Sql.transaction). */
  in(tx: Sql): Inbox {
    return new Inbox(tx);
  }

  /** Marks a message the policy let go unanswered; `reason` says why ('not addressed' ones stay as context). */
  async markIgnored(seq: number, reason: string, now = Date.now()): Promise<boolean> {
    return (await this.#sql.run(FINISH, ['ignored', now, reason, seq])) === 1;
  }

  /**
   * Unaddressed messages since the conversation's last turn (in it, or in its parent chat when
   * it is a thread), oldest first: what was said around the bot before it was addressed.
   */
  async contextBefore(seq: number, conversation: string, parent: string, limit = 20): Promise<InboundMessage[]> {
    const rows = await this.#sql.all<{ payload: string }>(
      `SELECT payload FROM inbox
        WHERE conversation IN (?, ?) AND status = 'ignored' AND error = 'not addressed' AND seq < ?
          AND seq > coalesce((SELECT max(seq) FROM inbox WHERE conversation = ? AND status IN ('done', 'failed') AND seq < ?), 0)
        ORDER BY seq DESC LIMIT ?`,
      [conversation, parent, seq, conversation, seq, limit],
    );
    return rows.map((row) => JSON.parse(row.payload) as InboundMessage).reverse();
  }

  /** Stores a message; returns its entry, or undefined when it was stored before (a redelivery). */
  async accept(message: InboundMessage, now = Date.now()): Promise<InboxEntry | undefined> {
    const params = inboxRow(message, now);
    const row = await this.#sql.get<{ seq: number }>(`${INBOX_INSERT} RETURNING seq`, params);
    return row ? { seq: row.seq, conversation: params[2], message } : undefined;
  }

  /**
   * The seq and conversation of a stored message that still waits for an answer: a redelivery
   * of one whose accept was applied though its caller was told it failed (a connection lost
   * after COMMIT) must still get its turn.
   */
  async waiting(message: InboundMessage): Promise<{ seq: number; conversation: string } | undefined> {
    return this.#sql.get<{ seq: number; conversation: string }>("SELECT seq, conversation FROM inbox WHERE channel = ? AND platform_id = ? AND status = 'queued'", [message.channel, message.id]);
  }

  /** The entry with this seq if it still waits for an answer. */
  async queuedEntry(seq: number): Promise<InboxEntry | undefined> {
    const row = await this.#sql.get<{ seq: number; conversation: string; payload: string; status: string }>(
      'SELECT seq, conversation, payload, status FROM inbox WHERE seq = ?',
      [seq],
    );
    if (!row || row.status !== 'queued') return undefined;
    return { seq: row.seq, conversation: row.conversation, message: JSON.parse(row.payload) as InboundMessage };
  }

  /** Every accepted-but-unanswered message, oldest first (used on start-up). */
  queued(): Promise<Array<{ seq: number; conversation: string }>> {
    return this.#sql.all("SELECT seq, conversation FROM inbox WHERE status = 'queued' ORDER BY seq");
  }

  /** How many messages wait for an answer. */
  async queuedCount(): Promise<number> {
    return (await this.#sql.get<{ n: number }>("SELECT count(*) AS n FROM inbox WHERE status = 'queued'"))!.n;
  }

  /** Marks a message answered. Returns false when it was not waiting (already finished). */
  async markDone(seq: number, now = Date.now()): Promise<boolean> {
    return (await this.#sql.run(FINISH, ['done', now, null, seq])) === 1;
  }

  /** Marks a message as one that could not be answered; `error` says why. */
  async markFailed(seq: number, error: string, now = Date.now()): Promise<boolean> {
    return (await this.#sql.run(FINISH, ['failed', now, error, seq])) === 1;
  }

  /**
   * Ends a queued message inside a turn's transaction: false when it no longer waits. On
   * PostgreSQL that case also fails the statement on the server, so the transaction cannot commit
   * whatever was issued with it (see FINISH_OR_FAIL); the caller rolls back either way.
   */
  async finish(seq: number, end: 'done' | { readonly failed: string }, now = Date.now()): Promise<boolean> {
    const [status, error] = end === 'done' ? ['done', null] : ['failed', end.failed];
    if (this.#sql.dialect !== 'postgres') return (await this.#sql.run(FINISH, [status, now, error, seq])) === 1;
    try {
      await this.#sql.get(FINISH_OR_FAIL, [status, now, error, seq, seq]);
      return true;
    } catch (failure) {
      if (notQueued(failure)) return false;
      throw failure;
    }
  }

  /**
   * Forgets finished messages older than `before`. A platform redelivering a message after
   * that would be answered again, so keep the window longer than any platform's redelivery.
   */
  prune(before: number): Promise<number> {
    // a day's messages at once: on a connection of its own, not holding up the turns' statements
    return alone(this.#sql).run("DELETE FROM inbox WHERE status <> 'queued' AND done_at < ?", [before]);
  }
}
