/**
 * Long-term memory in PostgreSQL (cluster mode): every node reads and writes the same
 * memories. Keywords by PostgreSQL's full-text search (`tsvector` on key and content, English
 * stemming like SQLite's porter tokenizer, any word of the query matching); vectors, when an
 * embedding service is configured, stored beside each memory and scanned for the caller's own,
 * conversation and shared memories only — the same owner rule as everywhere (src/memory/owners.ts),
 * and the same hybrid ranking as SQLite's (src/memory/hybrid.ts).
 *
 * Without pgvector (Debian has no package) a recall reads the caller's vectors: fine for the
 * thousands a person has; pgvector's index would make it one indexed query at any size.
 * A memory whose embedding fails is stored without one and found by keywords only.
 */
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { EmbeddingProvider, Memory, MemoryCategory, MemoryFilter, MemoryHealth, MemoryWho, RecallOptions, StoreInput } from '../memory.ts';
import { ownerOf } from '../memory.ts';
import { alone, type Sql, type SqlValue } from '../store/sql.ts';
import type { Hit } from './fts.ts';
import { mergeHybrid } from './hybrid.ts';
import { AmbiguousKeyError, defaultKey, entryOf, scopes, type MemoryRow } from './keys.ts';
import { ownerFilter, scopePriority } from './owners.ts';
import { cosine, fromBlob, toBlob } from '../vectors.ts';

export interface PostgresMemoryOptions {
  readonly sql: Sql;
  readonly log: Logger;
  readonly embeddings?: EmbeddingProvider;
  /** @default 0.7 */
  readonly vectorWeight?: number;
  /** @default 0.3 */
  readonly keywordWeight?: number;
  /** How long a recall waits for the query's embedding before going on with keywords. @default 2000 */
  readonly queryTimeoutMs?: number;
}

export interface PostgresMemory extends Memory {
  deleteOlderThan(category: MemoryCategory, beforeMs: number): Promise<number>;
}

interface Row extends MemoryRow {
  readonly n: number;
}

const columns = 'n, id, key, content, category, scope, owner, created_at, updated_at';
/** The caller's own, its conversation's and shared memories, binding person then conversation. */
const mine = ownerFilter('memories', () => '?');
const priority = scopePriority;

/** The query's words as a tsquery matching any of them (letters and digits only: nothing for tsquery's syntax to trip on). */
function anyWord(text: string): string | undefined {
  const words = [...new Set(text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [])].slice(0, 32);
  return words.length === 0 ? undefined : words.join(' | ');
}

