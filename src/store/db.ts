/**
 * The embedded database: one SQLite file in WAL mode, migrated on open.
 *
 * `synchronous = NORMAL` keeps every committed transaction across a process crash
 * (SIGKILL, OOM); only a power loss can lose the last few. `durability = "full"` trades
 * throughput for surviving that too.
 */
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import { statSync } from 'node:fs';
import { createPrivateFile, fileSystemError, makeDirectory } from './files.ts';
import { checkDatabaseHeader, damagedDatabaseError, hasWal, QUICK_CHECK_MAX_BYTES, quickCheck } from './integrity.ts';
import { PAGE_CACHE_KIB } from './page-cache.ts';

export type Db = Database.Database;

const migrations: readonly string[] = [
  `
  CREATE TABLE inbox (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    channel      TEXT    NOT NULL,
    platform_id  TEXT    NOT NULL,
    conversation TEXT    NOT NULL,
    payload      TEXT    NOT NULL,
    status       TEXT    NOT NULL DEFAULT 'queued' CHECK (status IN ('queued', 'done', 'failed')),
    received_at  INTEGER NOT NULL,
    done_at      INTEGER,
    error        TEXT,
    UNIQUE (channel, platform_id)
  );
  CREATE INDEX inbox_queued ON inbox (seq) WHERE status = 'queued';
  CREATE INDEX inbox_done_at ON inbox (done_at) WHERE status <> 'queued';

  CREATE TABLE outbox (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    inbox_seq    INTEGER,
    channel      TEXT    NOT NULL,
    conversation TEXT    NOT NULL,
    payload      TEXT    NOT NULL,
    status       TEXT    NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'sent', 'dead')),
    attempts     INTEGER NOT NULL DEFAULT 0,
    last_error   TEXT,
    created_at   INTEGER NOT NULL,
    sent_at      INTEGER
  );
  CREATE INDEX outbox_pending ON outbox (conversation, id) WHERE status = 'pending';
  CREATE INDEX outbox_sent_at ON outbox (sent_at) WHERE status <> 'pending';

  CREATE TABLE history (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    conversation TEXT    NOT NULL,
    turn         INTEGER NOT NULL,
    message      TEXT    NOT NULL,
    created_at   INTEGER NOT NULL
  );
  CREATE INDEX history_conversation ON history (conversation, turn, id);
  `,
  `
  CREATE TABLE approvals_pending (
    conversation TEXT    PRIMARY KEY,
    origin_turn  INTEGER NOT NULL,
    channel      TEXT    NOT NULL,
    sender_id    TEXT    NOT NULL,
    state        TEXT    NOT NULL,
    created_at   INTEGER NOT NULL
  );
  CREATE TABLE approvals_always (
    channel    TEXT    NOT NULL,
    sender_id  TEXT    NOT NULL,
    summary    TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (channel, sender_id, summary)
  );
  CREATE TABLE schedules (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    conversation TEXT    NOT NULL,
    origin       TEXT    NOT NULL,
    prompt       TEXT    NOT NULL,
    cron         TEXT,
    timezone     TEXT,
    next_run     INTEGER NOT NULL,
    active       INTEGER NOT NULL DEFAULT 1,
    created_at   INTEGER NOT NULL
  );
  CREATE INDEX schedules_due ON schedules (next_run) WHERE active = 1;
  `,
  `
  CREATE TABLE memories (
    id              TEXT    PRIMARY KEY,
    key             TEXT    NOT NULL,
    content         TEXT    NOT NULL,
    category        TEXT    NOT NULL DEFAULT 'core',
    scope           TEXT    NOT NULL CHECK (scope IN ('person', 'conversation', 'shared')),
    owner           TEXT    NOT NULL,
    embedding       BLOB,
    embedding_bits  BLOB,
    embedding_model TEXT,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    UNIQUE (scope, owner, key)
  );
  CREATE INDEX memories_owner ON memories (scope, owner, updated_at);
  CREATE INDEX memories_unembedded ON memories (updated_at) WHERE embedding IS NULL;
  CREATE INDEX memories_category ON memories (category, updated_at);
  CREATE VIRTUAL TABLE memories_fts USING fts5(
    key, content, content = 'memories', content_rowid = 'rowid', tokenize = 'porter unicode61 remove_diacritics 2'
  );
  CREATE TRIGGER memories_ai AFTER INSERT ON memories BEGIN
    INSERT INTO memories_fts (rowid, key, content) VALUES (new.rowid, new.key, new.content);
  END;
  CREATE TRIGGER memories_ad AFTER DELETE ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, key, content) VALUES ('delete', old.rowid, old.key, old.content);
  END;
  CREATE TRIGGER memories_au AFTER UPDATE OF key, content ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, key, content) VALUES ('delete', old.rowid, old.key, old.content);
    INSERT INTO memories_fts (rowid, key, content) VALUES (new.rowid, new.key, new.content);
  END;
  CREATE TABLE embedding_cache (
    hash        TEXT    PRIMARY KEY,
    model       TEXT    NOT NULL,
    dims        INTEGER NOT NULL,
    vector      BLOB    NOT NULL,
    accessed_at INTEGER NOT NULL
  );
  CREATE INDEX embedding_cache_lru ON embedding_cache (accessed_at);
  CREATE TABLE memory_meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
  );
  `,
  `
  CREATE TABLE pairing (
    channel     TEXT    NOT NULL,
    sender_id   TEXT    NOT NULL,
    code        TEXT    NOT NULL,
    created_at  INTEGER NOT NULL,
    approved_at INTEGER,
    PRIMARY KEY (channel, sender_id)
  );
  CREATE UNIQUE INDEX pairing_code ON pairing (channel, code);
  `,
  // Channels I: messages the policy let go unanswered ('ignored', reason in error) stay as
  // context; replies are sent part by part (progress); a streamed draft is remembered per turn;
  // per-conversation settings (/model).
  `
  CREATE TABLE inbox_new (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    channel      TEXT    NOT NULL,
    platform_id  TEXT    NOT NULL,
    conversation TEXT    NOT NULL,
    payload      TEXT    NOT NULL,
    status       TEXT    NOT NULL DEFAULT 'queued' CHECK (status IN ('queued', 'done', 'failed', 'ignored')),
    received_at  INTEGER NOT NULL,
    done_at      INTEGER,
    error        TEXT,
    UNIQUE (channel, platform_id)
  );
  INSERT INTO inbox_new SELECT * FROM inbox;
  DROP TABLE inbox;
  ALTER TABLE inbox_new RENAME TO inbox;
  CREATE INDEX inbox_queued ON inbox (seq) WHERE status = 'queued';
  CREATE INDEX inbox_done_at ON inbox (done_at) WHERE status <> 'queued';
  CREATE INDEX inbox_conversation ON inbox (conversation, seq);

  ALTER TABLE outbox ADD COLUMN progress INTEGER NOT NULL DEFAULT 0;

  CREATE TABLE drafts (
    inbox_seq  INTEGER PRIMARY KEY,
    message_id TEXT    NOT NULL
  );

  CREATE TABLE conversation_settings (
    conversation TEXT PRIMARY KEY,
    model        TEXT
  );
  `,
  // Channel state (src/store/channel-state.ts): what channels kept in files of their own in
  // <data_dir>/channels/<name>/ before (imported from there once, at their first start).
  `
  CREATE TABLE channel_state (
    channel    TEXT    NOT NULL,
    key        TEXT    NOT NULL,
    value      TEXT    NOT NULL,
    seq        INTEGER NOT NULL,
    size       INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (channel, key)
  );
  CREATE INDEX channel_state_order ON channel_state (channel, seq);
  `,
];

