/**
 * The long-polling offset, kept in the channel state store (ChannelContext.state, key `offset`).
 *
 * Telegram confirms updates on its side: getUpdates with offset = last update_id + 1 confirms
 * everything before it, and a poller that starts without an offset gets the earliest
 * unconfirmed update. So a lost offset never loses a message. It is stored anyway: the last
 * batch a poller handled is only confirmed by its next getUpdates, so a node that takes the
 * channel over (or a restart after a crash) without it reads that batch again — and downloads
 * its files again — only for the inbox to drop every message as a duplicate. Saved once per
 * batch, after every update of it was pushed (so durably in the inbox); it only ever lags.
 *
 * Trusted for a day at most, and only for the same bot: after a week without updates Telegram
 * numbers the next one at random, so an old offset could be higher than it and confirm
 * (skip) messages never read. Without a usable offset the server's confirmation decides.
 */
import type { Logger } from 'pino';
import type { ChannelContext } from '../../src/channel.ts';
import type { ChannelState } from '../../src/channel-state.ts';

const KEY = 'offset';
/** Well under the week after which Telegram may number updates afresh. */
export const OFFSET_TRUSTED_MS = 24 * 3600_000;

export interface OffsetStoreOptions {
  readonly state: ChannelState;
  /** The bot's id (the token's first part): an offset of another bot is not ours. */
  readonly bot: string;
  readonly log: Logger;
  readonly storage?: ChannelContext['storage'];
  /** @default Date.now */
  readonly now?: () => number;
}

export class OffsetStore {
  readonly #options: OffsetStoreOptions;
  readonly #now: () => number;
  #saved: number | undefined;

  constructor(options: OffsetStoreOptions) {
    this.#options = options;
    this.#now = options.now ?? Date.now;
  }

  /** The offset the last poller stored, when it is this bot's and recent; else undefined. */
  async load(): Promise<number | undefined> {
    const text = await this.#options.state.get(KEY);
    this.#saved = undefined;
    if (text === undefined) return undefined;
    try {
      const saved = JSON.parse(text) as { bot?: unknown; offset?: unknown; at?: unknown };
      const fresh = typeof saved.at === 'number' && this.#now() - saved.at < OFFSET_TRUSTED_MS;
      if (saved.bot === this.#options.bot && Number.isSafeInteger(saved.offset) && fresh) this.#saved = saved.offset as number;
    } catch {
      // unreadable: the server's confirmation decides
    }
    if (this.#saved === undefined) this.#options.log.info('no recent saved getUpdates offset; starting from what Telegram has not confirmed');
    return this.#saved;
  }

  /** Stores `offset` when it moved. Never rejects: a failure is reported and logged (the server still confirms on the next poll). */
  async save(offset: number | undefined): Promise<void> {
    if (offset === undefined || offset === this.#saved) return;
    try {
      await this.#options.state.put(KEY, JSON.stringify({ bot: this.#options.bot, offset, at: this.#now() }));
      this.#saved = offset;
    } catch (error) {
      this.#options.storage?.failed(error, 'save the Telegram getUpdates offset');
      this.#options.log.warn({ err: error }, 'could not save the getUpdates offset; a takeover may read the last batch again (deduplicated)');
    }
  }
}
