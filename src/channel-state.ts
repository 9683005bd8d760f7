/**
 * The contract of a channel's durable state (a Telegram offset, a Matrix sync token, Discord
 * read positions, email thread records, webhook idempotency results): what a channel is given as
 * `ChannelContext.state`. It lives beside the Channel contract so a channel needs nothing from
 * the store's folder; src/store/channel-state.ts implements it over the Sql port (SQLite on one
 * node, PostgreSQL in a cluster).
 */

/** One entry of a channel's state. */
export interface ChannelStateEntry {
  readonly key: string;
  readonly value: string;
}

/** What `prune` keeps of a prefix's entries: every limit given applies. */
export interface PruneLimits {
  /** The newest this many stay; older ones go. */
  readonly keep?: number;
  /** Entries created (or renewed) before this time (ms since the epoch) go. */
  readonly createdBefore?: number;
  /**
   * The newest entries whose values add up to at most this many UTF-8 bytes stay; older ones go.
   * The newest entry stays even when it alone is larger.
   */
  readonly maxBytes?: number;
}

/** One channel instance's durable key/value state. */
export interface ChannelState {
  get(key: string): Promise<string | undefined>;
  /**
   * Stores `value` under `key` (committed when this resolves). A new key becomes the newest
   * entry; an existing one keeps its place in the order (and its creation time) unless `renew`
   * makes it the newest again.
   */
  put(key: string, value: string, options?: { readonly renew?: boolean }): Promise<void>;
  /** Deletes these keys (in one transaction); returns how many there were. */
  delete(keys: readonly string[]): Promise<number>;
  /** The entries whose key starts with `prefix` ('' for all), oldest first. */
  list(prefix: string): Promise<ChannelStateEntry[]>;
  /** Whether any key starts with `prefix` (without reading the entries). */
  any(prefix: string): Promise<boolean>;
  /** Deletes the oldest entries whose key starts with `prefix` beyond `limits`; returns how many went. */
  prune(prefix: string, limits: PruneLimits): Promise<number>;
}

/** Longest key: keys are often ids a peer chose (an Idempotency-Key, a Message-ID). */
export const MAX_KEY_LENGTH = 1024;
