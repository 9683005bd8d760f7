/** Per-conversation settings people change from the chat (`/model`). */
import type { Sql } from './sql.ts';

export class ConversationSettings {
  readonly #sql: Sql;

  constructor(sql: Sql) {
    this.#sql = sql;
  }

  /** The same settings inside a transaction (see Sql.transaction). */
  in(tx: Sql): ConversationSettings {
    return new ConversationSettings(tx);
  }

  /** The model chosen for this conversation, if one was. */
  async model(conversation: string): Promise<string | undefined> {
    return (await this.#sql.get<{ model: string | null }>('SELECT model FROM conversation_settings WHERE conversation = ?', [conversation]))?.model ?? undefined;
  }

  async setModel(conversation: string, model: string | undefined): Promise<void> {
    await this.#sql.run(
      'INSERT INTO conversation_settings (conversation, model) VALUES (?, ?) ON CONFLICT (conversation) DO UPDATE SET model = excluded.model',
      [conversation, model ?? null],
    );
  }
}

/** The message streamed during a turn, remembered so a re-run (after a crash) edits it instead of starting another. */
export class Drafts {
  readonly #sql: Sql;

  constructor(sql: Sql) {
    this.#sql = sql;
  }

  in(tx: Sql): Drafts {
    return new Drafts(tx);
  }

  async get(seq: number): Promise<string | undefined> {
    return (await this.#sql.get<{ message_id: string }>('SELECT message_id FROM drafts WHERE inbox_seq = ?', [seq]))?.message_id;
  }

  async set(seq: number, messageId: string): Promise<void> {
    await this.#sql.run('INSERT INTO drafts (inbox_seq, message_id) VALUES (?, ?) ON CONFLICT (inbox_seq) DO UPDATE SET message_id = excluded.message_id', [seq, messageId]);
  }

  async delete(seq: number): Promise<void> {
    await this.#sql.run('DELETE FROM drafts WHERE inbox_seq = ?', [seq]);
  }
}
