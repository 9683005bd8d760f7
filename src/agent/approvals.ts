/**
 * Approvals for risky tool calls, asked in the conversation itself. A paused turn is stored
 * in the database (so the question survives a restart) and resumed by the same person's answer:
 * yes, no or always ("always" is remembered for that exact call summary). The model can
 * never approve its own call: only an inbound message from the person resumes the turn.
 */
import { outlived, systemClock, type Clock } from '../clock.ts';
import type { ChatMessage } from '../provider.ts';
import type { Sql } from '../store/sql.ts';
import type { PreparedCall } from './tool-runner.ts';

/** A turn stopped at a model response whose calls wait for the person. */
export interface PausedTurn {
  readonly turn: readonly ChatMessage[];
  readonly calls: readonly PreparedCall[];
  /** The model call that produced `calls`. */
  readonly iteration: number;
  readonly xml: boolean;
}

export interface PendingApproval {
  readonly conversation: string;
  /** Inbox seq of the message whose turn paused (a re-run of it after a crash starts afresh). */
  readonly originTurn: number;
  readonly channel: string;
  readonly senderId: string;
  readonly paused: PausedTurn;
}

export type Answer = 'yes' | 'no' | 'always';

export interface ApprovalStoreOptions {
  /**
   * How long a question can be answered; after that it is dropped and the person's next
   * message is an ordinary one (a "yes" a week later runs nothing). Counted so that no clock
   * step stretches it (see `outlived` in src/clock.ts). @default 86_400_000 (24 h)
   */
  readonly ttlMs?: number;
  /** @default systemClock */
  readonly clock?: Clock;
}

export class ApprovalStore {
  readonly #sql: Sql;
  readonly #ttlMs: number;
  readonly #clock: Clock;
  /** Monotonic time this process first saw each pending question, by conversation and stamp (shared with `in(tx)` views). */
  readonly #seen: Map<string, number>;

  constructor(sql: Sql, options: ApprovalStoreOptions = {}, seen = new Map<string, number>()) {
    this.#ttlMs = options.ttlMs ?? 86_400_000;
    if (!(this.#ttlMs > 0)) throw new TypeError(`ApprovalStore: ttlMs must be positive, got ${String(options.ttlMs)}`);
    this.#clock = options.clock ?? systemClock;
    this.#sql = sql;
    this.#seen = seen;
  }

  /** The same store inside a transaction (see Sql.transaction). */
  in(tx: Sql): ApprovalStore {
    return new ApprovalStore(tx, { ttlMs: this.#ttlMs, clock: this.#clock }, this.#seen);
  }

  /** The conversation's open question; undefined when there is none or it expired (then it is dropped). */
  async pending(conversation: string): Promise<PendingApproval | undefined> {
    const row = await this.#sql.get<{ conversation: string; origin_turn: number; channel: string; sender_id: string; state: string; created_at: number }>(
      'SELECT conversation, origin_turn, channel, sender_id, state, created_at FROM approvals_pending WHERE conversation = ?',
      [conversation],
    );
    if (!row) return undefined;
    const key = `${conversation}\n${row.created_at}`;
    const seen = this.#seen.get(key) ?? this.#clock.monotonic();
    if (outlived(row.created_at, this.#ttlMs, this.#clock, seen)) {
      await this.clear(conversation);
      return undefined;
    }
    this.#seen.set(key, seen);
    return { conversation: row.conversation, originTurn: row.origin_turn, channel: row.channel, senderId: row.sender_id, paused: JSON.parse(row.state) as PausedTurn };
  }

  async save(pending: PendingApproval): Promise<void> {
    const now = this.#clock.now();
    this.#forget(pending.conversation);
    this.#seen.set(`${pending.conversation}\n${now}`, this.#clock.monotonic());
    await this.#sql.run(
      `INSERT INTO approvals_pending (conversation, origin_turn, channel, sender_id, state, created_at) VALUES (?, ?, ?, ?, ?, ?)
       ON CONFLICT (conversation) DO UPDATE SET origin_turn = excluded.origin_turn, channel = excluded.channel, sender_id = excluded.sender_id,
         state = excluded.state, created_at = excluded.created_at`,
      [pending.conversation, pending.originTurn, pending.channel, pending.senderId, JSON.stringify(pending.paused), now],
    );
  }

  async clear(conversation: string): Promise<void> {
    this.#forget(conversation);
    await this.#sql.run('DELETE FROM approvals_pending WHERE conversation = ?', [conversation]);
  }

  #forget(conversation: string): void {
    for (const key of this.#seen.keys()) if (key.startsWith(`${conversation}\n`)) this.#seen.delete(key);
  }

  async isAlways(channel: string, senderId: string, summary: string): Promise<boolean> {
    return (await this.#sql.get('SELECT 1 AS one FROM approvals_always WHERE channel = ? AND sender_id = ? AND summary = ?', [channel, senderId, summary])) !== undefined;
  }

  async addAlways(channel: string, senderId: string, summaries: readonly string[]): Promise<void> {
    for (const summary of summaries) {
      await this.#sql.run('INSERT INTO approvals_always (channel, sender_id, summary, created_at) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING', [channel, senderId, summary, this.#clock.now()]);
    }
  }
}

/** Reads a person's answer to an approval question; undefined when it is not one. */
export function parseAnswer(text: string): Answer | undefined {
  const word = text.trim().toLowerCase().replace(/[.!]+$/, '');
  if (/^(always|always allow|yes,? always)$/.test(word)) return 'always';
  if (/^(y|yes|yep|yeah|ok|okay|approve|approved|go ahead|do it|sure)$/.test(word)) return 'yes';
  if (/^(n|no|nope|deny|denied|stop|cancel|don'?t)$/.test(word)) return 'no';
  return undefined;
}

/** The question sent to the person. */
export function approvalQuestion(summaries: readonly string[]): string {
  const list = summaries.map((summary) => `• ${summary}`).join('\n');
  return `I need your approval before I run ${summaries.length === 1 ? 'this' : 'these'}:\n${list}\nReply yes, no, or always (always = never ask again for exactly this).`;
}
