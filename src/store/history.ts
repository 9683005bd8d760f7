/** Per-conversation history: the messages of the last N turns, oldest first. */
import type { ChatMessage } from '../provider.ts';
import type { Db } from './db.ts';

export class History {
  readonly #append;
  readonly #recent;
  readonly #clear;

  constructor(db: Db) {
    this.#append = db.prepare<[string, number, string, number]>(
      'INSERT INTO history (conversation, turn, message, created_at) VALUES (?, ?, ?, ?)',
    );
    this.#recent = db.prepare<[string, string, number], { message: string }>(
      `SELECT message FROM history
        WHERE conversation = ? AND turn >= coalesce((
          SELECT min(turn) FROM (SELECT DISTINCT turn FROM history WHERE conversation = ? ORDER BY turn DESC LIMIT ?)
        ), 0)
        ORDER BY turn, id`,
    );
    this.#clear = db.prepare<[string]>('DELETE FROM history WHERE conversation = ?');
  }

  /** Messages of the last `turns` turns of a conversation, oldest first. */
  recent(conversation: string, turns: number): ChatMessage[] {
    if (turns <= 0) return [];
    return this.#recent.all(conversation, conversation, turns).map((row) => JSON.parse(row.message) as ChatMessage);
  }

  /** Appends one turn's messages (call inside the turn's transaction). */
  append(conversation: string, turn: number, messages: readonly ChatMessage[], now = Date.now()): void {
    for (const message of messages) this.#append.run(conversation, turn, JSON.stringify(message), now);
  }

  /** Forgets a conversation's history (e.g. `/new`). */
  clear(conversation: string): number {
    return this.#clear.run(conversation).changes;
  }
}
