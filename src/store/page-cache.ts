/**
 * SQLite's page cache per connection, in KiB (`PRAGMA cache_size = -N`), for every connection of
 * the daemon (db.ts; the recall worker has its own, below). better-sqlite3 builds SQLite with 16 MB
 * (SQLITE_DEFAULT_CACHE_SIZE=-16000), filled as the file grows, so a busy daemon's RSS kept
 * climbing long after its warm-up (bench:soak). A turn touches a few hot pages (the inbox and
 * outbox tails, a conversation's history, the newest memories); the rest comes from the
 * kernel's page cache in microseconds.
 */
export const PAGE_CACHE_KIB = 2048;

/**
 * The recall worker's read-only connection, in KiB. Its keyword searches read the memory's
 * full-text index, and with PAGE_CACHE_KIB its connection kept caching those pages as the index
 * grew: bench:soak's malloc grew +1.3 to +3.2 MB from 5,000 messages to the highest. With 256 KiB
 * it grew +0.8 MB (three alternated pairs of 50,000 messages) at the same msg/s, and recall at
 * 100,000 memories (bench:memory) was as fast: the pages come from the kernel's page cache
 * (docs/benchmarks.md, "where every figure ended").
 */
export const RECALL_PAGE_CACHE_KIB = 256;
