/**
 * Keyword search over `memories_fts` (FTS5, porter unicode61), limited to the caller's
 * memories, with a LIKE fallback. A query is never FTS5 syntax: every whitespace-separated
 * token is double-quoted (inner quotes doubled) and the tokens are OR-joined, so `NEAR(a b)`,
 * `col:x`, `*`, `^` or `AND OR NOT` are just words.
 *
 * LIKE '%token%' (wildcards escaped) takes over when FTS5 throws, when no token has a letter
 * or digit (an emoji, say), or when it finds nothing for a query in a script written without
 * spaces (Chinese, Japanese, Thai…), where unicode61 sees a whole sentence as one token.
 */
import type Database from 'better-sqlite3';
import type { MemoryWho } from '../memory.ts';
import { ownerFilter, ownerParams } from './owners.ts';

export type KeywordMode = 'fts' | 'like' | 'none';

/** A memory (by rowid) and its raw relevance: -bm25 for FTS, matched tokens for LIKE. */
export interface Hit {
  readonly rowid: number;
  readonly score: number;
}

export interface KeywordResult {
  readonly mode: KeywordMode;
  readonly hits: Hit[];
  /** Set when FTS5 threw and LIKE answered instead. */
  readonly error?: string;
}

export interface KeywordSearchOptions {
  /**
   * From this many memories on, a query's commonest words are dropped: those in more than
   * half of the memories (BM25 gives them an IDF of ~0, so they cannot change the ranking) or
   * in more than 5 × `budget`, then, commonest first, those that would push the rows scored
   * past `budget`. Scoring each matching row is what makes a keyword search slow (~1 µs per
   * row and word: "the" costs ~60 ms at 100k), and the commonest words are the ones BM25
   * weighs least; the vector side still sees the whole query. @default 2000
   */
  readonly pruneFrom?: number;
  /** Rows (summed over the query's words) a search may score; the rarest word is kept regardless. @default 2000 */
  readonly budget?: number;
  /** How long word frequencies and the memory count are reused. @default 300000 */
  readonly statsTtlMs?: number;
}

