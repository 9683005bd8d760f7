/** Per-conversation history: the messages of the last N turns, oldest first. */
import type { ChatMessage } from '../provider.ts';
import type { Sql } from './sql.ts';

export class History {
  readonly #sql: Sql;

  constructor(sql: Sql) {
    this.#sql = sql;
  }

  /** The same history inside a transaction (see Sql.transaction). */
  in(tx: Sql): History {
    return new History(tx);
  }

  /** Messages of the last `turns` turns of a conversation, oldest first. */
  async recent(conversation: string, turns: number): Promise<ChatMessage[]> {
    if (turns <= 0) return [];
    const rows = await this.#sql.all<{ message: string }>(
      `SELECT message FROM history
        WHERE conversation = ? AND turn >= coalesce((
          SELECT min(turn) FROM (SELECT DISTINCT turn FROM history WHERE conversation = ? ORDER BY turn DESC LIMIT ?) AS latest
        ), 0)
        ORDER BY turn, id`,
      [conversation, conversation, turns],
    );
    return rows.map((row) => JSON.parse(row.message) as ChatMessage);
  }

  /** Appends one turn's messages (call inside the turn's transaction). */
  async append(conversation: string, turn: number, messages: readonly ChatMessage[], now = Date.now()): Promise<void> {
    if (messages.length === 0) return;
    // one statement for the turn's messages (a round trip each on PostgreSQL), in their order
    await this.#sql.run(
      `INSERT INTO history (conversation, turn, message, created_at) VALUES ${messages.map(() => '(?, ?, ?, ?)').join(', ')}`,
      messages.flatMap((message) => [conversation, turn, JSON.stringify(message), now]),
    );
  }

  /** Forgets a conversation's history (e.g. `/new`). */
  clear(conversation: string): Promise<number> {
    return this.#sql.run('DELETE FROM history WHERE conversation = ?', [conversation]);
  }
}
