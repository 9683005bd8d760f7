/**
 * Groups upgraded to supergroups, kept in the channel state (ChannelContext.state, keys
 * `migrated:<old chat id>` → new chat id).
 *
 * Telegram upgrades a basic group to a supergroup (a new chat with a new id) when someone turns
 * on an admin feature or it grows large. From then on every write to the old id answers 400
 * "Bad Request: group chat was upgraded to a supergroup chat" with
 * `parameters.migrate_to_chat_id` (tdlib/telegram-bot-api, telegram-bot-api/Client.cpp,
 * check_chat_access), and the bot receives two service messages: `migrate_to_chat_id` in the
 * old group and `migrate_from_chat_id` in the new one (https://core.telegram.org/bots/api#message).
 *
 * The conversation keeps the old chat id (its key, its history, its pending replies); replies go
 * to the new id, and messages from the new supergroup are given the old id as their chat, so
 * they continue the same conversation. Durable, so this holds after a restart or a takeover.
 */
import type { ChannelState } from '../../src/channel-state.ts';

const PREFIX = 'migrated:';

export class MigrationStore {
  readonly #state: ChannelState;
  /** Old chat id → new. */
  readonly #to = new Map<string, string>();
  /** New chat id → old (the conversation's chat). */
  readonly #from = new Map<string, string>();
  #loaded: Promise<void> | undefined;

  constructor(state: ChannelState) {
    this.#state = state;
  }

  /** Reads the moves from the state (again: at every `listen`, as another node may have recorded some). */
  reload(): Promise<void> {
    this.#loaded = this.#state.list(PREFIX).then((entries) => {
      for (const entry of entries) this.#remember(entry.key.slice(PREFIX.length), entry.value);
    });
    return this.#loaded;
  }

  /** The chat id to send to for a conversation's chat (its supergroup when it moved). */
  async target(chat: string): Promise<string> {
    await (this.#loaded ?? this.reload());
    return this.#to.get(chat) ?? chat;
  }

  /** The conversation's chat for a message from `chat` (the old group's id when it is a supergroup a group moved to). */
  async conversationChat(chat: string): Promise<string> {
    await (this.#loaded ?? this.reload());
    return this.#from.get(chat) ?? chat;
  }

  /** Records that `from` became `to` (durably, before it resolves). Returns false when it was known already. */
  async record(from: string, to: string): Promise<boolean> {
    await (this.#loaded ?? this.reload());
    if (this.#to.get(from) === to) return false;
    await this.#state.put(`${PREFIX}${from}`, to);
    this.#remember(from, to);
    return true;
  }

  #remember(from: string, to: string): void {
    this.#to.set(from, to);
    this.#from.set(to, from);
  }
}
