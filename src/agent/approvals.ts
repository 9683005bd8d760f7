/**
 * Approvals for risky tool calls, asked in the conversation itself. A paused turn is stored
 * in SQLite (so the question survives a restart) and resumed by the same person's answer:
 * yes, no or always ("always" is remembered for that exact call summary). The model can
 * never approve its own call: only an inbound message from the person resumes the turn.
 */
import { outlived, systemClock, type Clock } from '../clock.ts';
import type { ChatMessage } from '../provider.ts';
import type { Db } from '../store/db.ts';
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
  readonly #get;
  readonly #save;
  readonly #clear;
  readonly #isAlways;
  readonly #addAlways;
  readonly #ttlMs: number;
  readonly #clock: Clock;
  /** Monotonic time this process first saw each pending question, by conversation and stamp. */
  readonly #seen = new Map<string, number>();

  constructor(db: Db, options: ApprovalStoreOptions = {}) {
    this.#ttlMs = options.ttlMs ?? 86_400_000;
    if (!(this.#ttlMs > 0)) throw new TypeError(`ApprovalStore: ttlMs must be positive, got ${String(options.ttlMs)}`);
    this.#clock = options.clock ?? systemClock;
    this.#get = db.prepare<[string], { conversation: string; origin_turn: number; channel: string; sender_id: string; state: string; created_at: number }>(
      'SELECT conversation, origin_turn, channel, sender_id, state, created_at FROM approvals_pending WHERE conversation = ?',
    );
    this.#save = db.prepare<[string, number, string, string, string, number]>(
      'INSERT OR REPLACE INTO approvals_pending (conversation, origin_turn, channel, sender_id, state, created_at) VALUES (?, ?, ?, ?, ?, ?)',
    );
    this.#clear = db.prepare<[string]>('DELETE FROM approvals_pending WHERE conversation = ?');
    this.#isAlways = db.prepare<[string, string, string], { one: number }>(
      'SELECT 1 AS one FROM approvals_always WHERE channel = ? AND sender_id = ? AND summary = ?',
    );
    this.#addAlways = db.prepare<[string, string, string, number]>(
      'INSERT OR IGNORE INTO approvals_always (channel, sender_id, summary, created_at) VALUES (?, ?, ?, ?)',
    );
  }

  /** The conversation's open question; undefined when there is none or it expired (then it is dropped). */
  pending(conversation: string): PendingApproval | undefined {
    const row = this.#get.get(conversation);
    if (!row) return undefined;
    const key = `${conversation}\n${row.created_at}`;
    const seen = this.#seen.get(key) ?? this.#clock.monotonic();
    if (outlived(row.created_at, this.#ttlMs, this.#clock, seen)) {
      this.clear(conversation);
      return undefined;
    }
    this.#seen.set(key, seen);
    return { conversation: row.conversation, originTurn: row.origin_turn, channel: row.channel, senderId: row.sender_id, paused: JSON.parse(row.state) as PausedTurn };
  }

  save(pending: PendingApproval): void {
    const now = this.#clock.now();
    this.#forget(pending.conversation);
    this.#seen.set(`${pending.conversation}\n${now}`, this.#clock.monotonic());
    this.#save.run(pending.conversation, pending.originTurn, pending.channel, pending.senderId, JSON.stringify(pending.paused), now);
  }

  clear(conversation: string): void {
    this.#forget(conversation);
    this.#clear.run(conversation);
  }

  #forget(conversation: string): void {
    for (const key of this.#seen.keys()) if (key.startsWith(`${conversation}\n`)) this.#seen.delete(key);
  }

  isAlways(channel: string, senderId: string, summary: string): boolean {
    return this.#isAlways.get(channel, senderId, summary) !== undefined;
  }

  addAlways(channel: string, senderId: string, summaries: readonly string[]): void {
    for (const summary of summaries) this.#addAlways.run(channel, senderId, summary, this.#clock.now());
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
