/**
 * Embeddings cached in SQLite (`embedding_cache`), so a memory or query seen before costs no
 * call to the embedding service, even after a restart. Keyed by model and text; the least
 * recently used entries go first when the cache is full.
 */
import { createHash } from 'node:crypto';
import type { Logger } from '../log.ts';
import type { EmbeddingProvider } from '../memory.ts';
import type { Db } from '../store/db.ts';

/** The cache key: sha256(model + NUL + text), hex, first 32 characters (128 bits). */
export function embeddingKey(model: string, text: string): string {
  return createHash('sha256').update(`${model}\0${text}`).digest('hex').slice(0, 32);
}

/** Vectors by (model, text) in the `embedding_cache` table, stored as float32 little-endian BLOBs. */
export class EmbeddingCache {
  readonly #db: Db;
  readonly #select;
  readonly #touch;
  readonly #upsert;
  readonly #evict;
  readonly #count;
  /** The last `accessed_at` handed out: strictly increasing, so two touches in one millisecond still order. */
  #clock: number;

  constructor(db: Db) {
    this.#db = db;
    this.#select = db.prepare<[string], { model: string; dims: number; vector: Buffer }>('SELECT model, dims, vector FROM embedding_cache WHERE hash = ?');
    this.#touch = db.prepare<[number, string]>('UPDATE embedding_cache SET accessed_at = ? WHERE hash = ?');
    this.#upsert = db.prepare<[string, string, number, Buffer, number]>(
      `INSERT INTO embedding_cache (hash, model, dims, vector, accessed_at) VALUES (?, ?, ?, ?, ?)
       ON CONFLICT (hash) DO UPDATE SET model = excluded.model, dims = excluded.dims, vector = excluded.vector, accessed_at = excluded.accessed_at`,
    );
    this.#evict = db.prepare<[number]>(
      `DELETE FROM embedding_cache WHERE hash IN (
         SELECT hash FROM embedding_cache ORDER BY accessed_at ASC, rowid ASC
          LIMIT max(0, (SELECT count(*) FROM embedding_cache) - ?))`,
    );
    this.#count = db.prepare<[], { n: number }>('SELECT count(*) AS n FROM embedding_cache');
    const last = db.prepare<[], { last: number | null }>('SELECT max(accessed_at) AS last FROM embedding_cache').get();
    this.#clock = last?.last ?? 0;
  }

  /** The cached vector for each text (`undefined` for a miss), marking the hits as just used. */
  get(model: string, texts: readonly string[]): (Float32Array | undefined)[] {
    return this.#db.transaction(() => {
      const now = this.#tick();
      return texts.map((text) => {
        const hash = embeddingKey(model, text);
        const row = this.#select.get(hash);
        if (!row || row.model !== model || row.vector.byteLength !== row.dims * 4) return undefined;
        this.#touch.run(now, hash);
        return decode(row.vector, row.dims);
      });
    })();
  }

  /** Stores (or replaces) the vector of each text. */
  put(model: string, texts: readonly string[], vectors: readonly Float32Array[]): void {
    if (texts.length !== vectors.length) throw new RangeError(`embedding cache: ${texts.length} texts but ${vectors.length} vectors`);
    this.#db.transaction(() => {
      const now = this.#tick();
      texts.forEach((text, i) => {
        const vector = vectors[i]!;
        this.#upsert.run(embeddingKey(model, text), model, vector.length, encode(vector), now);
      });
    })();
  }

  /** Deletes all but the `keep` most recently used entries; returns how many went. */
  evict(keep: number): number {
    if (!Number.isInteger(keep) || keep < 0) throw new RangeError(`embedding cache: keep must be a non-negative integer, got ${keep}`);
    return this.#evict.run(keep).changes;
  }

  size(): number {
    return this.#count.get()!.n;
  }

  #tick(): number {
    this.#clock = Math.max(Date.now(), this.#clock + 1);
    return this.#clock;
  }
}

function encode(vector: Float32Array): Buffer {
  const buffer = Buffer.allocUnsafe(vector.length * 4);
  for (let i = 0; i < vector.length; i++) buffer.writeFloatLE(vector[i]!, i * 4);
  return buffer;
}

function decode(blob: Buffer, dims: number): Float32Array {
  const vector = new Float32Array(dims);
  for (let i = 0; i < dims; i++) vector[i] = blob.readFloatLE(i * 4);
  return vector;
}

export interface CachedEmbeddingsOptions {
  /** Entries kept; the least recently used beyond this are evicted. 0 turns the cache off. @default 10000 */
  readonly maxEntries?: number;
  /** Where a failing cache read or write is reported (the embedding itself still succeeds). */
  readonly log?: Logger;
}

/**
 * `provider` behind the cache: only texts never seen with this provider's `name` reach the
 * service, each distinct text once per call. Same `name` as `provider`, so a model change
 * never reuses old vectors.
 *
 * Eviction runs on the first write and then after every `maxEntries / 20` new entries, so the
 * table may briefly hold up to 5% more than `maxEntries`.
 */
export function createCachedEmbeddings(provider: EmbeddingProvider, cache: EmbeddingCache, options: CachedEmbeddingsOptions = {}): EmbeddingProvider {
  const maxEntries = options.maxEntries ?? 10_000;
  if (!Number.isInteger(maxEntries) || maxEntries < 0) throw new TypeError(`embedding cache: maxEntries must be a non-negative integer, got ${String(maxEntries)}`);
  const evictEvery = Math.max(1, Math.ceil(maxEntries / 20));
  const { name } = provider;
  const log = options.log?.child({ embeddings: name });
  let sinceEviction = evictEvery; // evict on the first write: maxEntries may have been lowered since the last run

  const read = (texts: readonly string[]): (Float32Array | undefined)[] => {
    if (maxEntries === 0) return texts.map(() => undefined);
    try {
      return cache.get(name, texts);
    } catch (error) {
      log?.warn({ err: error }, 'embedding cache read failed; embedding without it');
      return texts.map(() => undefined);
    }
  };
  const write = (texts: readonly string[], vectors: readonly Float32Array[]): void => {
    if (maxEntries === 0) return;
    try {
      cache.put(name, texts, vectors);
      sinceEviction += texts.length;
      if (sinceEviction >= evictEvery) {
        sinceEviction = 0;
        const evicted = cache.evict(maxEntries);
        if (evicted > 0) log?.debug({ evicted, maxEntries }, 'embedding cache evicted least recently used entries');
      }
    } catch (error) {
      log?.warn({ err: error }, 'embedding cache write failed; these texts will be embedded again next time');
    }
  };

  return {
    name,
    async embed(texts, signal) {
      const vectors = read(texts);
      /** Each distinct missing text, with the positions it fills. */
      const misses = new Map<string, number[]>();
      vectors.forEach((vector, i) => {
        if (vector) return;
        const text = texts[i]!;
        const positions = misses.get(text);
        if (positions) positions.push(i);
        else misses.set(text, [i]);
      });
      if (misses.size === 0) return vectors as Float32Array[];

      const missing = [...misses.keys()];
      const fresh = await provider.embed(missing, signal);
      if (fresh.length !== missing.length) throw new Error(`embedding provider ${name} answered ${fresh.length} vectors for ${missing.length} texts`);
      missing.forEach((text, j) => {
        // Repeated texts get their own copy, so a caller changing one vector in place leaves the others alone.
        misses.get(text)!.forEach((position, k) => (vectors[position] = k === 0 ? fresh[j]! : fresh[j]!.slice()));
      });
      write(missing, fresh);
      return vectors as Float32Array[];
    },
  };
}
