/**
 * The SQLite memory backend: memories in the daemon's database, recalled by a hybrid of
 * vector similarity (0.7) and BM25 keyword relevance (0.3).
 *
 * - `store` writes the text at once (FTS5 triggers index it); its embedding is computed in the
 *   background (embedder.ts), so a turn never waits on the embedding service.
 * - `recall` runs the keyword search in one recall worker (recall-worker.ts) while the query is
 *   embedded (2 s at most, else keyword-only), then has another scan an in-memory binary index
 *   of sign bits and rescore the best with exact cosine, both off the event loop and each on
 *   its own read-only connection; the few best rows are then read here in one query.
 * - Every read on someone's behalf is filtered to their person memories, the conversation's
 *   and the shared ones (owners.ts), in SQL and in the index partitions.
 */
import { randomUUID } from 'node:crypto';
import type Database from 'better-sqlite3';
import type { Logger } from '../log.ts';
import {
  ownerOf,
  type EmbeddingProvider,
  type Memory,
  type MemoryCategory,
  type MemoryEntry,
  type MemoryFilter,
  type MemoryHealth,
  type MemoryWho,
  type RecallOptions,
  type StoreInput,
} from '../memory.ts';
import type { Db } from '../store/db.ts';
import { Embedder } from './embedder.ts';
import { KeywordSearch, type Hit, type KeywordResult } from './fts.ts';
import { mergeHybrid, type HybridWeights } from './hybrid.ts';
import { ownerFilter, ownerParams, scopePriority } from './owners.ts';
import { RecallClient } from './recall-client.ts';
import type { KeywordRequest, VectorRequest } from './recall-protocol.ts';
import { signBits } from '../vectors.ts';

export interface SqliteMemoryOptions {
  /** The daemon's connection: every write and lookup goes through it. */
  readonly db: Db;
  /**
   * Runs a write on `db` and settles when it is committed: the daemon's SQLite store commits the
   * writes of one turn of the event loop together (src/store/sqlite-sql.ts), and a memory must
   * not be reported stored before. @default the write at once (it commits by itself)
   */
  readonly write?: <T>(work: () => T) => Promise<T>;
  /** The database file, opened read-only by the recall workers (not `:memory:`). */
  readonly path: string;
  /** Already cached by the caller. Undefined = keyword-only recall. */
  readonly embeddings?: EmbeddingProvider;
  /** @default 0.7 */
  readonly vectorWeight?: number;
  /** @default 0.3 */
  readonly keywordWeight?: number;
  /** The vector index's budget in MB (the recall worker's RAM); past it, newer memories are recalled by keyword only. @default 64 */
  readonly maxIndexMb?: number;
  readonly log: Logger;
  /** Wait after a store before embedding, so a burst goes in one request. @default 200 */
  readonly embedBatchMs?: number;
  /** Longest wait for the query's embedding before recalling by keyword only. @default 2000 */
  readonly queryTimeoutMs?: number;
}

/** The SQLite backend, plus what retention and status need beyond the Memory contract. */
export interface SqliteMemory extends Memory {
  /** Deletes memories of `category` last updated before `beforeMs` (epoch ms); returns how many. */
  deleteOlderThan(category: MemoryCategory, beforeMs: number): number;
  /** Vectors in the recall index (0 without an embedding provider). */
  indexed(): Promise<number>;
  /** Stops the background embedder (waiting for a batch being written) and the recall workers. */
  close(): Promise<void>;
}

import { AmbiguousKeyError, defaultKey, entryOf, scopes, type MemoryRow } from './keys.ts';

export { AmbiguousKeyError, defaultKey };

/** Creates the backend and starts its recall workers and (with `embeddings`) background embedder. */
export function createSqliteMemory(options: SqliteMemoryOptions): SqliteMemory {
  return new SqliteMemoryBackend(options);
}

interface Row extends MemoryRow {
  readonly rowid: number;
}

const columns = 'm.rowid AS rowid, m.id, m.key, m.content, m.category, m.scope, m.owner, m.created_at, m.updated_at';

function nonNegative(name: string, value: number): number {
  if (!Number.isFinite(value) || value < 0) throw new TypeError(`memory option ${name} must be a finite number ≥ 0, got ${JSON.stringify(value)}`);
  return value;
}

