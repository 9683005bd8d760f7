/**
 * SQLite's page cache per connection, in KiB (`PRAGMA cache_size = -N`), for every connection of
 * the daemon (db.ts, the recall worker's). better-sqlite3 builds SQLite with 16 MB
 * (SQLITE_DEFAULT_CACHE_SIZE=-16000), filled as the file grows, so a busy daemon's RSS kept
 * climbing long after its warm-up (bench:soak). A turn touches a few hot pages (the inbox and
 * outbox tails, a conversation's history, the newest memories); the rest comes from the
 * kernel's page cache in microseconds.
 */
export const PAGE_CACHE_KIB = 2048;
