/** Per-conversation settings people change from the chat (`/model`). */
import type { Db } from './db.ts';

export class ConversationSettings {
  readonly #get;
  readonly #setModel;

  constructor(db: Db) {
    this.#get = db.prepare<[string], { model: string | null }>('SELECT model FROM conversation_settings WHERE conversation = ?');
    this.#setModel = db.prepare<[string, string | null]>(
      'INSERT INTO conversation_settings (conversation, model) VALUES (?, ?) ON CONFLICT (conversation) DO UPDATE SET model = excluded.model',
    );
  }

  /** The model chosen for this conversation, if one was. */
  model(conversation: string): string | undefined {
    return this.#get.get(conversation)?.model ?? undefined;
  }

  setModel(conversation: string, model: string | undefined): void {
    this.#setModel.run(conversation, model ?? null);
  }
}

/** The message streamed during a turn, remembered so a re-run (after a crash) edits it instead of starting another. */
export class Drafts {
  readonly #get;
  readonly #set;
  readonly #delete;

  constructor(db: Db) {
    this.#get = db.prepare<[number], { message_id: string }>('SELECT message_id FROM drafts WHERE inbox_seq = ?');
    this.#set = db.prepare<[number, string]>('INSERT OR REPLACE INTO drafts (inbox_seq, message_id) VALUES (?, ?)');
    this.#delete = db.prepare<[number]>('DELETE FROM drafts WHERE inbox_seq = ?');
  }

  get(seq: number): string | undefined {
    return this.#get.get(seq)?.message_id;
  }

  set(seq: number, messageId: string): void {
    this.#set.run(seq, messageId);
  }

  delete(seq: number): void {
    this.#delete.run(seq);
  }
}