class SqliteMemoryBackend implements SqliteMemory {
  readonly name = 'sqlite';
  private readonly db: Db;
  private readonly log: Logger;
  private readonly weights: HybridWeights;
  private readonly queryTimeoutMs: number;
  private readonly embedder: Embedder | undefined;
  private readonly keywords: RecallClient;
  private readonly vectors: RecallClient | undefined;
  private readonly statements = new Map<string, Database.Statement>();
  private readonly write: <T>(work: () => T) => Promise<T>;
  private keywordHere: KeywordSearch | undefined;
  private workerProblemLogged: string | undefined;
  private dataVersion: number;
  /** Monotonic; -Infinity = never, so the first change is noticed at once. */
  private reloadedAt = Number.NEGATIVE_INFINITY;
  private closed = false;

  constructor(options: SqliteMemoryOptions) {
    if (typeof options.path !== 'string' || options.path === '' || options.path === ':memory:') {
      throw new TypeError(`memory option path must be the database file (the recall workers open it too), got ${JSON.stringify(options.path)}`);
    }
    this.weights = { vector: nonNegative('vectorWeight', options.vectorWeight ?? 0.7), keyword: nonNegative('keywordWeight', options.keywordWeight ?? 0.3) };
    if (this.weights.vector + this.weights.keyword === 0) throw new TypeError('memory options vectorWeight and keywordWeight cannot both be 0');
    const batchMs = nonNegative('embedBatchMs', options.embedBatchMs ?? 200);
    this.queryTimeoutMs = nonNegative('queryTimeoutMs', options.queryTimeoutMs ?? 2000);
    this.db = options.db;
    this.write = options.write ?? (async (work) => work());
    this.log = options.log;
    // The embedder first: a model change clears old vectors before the index is loaded.
    // (Its first batch is written from a timer, after the workers exist.)
    this.embedder =
      options.embeddings === undefined
        ? undefined
        : new Embedder({ db: this.db, provider: options.embeddings, log: this.log, batchMs, onEmbedded: (entries) => this.vectors?.add(entries) });
    // Two workers, so a recall's keyword and vector halves run in parallel; only the vector one
    // holds an index (and exists only with an embedding provider).
    this.keywords = new RecallClient({ path: options.path, model: undefined, log: this.log });
    const maxIndexBytes = nonNegative('maxIndexMb', options.maxIndexMb ?? 64) * 1024 * 1024;
    this.vectors = options.embeddings === undefined ? undefined : new RecallClient({ path: options.path, model: options.embeddings.name, maxIndexBytes, log: this.log });
    this.dataVersion = this.prepare('PRAGMA data_version').pluck().get() as number;
  }

  async store(input: StoreInput, who: MemoryWho): Promise<MemoryEntry> {
    this.assertOpen();
    const content = typeof input.content === 'string' ? input.content.trim() : '';
    if (content === '') throw new TypeError('a memory needs some content');
    if (!scopes.includes(input.scope)) throw new TypeError(`memory scope must be person, conversation or shared, got ${JSON.stringify(input.scope)}`);
    const key = input.key?.trim() || defaultKey(content);
    const now = Date.now();
    const params = { id: randomUUID(), key, content, category: input.category ?? 'core', scope: input.scope, owner: ownerOf(input.scope, who), now };
    const upsert = this
      .prepare<typeof params, { rowid: number; id: string; created_at: number; pending: number }>(
        `INSERT INTO memories (id, key, content, category, scope, owner, created_at, updated_at)
         VALUES (@id, @key, @content, @category, @scope, @owner, @now, @now)
         ON CONFLICT (scope, owner, key) DO UPDATE SET
           content = excluded.content, category = excluded.category, updated_at = excluded.updated_at,
           embedding = CASE WHEN memories.content = excluded.content THEN memories.embedding END,
           embedding_bits = CASE WHEN memories.content = excluded.content THEN memories.embedding_bits END,
           embedding_model = CASE WHEN memories.content = excluded.content THEN memories.embedding_model END
         RETURNING rowid, id, created_at, embedding IS NULL AS pending`,
      );
    const row = (await this.write(() => upsert.get(params)))!;
    if (row.pending) {
      if (row.id !== params.id) this.vectors?.remove([row.rowid]); // replaced content: its old vector goes
      this.embedder?.schedule();
    }
    return { id: row.id, key, content, category: params.category, scope: input.scope, owner: params.owner, createdAt: row.created_at, updatedAt: now };
  }