export interface OpenOptions {
  /** `full` fsyncs every commit (survives power loss; slower). @default 'normal' */
  readonly durability?: 'normal' | 'full';
  /**
   * How hard to look for damage (see integrity.ts): `auto` adds `PRAGMA quick_check` when the
   * file is small or the last run did not stop cleanly; `header` only reads the header (operator
   * commands, which run beside the daemon and must not read a big file each time). @default 'auto'
   */
  readonly check?: 'auto' | 'header';
}

/**
 * Opens (creating if needed) the database at `path` and brings its schema up to date. Throws
 * FileSystemError when it cannot be created or opened, DatabaseDamagedError when it is damaged.
 */
export function openDatabase(path: string, options: OpenOptions = {}): Db {
  let db: Db | undefined;
  let thorough = false;
  try {
    // The directory 0700 and the file 0600: conversations and memories are in it.
    if (path !== ':memory:') {
      makeDirectory(dirname(path));
      checkDatabaseHeader(path);
      thorough = options.check !== 'header' && (hasWal(path) || sizeOf(path) <= QUICK_CHECK_MAX_BYTES);
      createPrivateFile(path);
    }
    db = new Database(path);
    db.pragma('journal_mode = WAL'); // creates the -wal file: the first write
  } catch (error) {
    db?.close();
    throw damagedDatabaseError(error, path) ?? fileSystemError(error, `open the database ${path}`, path);
  }
  try {
    if (thorough) quickCheck(db, path);
    db.pragma(`synchronous = ${options.durability === 'full' ? 'FULL' : 'NORMAL'}`);
    db.pragma('busy_timeout = 5000');
    db.pragma(`cache_size = -${PAGE_CACHE_KIB}`);
    db.pragma('foreign_keys = ON');
    migrate(db);
  } catch (error) {
    db.close();
    throw damagedDatabaseError(error, path) ?? error;
  }
  return db;
}

function sizeOf(path: string): number {
  try {
    return statSync(path).size;
  } catch {
    return 0;
  }
}

function migrate(db: Db): void {
  const current = db.pragma('user_version', { simple: true }) as number;
  if (current > migrations.length) {
    throw new Error(
      `database schema version ${current} is newer than this Switchboard knows (${migrations.length}); upgrade Switchboard or point data_dir elsewhere`,
    );
  }
  for (let version = current; version < migrations.length; version++) {
    db.transaction(() => {
      db.exec(migrations[version]!);
      db.pragma(`user_version = ${version + 1}`);
    })();
  }
}
