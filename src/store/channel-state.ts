/**
 * Channel state: what a channel keeps across restarts of its own (a Telegram offset, a Matrix
 * sync token, Discord read positions, email thread records, webhook idempotency results),
 * stored behind the Sql interface like every other durable fact. On one node that is the
 * SQLite file; in a cluster it is PostgreSQL, so the node that takes a channel over finds the
 * state where the last owner left it — a file in the old owner's data_dir it could not see.
 *
 * Each channel instance (by its configured name) has its own keys; values are text (callers
 * store JSON). Entries are kept in write order: a new key is the newest, a changed one keeps
 * its place unless `renew` says otherwise, and `prune` drops the oldest beyond a count, so a
 * channel whose state grows with traffic keeps it bounded.
 */
import type { Sql } from './sql.ts';

/** One entry of a channel's state. */
export interface ChannelStateEntry {
  readonly key: string;
  readonly value: string;
}

/** One channel instance's durable key/value state. */
export interface ChannelState {
  get(key: string): Promise<string | undefined>;
  /**
   * Stores `value` under `key` (committed when this resolves). A new key becomes the newest
   * entry; an existing one keeps its place in the order unless `renew` moves it to the end.
   */
  put(key: string, value: string, options?: { readonly renew?: boolean }): Promise<void>;
  /** Deletes these keys (in one transaction); returns how many there were. */
  delete(keys: readonly string[]): Promise<number>;
  /** The entries whose key starts with `prefix` ('' for all), oldest first. */
  list(prefix: string): Promise<ChannelStateEntry[]>;
  /** Deletes all but the newest `keep` entries whose key starts with `prefix`; returns how many went. */
  prune(prefix: string, keep: number): Promise<number>;
}

/** Longest key: keys are often ids a peer chose (an Idempotency-Key, a Message-ID). */
export const MAX_KEY_LENGTH = 1024;

/** The state of channel instance `channel`, over `sql` (either engine). */
export function channelState(sql: Sql, channel: string, now: () => number = Date.now): ChannelState {
  if (channel === '') throw new TypeError('channelState: the channel name must not be empty');
  // substr counts characters (code points) on both engines; LIKE would be case-insensitive on SQLite.
  const startsWith = 'substr(key, 1, ?) = ?';
  const prefixParams = (prefix: string): [number, string] => [[...prefix].length, prefix];
  return {
    async get(key) {
      return (await sql.get<{ value: string }>('SELECT value FROM channel_state WHERE channel = ? AND key = ?', [channel, key]))?.value;
    },

    async put(key, value, options = {}) {
      if (key === '' || key.length > MAX_KEY_LENGTH) throw new RangeError(`channel state key must be 1-${MAX_KEY_LENGTH} characters, got ${key.length}`);
      await sql.run(
        `INSERT INTO channel_state (channel, key, value, seq, updated_at)
         VALUES (?, ?, ?, (SELECT COALESCE(MAX(seq), 0) + 1 FROM channel_state WHERE channel = ?), ?)
         ON CONFLICT (channel, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at${options.renew ? ', seq = excluded.seq' : ''}`,
        [channel, key, value, channel, now()],
      );
    },

    async delete(keys) {
      if (keys.length === 0) return 0;
      // One statement per key (a fixed text: the SQLite adapter keeps statements prepared).
      return sql.transaction(async (tx) => {
        let deleted = 0;
        for (const key of keys) deleted += await tx.run('DELETE FROM channel_state WHERE channel = ? AND key = ?', [channel, key]);
        return deleted;
      });
    },

    async list(prefix) {
      return sql.all<ChannelStateEntry>(`SELECT key, value FROM channel_state WHERE channel = ? AND ${startsWith} ORDER BY seq, key`, [channel, ...prefixParams(prefix)]);
    },

    async prune(prefix, keep) {
      if (!Number.isInteger(keep) || keep < 0) throw new TypeError(`prune: keep must be a whole number, got ${keep}`);
      // The newest `keep` stay; the one after them in the order, and all older, go.
      return sql.run(
        `DELETE FROM channel_state WHERE channel = ? AND ${startsWith} AND seq <= (
           SELECT seq FROM channel_state WHERE channel = ? AND ${startsWith} ORDER BY seq DESC LIMIT 1 OFFSET ?
         )`,
        [channel, ...prefixParams(prefix), channel, ...prefixParams(prefix), keep],
      );
    },
  };
}