  async recall(query: string, who: MemoryWho, options: RecallOptions = {}): Promise<MemoryEntry[]> {
    this.assertOpen();
    const limit = Math.min(100, Math.max(1, Math.floor(Number.isFinite(options.limit) ? options.limit! : 5)));
    const minScore = Number.isFinite(options.minScore) ? options.minScore! : 0;
    const text = typeof query === 'string' ? query : '';
    if (text.trim() === '') return [];
    const scoped = { person: who.person, conversation: who.conversation };
    const candidates = Math.max(64, 4 * limit);
    this.noticeOtherWriters();
    // The keyword half runs while the query is out being embedded.
    const keyword = this.keywordSearch({ who: scoped, text, limit: candidates });
    const vector = this.embedder === undefined ? undefined : await this.embedder.embedQuery(text, this.queryTimeoutMs);
    const vectorHits = vector === undefined ? [] : await this.vectorSearch({ who: scoped, vector, bits: signBits(vector), candidates });
    const keywordResult = await keyword;
    if (keywordResult.error !== undefined) this.log.warn({ error: keywordResult.error, queryLength: text.length }, 'FTS5 rejected a recall query; LIKE answered instead');

    // Score 0 means no relation at all (no shared word, orthogonal vector): never worth returning.
    const ranked = mergeHybrid(vectorHits, keywordResult.hits, this.weights).filter((hit) => hit.score > 0 && hit.score >= minScore);
    // A few spare rows, in case the index still had one deleted a moment ago.
    const wanted = ranked.slice(0, limit + 8);
    if (wanted.length === 0) return [];
    // CROSS JOIN: rowid lookups for these few, not a walk through the owners' index.
    const rows = this.prepare<Record<string, string>, Row>(`SELECT ${columns} FROM json_each(@ids) AS j CROSS JOIN memories m ON m.rowid = j.value WHERE ${ownerFilter('m')}`)
      .all({ ids: JSON.stringify(wanted.map((hit) => hit.rowid)), ...ownerParams(who) });
    const byRowid = new Map(rows.map((row) => [row.rowid, row]));
    const entries: MemoryEntry[] = [];
    for (const hit of wanted) {
      const row = byRowid.get(hit.rowid);
      if (row !== undefined) entries.push(entryOf(row, hit.score));
      if (entries.length === limit) break;
    }
    return entries;
  }

  async get(key: string, who: MemoryWho): Promise<MemoryEntry | undefined> {
    const row = this
      .prepare<Record<string, string>, Row>(`SELECT ${columns} FROM memories m WHERE m.key = @key AND ${ownerFilter('m')} ORDER BY ${scopePriority} LIMIT 1`)
      .get({ key, ...ownerParams(who) });
    return row === undefined ? undefined : entryOf(row);
  }

  async list(filter: MemoryFilter = {}): Promise<MemoryEntry[]> {
    const { where, params } = filterSql(filter);
    const limit = filter.limit === undefined ? -1 : Math.max(0, Math.floor(filter.limit));
    return this
      .prepare<Record<string, string | number>, Row>(`SELECT ${columns} FROM memories m ${where} ORDER BY m.updated_at DESC, m.rowid DESC LIMIT @limit`)
      .all({ ...params, limit })
      .map((row) => entryOf(row));
  }

  async count(filter: MemoryFilter = {}): Promise<number> {
    const { where, params } = filterSql(filter);
    return this.prepare(`SELECT count(*) FROM memories m ${where}`).pluck().get(params) as number;
  }

  async forget(keyOrId: string, who: MemoryWho | 'operator'): Promise<boolean> {
    let rowid: number | undefined;
    if (who === 'operator') {
      rowid = this.prepare<[string], number>('SELECT rowid FROM memories WHERE id = ?').pluck().get(keyOrId);
      if (rowid === undefined) {
        const matches = this.prepare<[string], number>('SELECT rowid FROM memories WHERE key = ? LIMIT 2').pluck().all(keyOrId);
        if (matches.length > 1) throw new AmbiguousKeyError(keyOrId, this.prepare('SELECT count(*) FROM memories WHERE key = ?').pluck().get(keyOrId) as number);
        rowid = matches[0];
      }
    } else {
      rowid = this.prepare<Record<string, string>, number>(`SELECT m.rowid FROM memories m WHERE (m.key = @key OR m.id = @key) AND ${ownerFilter('m')} ORDER BY ${scopePriority} LIMIT 1`)
        .pluck()
        .get({ key: keyOrId, ...ownerParams(who) });
    }
    if (rowid === undefined) return false;
    const remove = this.prepare('DELETE FROM memories WHERE rowid = ?');
    const deleted = (await this.write(() => remove.run(rowid).changes)) > 0;
    this.vectors?.remove([rowid]);
    return deleted;
  }

