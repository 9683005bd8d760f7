/**
 * Channel state for channel tests: the real store (src/store/channel-state.ts) over a SQLite
 * database in memory, or over one database that a test opens twice (a channel and its next owner).
 */
import { openDatabase } from '../../src/store/db.ts';
import { sqliteDatabase } from '../../src/store/sqlite-sql.ts';
import type { Database } from '../../src/store/sql.ts';
import { channelState, type ChannelState } from '../../src/store/channel-state.ts';

/** A channel's state in a fresh in-memory database (gone with the process). */
export function testChannelState(channel = 'test', now?: () => number): ChannelState {
  return channelState(sqliteDatabase(openDatabase(':memory:')), channel, now);
}

/** A SQLite database file (created and migrated when new); open it again for a "second node". */
export function sqliteFile(path: string): Database {
  return sqliteDatabase(openDatabase(path));
}