export function createPostgresMemory(options: PostgresMemoryOptions): PostgresMemory {
  const { sql, log } = options;
  const weights = { vector: options.vectorWeight ?? 0.7, keyword: options.keywordWeight ?? 0.3 };
  const queryTimeoutMs = options.queryTimeoutMs ?? 2000;
  const embeddings = options.embeddings;
  let embeddingProblem: string | undefined;

  const embed = async (text: string, timeoutMs: number): Promise<Float32Array | undefined> => {
    if (!embeddings) return undefined;
    try {
      const [vector] = await embeddings.embed([text], AbortSignal.timeout(timeoutMs));
      embeddingProblem = undefined;
      return vector;
    } catch (error) {
      const problem = error instanceof Error ? error.message : String(error);
      if (embeddingProblem !== problem) log.warn({ err: error }, 'embedding failed; keywords only for this memory or recall');
      embeddingProblem = problem;
      return undefined;
    }
  };

  const filterSql = (filter: MemoryFilter): { where: string; params: SqlValue[] } => {
    const conditions: string[] = [];
    const params: SqlValue[] = [];
    for (const field of ['scope', 'owner', 'category'] as const) {
      const value = filter[field];
      if (value === undefined) continue;
      conditions.push(`${field} = ?`);
      params.push(value);
    }
    return { where: conditions.length === 0 ? '' : `WHERE ${conditions.join(' AND ')}`, params };
  };

  return {
    name: 'postgres',
    async store(input: StoreInput, who: MemoryWho) {
      const content = typeof input.content === 'string' ? input.content.trim() : '';
      if (content === '') throw new TypeError('a memory needs some content');
      if (!scopes.includes(input.scope)) throw new TypeError(`memory scope must be person, conversation or shared, got ${JSON.stringify(input.scope)}`);
      const key = input.key?.trim() || defaultKey(content);
      const now = Date.now();
      const category = input.category ?? 'core';
      const owner = ownerOf(input.scope, who);
      const vector = await embed(content, 30_000);
      const row = await sql.get<{ id: string; created_at: number }>(
        `INSERT INTO memories (id, key, content, category, scope, owner, embedding, embedding_model, created_at, updated_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (scope, owner, key) DO UPDATE SET content = excluded.content, category = excluded.category,
           embedding = excluded.embedding, embedding_model = excluded.embedding_model, updated_at = excluded.updated_at
         RETURNING id, created_at`,
        [randomUUID(), key, content, category, input.scope, owner, vector ? toBlob(vector) : null, vector ? embeddings!.name : null, now, now],
      );
      return { id: row!.id, key, content, category, scope: input.scope, owner, createdAt: row!.created_at, updatedAt: now };
    },

    async recall(query: string, who: MemoryWho, recallOptions: RecallOptions = {}) {
      const limit = Math.min(100, Math.max(1, Math.floor(Number.isFinite(recallOptions.limit) ? recallOptions.limit! : 5)));
      const minScore = Number.isFinite(recallOptions.minScore) ? recallOptions.minScore! : 0;
      const text = typeof query === 'string' ? query : '';
      if (text.trim() === '') return [];
      const candidates = Math.max(64, 4 * limit);
      const words = anyWord(text);
      const keywordHits: Promise<Hit[]> = words
        ? sql
            .all<{ n: number; score: number }>(
              `SELECT n, ts_rank_cd(words, query) AS score FROM memories, to_tsquery('english', ?) AS query
                WHERE ${mine} AND words @@ query ORDER BY score DESC, n DESC LIMIT ?`,
              [words, who.person, who.conversation, candidates],
            )
            .then((rows) => rows.map((row) => ({ rowid: row.n, score: row.score })))
        : Promise.resolve([]);
      const vector = await embed(text, queryTimeoutMs);
      let vectorHits: Hit[] = [];
      if (vector) {
        const rows = await sql.all<{ n: number; embedding: Buffer }>(`SELECT n, embedding FROM memories WHERE ${mine} AND embedding_model = ?`, [who.person, who.conversation, embeddings!.name]);
        vectorHits = rows
          .map((row) => ({ rowid: row.n, score: cosine(vector, fromBlob(row.embedding)) }))
          .sort((a, b) => b.score - a.score)
          .slice(0, candidates);
      }
      const ranked = mergeHybrid(vectorHits, await keywordHits, weights).filter((hit) => hit.score > 0 && hit.score >= minScore);
      const wanted = ranked.slice(0, limit);
      if (wanted.length === 0) return [];
      const rows = await sql.all<Row>(`SELECT ${columns} FROM memories WHERE n IN (${wanted.map(() => '?').join(', ')}) AND ${mine}`, [...wanted.map((hit) => hit.rowid), who.person, who.conversation]);
      const byN = new Map(rows.map((row) => [row.n, row]));
      return wanted.flatMap((hit) => {
        const row = byN.get(hit.rowid);
        return row === undefined ? [] : [entryOf(row, hit.score)];
      });
    },

    async get(key: string, who: MemoryWho) {
      const row = await sql.get<Row>(`SELECT ${columns} FROM memories WHERE key = ? AND ${mine} ORDER BY ${priority} LIMIT 1`, [key, who.person, who.conversation]);
      return row === undefined ? undefined : entryOf(row);
    },

    async list(filter: MemoryFilter = {}) {
      const { where, params } = filterSql(filter);
      const limit = filter.limit === undefined ? null : Math.max(0, Math.floor(filter.limit));
      const rows = await sql.all<Row>(`SELECT ${columns} FROM memories ${where} ORDER BY updated_at DESC, n DESC LIMIT ?`, [...params, limit]);
      return rows.map((row) => entryOf(row));
    },

    async count(filter: MemoryFilter = {}) {
      const { where, params } = filterSql(filter);
      return (await sql.get<{ n: number }>(`SELECT count(*) AS n FROM memories ${where}`, params))!.n;
    },

    async forget(keyOrId: string, who: MemoryWho | 'operator') {
      let n: number | undefined;
      if (who === 'operator') {
        n = (await sql.get<{ n: number }>('SELECT n FROM memories WHERE id = ?', [keyOrId]))?.n;
        if (n === undefined) {
          const matches = await sql.all<{ n: number }>('SELECT n FROM memories WHERE key = ? LIMIT 2', [keyOrId]);
          if (matches.length > 1) throw new AmbiguousKeyError(keyOrId, (await sql.get<{ n: number }>('SELECT count(*) AS n FROM memories WHERE key = ?', [keyOrId]))!.n);
          n = matches[0]?.n;
        }
      } else {
        n = (await sql.get<{ n: number }>(`SELECT n FROM memories WHERE (key = ? OR id = ?) AND ${mine} ORDER BY ${priority} LIMIT 1`, [keyOrId, keyOrId, who.person, who.conversation]))?.n;
      }
      if (n === undefined) return false;
      return (await sql.run('DELETE FROM memories WHERE n = ?', [n])) > 0;
    },

    async deleteOlderThan(category: MemoryCategory, beforeMs: number) {
      if (!Number.isFinite(beforeMs)) throw new TypeError(`deleteOlderThan needs a time in ms, got ${JSON.stringify(beforeMs)}`);
      // the hygiene pass's expiry, any number of rows: on a connection of its own, not holding up the turns' statements
      return alone(sql).run('DELETE FROM memories WHERE category = ? AND updated_at < ?', [category, beforeMs]);
    },

    async health(): Promise<MemoryHealth> {
      const total = (await sql.get<{ n: number }>('SELECT count(*) AS n FROM memories'))!.n;
      if (!embeddings) return { ok: true, detail: `keyword-only (PostgreSQL full-text search; no embedding service configured); ${total} memories` };
      if (embeddingProblem !== undefined) return { ok: false, detail: `keyword-only: embedding service failing (${embeddingProblem}); ${total} memories` };
      return { ok: true, detail: `hybrid (PostgreSQL full-text search and stored vectors, model ${embeddings.name}); ${total} memories` };
    },

    async close() {
      // the database belongs to the caller
    },
  };
}
