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
import { MAX_KEY_LENGTH, type ChannelState, type ChannelStateEntry } from '../channel-state.ts';
import type { Sql } from './sql.ts';
import { ChannelStateTotals, overLimits } from './channel-state-totals.ts';

export type { ChannelState, ChannelStateEntry, PruneLimits } from '../channel-state.ts';
export { MAX_KEY_LENGTH } from '../channel-state.ts';

/** The state of channel instance `channel`, over `sql` (either engine). `now` stamps creation times. */
export function channelState(sql: Sql, channel: string, now: () => number = Date.now): ChannelState {
  if (channel === '') throw new TypeError('channelState: the channel name must not be empty');
  // substr counts characters (code points) on both engines; LIKE would be case-insensitive on SQLite.
  const mine = 'channel = ? AND substr(key, 1, ?) = ?';
  const scope = (prefix: string): [string, number, string] => [channel, [...prefix].length, prefix];
  const wholeNumber = (name: string, value: number): void => {
    if (!Number.isSafeInteger(value) || value < 0) throw new TypeError(`prune: ${name} must be a whole number, got ${value}`);
  };
  // What prune() knows without counting (see channel-state-totals.ts).
  const totals = new ChannelStateTotals();
  /** Upserts one entry; returns its seq (the next one when it is new, its old one when updated in place). */
  const putIn = async (db: Sql, key: string, value: string, renew: boolean | undefined): Promise<{ seq: number; bytes: number; at: number }> => {
    if (key === '' || key.length > MAX_KEY_LENGTH) throw new RangeError(`channel state key must be 1-${MAX_KEY_LENGTH} characters, got ${key.length}`);
    const at = now();
    const bytes = Buffer.byteLength(value);
    const row = await db.get<{ seq: number }>(
      `INSERT INTO channel_state (channel, key, value, seq, size, created_at, updated_at)
       VALUES (?, ?, ?, (SELECT COALESCE(MAX(seq), 0) + 1 FROM channel_state WHERE channel = ?), ?, ?, ?)
       ON CONFLICT (channel, key) DO UPDATE SET value = excluded.value, size = excluded.size, updated_at = excluded.updated_at${
         renew ? ', seq = excluded.seq, created_at = excluded.created_at' : ''
       }
       RETURNING seq`,
      [channel, key, value, channel, bytes, at, at],
    );
    return { seq: Number(row?.seq), bytes, at };
  };
  const oldestRows = `DELETE FROM channel_state WHERE ${mine} AND seq <= (SELECT seq FROM channel_state WHERE ${mine} ORDER BY seq LIMIT 1 OFFSET ?) RETURNING size`;
  return {
    async get(key) {
      return (await sql.get<{ value: string }>('SELECT value FROM channel_state WHERE channel = ? AND key = ?', [channel, key]))?.value;
    },

    async put(key, value, options = {}) {
      let written;
      try {
        written = await putIn(sql, key, value, options.renew);
      } catch (error) {
        totals.forget();
        throw error;
      }
      totals.put(key, written.bytes, written.at, written.seq, options.renew === true);
    },

    async write(changes) {
      const puts = changes.put ?? [];
      const deletes = changes.delete ?? [];
      if (puts.length === 0 && deletes.length === 0) return;
      totals.forget();
      await sql.transaction(async (tx) => {
        for (const entry of puts) await putIn(tx, entry.key, entry.value, false);
        for (const key of deletes) await tx.run('DELETE FROM channel_state WHERE channel = ? AND key = ?', [channel, key]);
      });
    },

    async delete(keys) {
      if (keys.length === 0) return 0;
      totals.forget();
      // One statement per key (a fixed text: the SQLite adapter keeps statements prepared).
      return sql.transaction(async (tx) => {
        let deleted = 0;
        for (const key of keys) deleted += await tx.run('DELETE FROM channel_state WHERE channel = ? AND key = ?', [channel, key]);
        return deleted;
      });
    },

    async list(prefix) {
      return sql.all<ChannelStateEntry>(`SELECT key, value FROM channel_state WHERE ${mine} ORDER BY seq, key`, scope(prefix));
    },

    async any(prefix) {
      return (await sql.get(`SELECT 1 AS found FROM channel_state WHERE ${mine} LIMIT 1`, scope(prefix))) !== undefined;
    },

    async prune(prefix, limits) {
      const { keep, createdBefore, maxBytes } = limits;
      if (keep !== undefined) wholeNumber('keep', keep);
      if (maxBytes !== undefined) wholeNumber('maxBytes', maxBytes);
      const known = totals.get(prefix);
      if (known) {
        const over = overLimits(known, limits);
        if (!over.age && !over.count && !over.bytes) return 0;
        const excess = known.entries - (keep ?? known.entries);
        if (!over.age && !over.bytes && excess > 0 && excess <= 64) {
          // Only the count is over, by `excess` entries we know of: the `excess` oldest go —
          // what the count's DELETE below takes, found from the old end instead of past `keep`.
          try {
            const gone = await sql.all<{ size: number }>(oldestRows, [...scope(prefix), ...scope(prefix), excess - 1]);
            totals.removed(prefix, gone.length, gone.reduce((sum, row) => sum + Number(row.size), 0));
            return gone.length;
          } catch (error) {
            totals.forget();
            throw error;
          }
        }
      }
      totals.forget();
      return sql.transaction(async (tx) => {
        // One pass first: a channel prunes at each write (webhook results), and a state within
        // its limits (the usual case) then needs none of the deletes below, the byte budget's
        // window over every entry least of all (34 ms at 10,000 entries on SQLite, against 5).
        const counts = await tx.get<{ entries: number; bytes: number | null; oldest: number | null }>(
          `SELECT COUNT(*) AS entries, SUM(size) AS bytes, MIN(created_at) AS oldest FROM channel_state WHERE ${mine}`,
          scope(prefix),
        );
        const counted = { entries: counts?.entries ?? 0, bytes: counts?.bytes ?? 0, oldest: counts?.oldest ?? Infinity };
        const over = overLimits(counted, limits);
        let deleted = 0;
        if (over.age && createdBefore !== undefined) deleted += await tx.run(`DELETE FROM channel_state WHERE ${mine} AND created_at < ?`, [...scope(prefix), createdBefore]);
        if (over.count && keep !== undefined) {
          // The newest `keep` stay; the one after them in the order, and all older, go.
          deleted += await tx.run(
            `DELETE FROM channel_state WHERE ${mine} AND seq <= (SELECT seq FROM channel_state WHERE ${mine} ORDER BY seq DESC LIMIT 1 OFFSET ?)`,
            [...scope(prefix), ...scope(prefix), keep],
          );
        }
        if (over.bytes && maxBytes !== undefined) {
          // The newest entry whose running total (newest first) passes the budget, bar the newest of all, and all older, go.
          deleted += await tx.run(
            `DELETE FROM channel_state WHERE ${mine} AND seq <= (
               SELECT seq FROM (
                 SELECT seq, SUM(size) OVER (ORDER BY seq DESC, key DESC ROWS UNBOUNDED PRECEDING) AS total,
                        ROW_NUMBER() OVER (ORDER BY seq DESC, key DESC) AS n
                 FROM channel_state WHERE ${mine}
               ) AS newest_first WHERE total > ? AND n > 1 ORDER BY seq DESC LIMIT 1
             )`,
            [...scope(prefix), ...scope(prefix), maxBytes],
          );
        }
        if (deleted === 0) {
          // Within the limits: from here on this instance's own writes keep the figures.
          const last = await tx.get<{ last: number | null }>('SELECT MAX(seq) AS last FROM channel_state WHERE channel = ?', [channel]);
          totals.counted(prefix, { entries: Number(counted.entries), bytes: Number(counted.bytes), oldest: Number(counted.oldest) }, Number(last?.last ?? 0));
        }
        return deleted;
      });
    },
  };
}
