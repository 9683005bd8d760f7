/**
 * Approvals for risky tool calls, asked in the conversation itself. A paused turn is stored
 * in SQLite (so the question survives a restart) and resumed by the same person's answer:
 * yes, no or always ("always" is remembered for that exact call summary). The model can
 * never approve its own call: only an inbound message from the person resumes the turn.
 */
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

export class ApprovalStore {
  readonly #get;
  readonly #save;
  readonly #clear;
  readonly #isAlways;
  readonly #addAlways;

  constructor(db: Db) {
    this.#get = db.prepare<[string], { conversation: string; origin_turn: number; channel: string; sender_id: string; state: string }>(
      'SELECT conversation, origin_turn, channel, sender_id, state FROM approvals_pending WHERE conversation = ?',
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

  pending(conversation: string): PendingApproval | undefined {
    const row = this.#get.get(conversation);
    if (!row) return undefined;
    return { conversation: row.conversation, originTurn: row.origin_turn, channel: row.channel, senderId: row.sender_id, paused: JSON.parse(row.state) as PausedTurn };
  }

  save(pending: PendingApproval): void {
    this.#save.run(pending.conversation, pending.originTurn, pending.channel, pending.senderId, JSON.stringify(pending.paused), Date.now());
  }

  clear(conversation: string): void {
    this.#clear.run(conversation);
  }

  isAlways(channel: string, senderId: string, summary: string): boolean {
    return this.#isAlways.get(channel, senderId, summary) !== undefined;
  }

  addAlways(channel: string, senderId: string, summaries: readonly string[]): void {
    for (const summary of summaries) this.#addAlways.run(channel, senderId, summary, Date.now());
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
