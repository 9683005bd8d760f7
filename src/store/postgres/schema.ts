/**
 * PostgreSQL's schema, as numbered migrations. Each runs once, in its own transaction, recorded
 * in `switchboard_migrations`; nodes starting at the same moment take a transaction-scoped
 * advisory lock first, so exactly one applies each step and the others find it done.
 *
 * The tables mirror SQLite's (src/store/db.ts) so the same portable SQL serves both; integers
 * that hold ids or epoch milliseconds are bigint.
 */
export const postgresMigrations: readonly string[] = [
  `
  CREATE TABLE inbox (
    seq          bigserial PRIMARY KEY,
    channel      text   NOT NULL,
    platform_id  text   NOT NULL,
    conversation text   NOT NULL,
    payload      text   NOT NULL,
    status       text   NOT NULL DEFAULT 'queued' CHECK (status IN ('queued', 'done', 'failed', 'ignored')),
    received_at  bigint NOT NULL,
    done_at      bigint,
    error        text,
    UNIQUE (channel, platform_id)
  );
  CREATE INDEX inbox_queued ON inbox (seq) WHERE status = 'queued';
  CREATE INDEX inbox_done_at ON inbox (done_at) WHERE status <> 'queued';
  CREATE INDEX inbox_conversation ON inbox (conversation, seq);
  CREATE TABLE outbox (
    id           bigserial PRIMARY KEY,
    inbox_seq    bigint,
    channel      text   NOT NULL,
    conversation text   NOT NULL,
    payload      text   NOT NULL,
    status       text   NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'sent', 'dead')),
    attempts     integer NOT NULL DEFAULT 0,
    last_error   text,
    created_at   bigint NOT NULL,
    sent_at      bigint,
    progress     integer NOT NULL DEFAULT 0
  );
  CREATE INDEX outbox_pending ON outbox (conversation, id) WHERE status = 'pending';
  CREATE INDEX outbox_sent_at ON outbox (sent_at) WHERE status <> 'pending';
  CREATE TABLE history (
    id           bigserial PRIMARY KEY,
    conversation text   NOT NULL,
    turn         bigint NOT NULL,
    message      text   NOT NULL,
    created_at   bigint NOT NULL
  );
  CREATE INDEX history_conversation ON history (conversation, turn, id);
  CREATE TABLE drafts (
    inbox_seq  bigint PRIMARY KEY,
    message_id text   NOT NULL
  );
  CREATE TABLE conversation_settings (
    conversation text PRIMARY KEY,
    model        text
  );
  CREATE TABLE approvals_pending (
    conversation text   PRIMARY KEY,
    origin_turn  bigint NOT NULL,
    channel      text   NOT NULL,
    sender_id    text   NOT NULL,
    state        text   NOT NULL,
    created_at   bigint NOT NULL
  );
  CREATE TABLE approvals_always (
    channel    text   NOT NULL,
    sender_id  text   NOT NULL,
    summary    text   NOT NULL,
    created_at bigint NOT NULL,
    PRIMARY KEY (channel, sender_id, summary)
  );
  CREATE TABLE schedules (
    id           bigserial PRIMARY KEY,
    conversation text    NOT NULL,
    origin       text    NOT NULL,
    prompt       text    NOT NULL,
    cron         text,
    timezone     text,
    next_run     bigint  NOT NULL,
    active       integer NOT NULL DEFAULT 1,
    created_at   bigint  NOT NULL
  );
  CREATE INDEX schedules_due ON schedules (next_run) WHERE active = 1;
  CREATE TABLE pairing (
    channel     text   NOT NULL,
    sender_id   text   NOT NULL,
    code        text   NOT NULL,
    created_at  bigint NOT NULL,
    approved_at bigint,
    PRIMARY KEY (channel, sender_id)
  );
  CREATE UNIQUE INDEX pairing_code ON pairing (channel, code);
  `,
  // The cluster's nodes, as each last reported itself (switchboard status, /api/status).
  `
  CREATE TABLE cluster_nodes (
    node       text   PRIMARY KEY,
    version    text   NOT NULL,
    started_at bigint NOT NULL,
    seen_at    bigint NOT NULL,
    channels   text   NOT NULL DEFAULT '[]',
    in_flight  integer NOT NULL DEFAULT 0,
    turns      bigint NOT NULL DEFAULT 0
  );
  `,
  // Long-term memory (src/memory/postgres.ts): full-text search on key and content, vectors
  // stored beside (no pgvector in Debian: scanned per person, as SQLite's index is per owner).
  `
  CREATE TABLE memories (
    n               bigserial UNIQUE,
    id              text   PRIMARY KEY,
    key             text   NOT NULL,
    content         text   NOT NULL,
    category        text   NOT NULL DEFAULT 'core',
    scope           text   NOT NULL CHECK (scope IN ('person', 'conversation', 'shared')),
    owner           text   NOT NULL,
    embedding       bytea,
    embedding_model text,
    created_at      bigint NOT NULL,
    updated_at      bigint NOT NULL,
    words           tsvector GENERATED ALWAYS AS (to_tsvector('english', key || ' ' || content)) STORED,
    UNIQUE (scope, owner, key)
  );
  CREATE INDEX memories_owner ON memories (scope, owner, updated_at);
  CREATE INDEX memories_category ON memories (category, updated_at);
  CREATE INDEX memories_words ON memories USING gin (words);
  `,
  // Remote tools across the cluster (src/cluster/remote-tools.ts): what each node's clients
  // registered (listed only while the node is alive in cluster_nodes), and the calls one node
  // routes to another's client, each deleted once its caller has the answer or gave up.
  `
  CREATE TABLE remote_tools (
    node          text   NOT NULL,
    client        text   NOT NULL,
    name          text   NOT NULL,
    description   text   NOT NULL,
    parameters    text   NOT NULL,
    registered_at bigint NOT NULL,
    PRIMARY KEY (node, client, name)
  );
  CREATE TABLE remote_tool_calls (
    id         text   PRIMARY KEY,
    caller     text   NOT NULL,
    node       text   NOT NULL,
    client     text   NOT NULL,
    name       text   NOT NULL,
    args       text   NOT NULL,
    result     text,
    created_at bigint NOT NULL,
    deadline   bigint NOT NULL,
    taken_at   bigint
  );
  CREATE INDEX remote_tool_calls_waiting ON remote_tool_calls (node, created_at) WHERE taken_at IS NULL;
  CREATE INDEX remote_tool_calls_deadline ON remote_tool_calls (deadline);
  `,
  // Channel state (src/store/channel-state.ts): a sync token, read positions, thread records…,
  // so the node that takes a channel over finds them where the last owner left them.
  `
  CREATE TABLE channel_state (
    channel    text   NOT NULL,
    key        text   NOT NULL,
    value      text   NOT NULL,
    seq        bigint NOT NULL,
    size       bigint NOT NULL,
    created_at bigint NOT NULL,
    updated_at bigint NOT NULL,
    PRIMARY KEY (channel, key)
  );
  CREATE INDEX channel_state_order ON channel_state (channel, seq);
  `,
  // A turn's commit (src/runtime/records.ts) ends its message with one statement that fails when the
  // message no longer waits, so its COMMIT can travel with it (answering ROLLBACK) instead of
  // waiting for the mark's answer. A function, not a constant error in the SQL: PostgreSQL folds
  // constant expressions (1/0, a bad cast) when it plans, and would fail every mark. See inbox.ts.
  `
  CREATE FUNCTION switchboard_not_queued(seq bigint) RETURNS bigint LANGUAGE plpgsql VOLATILE AS $$
  BEGIN
    RAISE EXCEPTION 'inbox message % no longer waits', seq USING ERRCODE = 'SB001';
  END
  $$;
  `,
];