const maxTokens = 32;
/** Matches read to estimate a word's frequency. */
const sample = 1000;
const maxLikeTokens = 8;
const maxTokenLength = 64;
const wordChar = /[\p{L}\p{N}]/u;
const onlyAsciiPunctuation = /^[!-/:-@[-`{-~]+$/;
const unspacedScript = /[\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}\p{Script=Thai}\p{Script=Lao}\p{Script=Khmer}\p{Script=Myanmar}]/u;

/** Distinct (case-insensitively) whitespace-separated tokens, at most 32, each cut to 64 characters. */
export function queryTokens(text: string): string[] {
  const seen = new Set<string>();
  const tokens: string[] = [];
  for (const raw of text.replace(/\p{Cc}/gu, ' ').split(/\s+/u)) {
    const token = [...raw].slice(0, maxTokenLength).join('');
    const folded = token.toLowerCase();
    if (token === '' || seen.has(folded)) continue;
    seen.add(folded);
    tokens.push(token);
    if (tokens.length === maxTokens) break;
  }
  return tokens;
}

/** An FTS5 query matching any of `tokens`, each a quoted string (never operators). */
export function ftsQuery(tokens: readonly string[]): string {
  return tokens.map((token) => `"${token.replaceAll('"', '""')}"`).join(' OR ');
}

/** A LIKE pattern (ESCAPE '\') matching `token` anywhere, its `%`, `_` and `\` taken literally. */
export function likePattern(token: string): string {
  return `%${token.replace(/[\\%_]/g, '\\$&')}%`;
}

/** Tokens FTS5 can index (with a letter or a digit). */
function ftsTokens(tokens: readonly string[]): string[] {
  return tokens.filter((token) => wordChar.test(token));
}

/** Tokens worth a LIKE scan: not bare ASCII punctuation such as `*` or `"`. */
function likeTokens(tokens: readonly string[]): string[] {
  return tokens.filter((token) => !onlyAsciiPunctuation.test(token)).slice(0, maxLikeTokens);
}

type Statement = Database.Statement<unknown[], unknown>;

/** Keyword search on one connection (the recall worker's, or the daemon's as a fallback). */
export class KeywordSearch {
  private readonly db: Database.Database;
  private readonly pruneFrom: number;
  private readonly budget: number;
  private readonly statsTtlMs: number;
  private readonly likeStatements = new Map<number, Statement>();
  private readonly frequencies = new Map<string, { readonly count: number; readonly at: number }>();
  private corpus: { readonly count: number; readonly first: number; readonly last: number; readonly at: number } | undefined;
  private ftsStatement: Statement | undefined;
  private frequencyStatement: Statement | undefined;
  private countStatement: Statement | undefined;

  constructor(db: Database.Database, options: KeywordSearchOptions = {}) {
    this.db = db;
    this.pruneFrom = options.pruneFrom ?? 2000;
    this.budget = options.budget ?? 2000;
    this.statsTtlMs = options.statsTtlMs ?? 300_000;
  }

  /** Up to `limit` of the caller's memories matching `text`, best first. Throws only if the database does. */
  search(text: string, who: MemoryWho, limit: number): KeywordResult {
    const tokens = queryTokens(text);
    const words = ftsTokens(tokens);
    let error: string | undefined;
    if (words.length > 0) {
      const discriminating = this.discriminating(words);
      if (discriminating.length === 0) return { mode: 'none', hits: [] };
      try {
        this.ftsStatement ??= this.db.prepare(
          `SELECT memories_fts.rowid AS rowid, -bm25(memories_fts) AS score
           FROM memories_fts JOIN memories m ON m.rowid = memories_fts.rowid
           WHERE memories_fts MATCH @query AND ${ownerFilter('m')}
           ORDER BY bm25(memories_fts) LIMIT @limit`,
        );
        const hits = this.ftsStatement.all({ query: ftsQuery(discriminating), limit, ...ownerParams(who) }) as Hit[];
        if (hits.length > 0 || !unspacedScript.test(text)) return { mode: 'fts', hits };
      } catch (caught) {
        error = caught instanceof Error ? caught.message : String(caught);
      }
    }
    const like = likeTokens(tokens);
    if (like.length === 0) return error === undefined ? { mode: 'none', hits: [] } : { mode: 'none', hits: [], error };
    const hits = this.like(like, who, limit);
    return error === undefined ? { mode: 'like', hits } : { mode: 'like', hits, error };
  }

  private like(tokens: readonly string[], who: MemoryWho, limit: number): Hit[] {
    let statement = this.likeStatements.get(tokens.length);
    if (statement === undefined) {
      const matched = tokens.map((_, i) => `(CASE WHEN m.content LIKE @t${i} ESCAPE '\\' OR m.key LIKE @t${i} ESCAPE '\\' THEN 1 ELSE 0 END)`).join(' + ');
      statement = this.db.prepare(
        `SELECT rowid, score FROM (
           SELECT m.rowid AS rowid, ${matched} AS score, m.updated_at AS updated FROM memories m WHERE ${ownerFilter('m')}
         ) WHERE score > 0 ORDER BY score DESC, updated DESC LIMIT @limit`,
      );
      this.likeStatements.set(tokens.length, statement);
    }
    const params: Record<string, string | number> = { limit, ...ownerParams(who) };
    tokens.forEach((token, i) => (params[`t${i}`] = likePattern(token)));
    return statement.all(params) as Hit[];
  }

  /** `words` minus the commonest ones of a large corpus (see `pruneFrom`). */
  private discriminating(words: string[]): string[] {
    const now = performance.now(); // cache ages are durations: monotonic
    // Below pruneFrom the count is recounted at each search (cheap at that size): cached for the
    // whole TTL, a fresh store's first count (0) kept every search unpruned for 5 minutes, and
    // an auto-saving daemon scored every memory for every common word in that time.
    if (this.corpus === undefined || this.corpus.count < this.pruneFrom || now - this.corpus.at > this.statsTtlMs) {
      this.countStatement ??= this.db.prepare('SELECT count(*) AS count, min(rowid) AS first, max(rowid) AS last FROM memories');
      const stats = this.countStatement.get() as { count: number; first: number | null; last: number | null };
      this.corpus = { count: stats.count, first: stats.first ?? 0, last: stats.last ?? 0, at: now };
    }
    const total = this.corpus.count;
    if (total < this.pruneFrom) return words;
    const rarestFirst = words
      .map((word) => ({ word, count: this.frequency(word, now) }))
      .filter((word) => word.count * 2 <= total && word.count <= 5 * this.budget)
      .sort((a, b) => a.count - b.count);
    const kept: string[] = [];
    let rows = 0;
    for (const { word, count } of rarestFirst) {
      if (kept.length > 0 && rows + count > this.budget) break;
      kept.push(word);
      rows += count;
    }
    return kept;
  }

  /**
   * About how many memories contain `word`, cached: exact below 1000, else estimated from how
   * far into the rowids its 1000th match is (reading 1000 rowids, not all of them: ~0.2 ms
   * where counting "the" at 100k takes ~10). 0 if FTS5 cannot say, so the word is kept.
   */
  private frequency(word: string, now: number): number {
    const key = word.toLowerCase();
    const cached = this.frequencies.get(key);
    if (cached !== undefined && now - cached.at <= this.statsTtlMs) return cached.count;
    let count = 0;
    try {
      this.frequencyStatement ??= this.db.prepare(`SELECT rowid FROM memories_fts WHERE memories_fts MATCH ? ORDER BY rowid LIMIT ${sample}`).pluck();
      const rowids = this.frequencyStatement.all(ftsQuery([word])) as number[];
      const { first, last } = this.corpus!;
      count = rowids.length < sample ? rowids.length : Math.round((sample * (last - first + 1)) / (rowids.at(-1)! - first + 1));
    } catch {
      // Kept: the search itself will throw and fall back to LIKE.
    }
    if (this.frequencies.size >= 4096) this.frequencies.clear();
    this.frequencies.set(key, { count, at: now });
    return count;
  }
}