  deleteOlderThan(category: MemoryCategory, beforeMs: number): number {
    if (!Number.isFinite(beforeMs)) throw new TypeError(`deleteOlderThan needs a time in ms, got ${JSON.stringify(beforeMs)}`);
    const rowids = this.prepare<[string, number], number>('DELETE FROM memories WHERE category = ? AND updated_at < ? RETURNING rowid').pluck().all(category, beforeMs);
    this.vectors?.remove(rowids);
    return rowids.length;
  }

  indexed(): Promise<number> {
    return this.vectors?.indexed() ?? Promise.resolve(0);
  }

  async health(): Promise<MemoryHealth> {
    const total = this.prepare('SELECT count(*) FROM memories').pluck().get() as number;
    const trouble = this.keywords.trouble ?? this.vectors?.trouble;
    if (trouble !== undefined) return { ok: false, detail: `keyword-only on the main thread: ${trouble}; ${total} memories` };
    if (this.embedder === undefined) return { ok: true, detail: `keyword-only (no embedding service configured); ${total} memories` };
    const status = this.embedder.status();
    if (status.problem !== undefined) {
      return { ok: false, detail: `keyword-only: embedding service failing (${status.problem}); ${status.pending} of ${total} memories not embedded` };
    }
    if (status.reembedding) return { ok: true, detail: `re-embedding ${status.pending} memories (model ${status.model})` };
    const dims = status.dims === undefined ? '' : `, ${status.dims} dimensions`;
    const pending = status.pending > 0 ? `, ${status.pending} being embedded` : '';
    return { ok: true, detail: `hybrid: ${total} memories, model ${status.model}${dims}${pending}` };
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.embedder?.stop();
    await Promise.all([this.keywords.close(), this.vectors?.close()]);
  }

  /** The keyword worker's search, or the same on this thread while it is down. Never rejects. */
  private async keywordSearch(request: KeywordRequest): Promise<KeywordResult> {
    try {
      const result = await this.keywords.keyword(request);
      this.workerProblemLogged = undefined;
      return result;
    } catch (error) {
      this.workerDown(error);
      this.keywordHere ??= new KeywordSearch(this.db);
      try {
        return this.keywordHere.search(request.text, request.who, request.limit);
      } catch (failure) {
        this.log.error({ err: failure }, 'keyword recall failed');
        return { mode: 'none', hits: [] };
      }
    }
  }

  /** The vector worker's search; none while it is down (keyword-only then). */
  private async vectorSearch(request: VectorRequest): Promise<Hit[]> {
    try {
      return await this.vectors!.vector(request);
    } catch (error) {
      this.workerDown(error);
      return [];
    }
  }

  private workerDown(error: unknown): void {
    const message = error instanceof Error ? error.message : String(error);
    if (this.workerProblemLogged !== message) this.log.warn({ err: error }, 'recall worker unavailable; keyword-only recall on the main thread');
    this.workerProblemLogged = message;
  }

  /**
   * Another process (`switchboard memory forget`, say) wrote to the database since the last
   * look: the index is rebuilt before this search (at most every 30 s: a full reload takes
   * ~0.7 s of the worker's time at 100k), and memories it stored get embedded.
   * `data_version` changes only for other connections' commits, never for this one's.
   */
  private noticeOtherWriters(): void {
    const version = this.prepare('PRAGMA data_version').pluck().get() as number;
    if (version === this.dataVersion || performance.now() - this.reloadedAt < 30_000) return;
    this.dataVersion = version;
    this.reloadedAt = performance.now();
    this.log.debug('the database changed outside this process; reloading the recall index');
    this.vectors?.reload();
    this.embedder?.schedule();
  }

  /** Statements are prepared once per SQL text (a handful, including the filter variants). */
  private prepare<P extends unknown[] | object = unknown[], R = unknown>(sql: string): Database.Statement<P, R> {
    let statement = this.statements.get(sql);
    if (statement === undefined) {
      statement = this.db.prepare(sql);
      this.statements.set(sql, statement);
    }
    return statement as unknown as Database.Statement<P, R>;
  }

  private assertOpen(): void {
    if (this.closed) throw new Error('memory is closed');
  }
}

function filterSql(filter: MemoryFilter): { where: string; params: Record<string, string> } {
  const conditions: string[] = [];
  const params: Record<string, string> = {};
  for (const field of ['scope', 'owner', 'category'] as const) {
    const value = filter[field];
    if (value === undefined) continue;
    conditions.push(`m.${field} = @${field}`);
    params[field] = value;
  }
  return { where: conditions.length === 0 ? '' : `WHERE ${conditions.join(' AND ')}`, params };
}
