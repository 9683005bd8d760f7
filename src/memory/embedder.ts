/**
 * Embeddings for memories, off the turn's path: `store` writes the text (searchable by
 * keyword at once) and this embeds rows whose `embedding IS NULL` in batches, shortly after.
 * While the embedding service is down it logs once, retries with backoff, and recall stays
 * keyword-only; nothing waits for it.
 *
 * `memory_meta` remembers the model (`embedding_model`) and its vector length
 * (`embedding_dims`). A new model name clears every stored vector, which are then re-embedded
 * here; a vector of another length than the stored one is never written (an error names the
 * model and both lengths), so the index never mixes dimensions.
 */
import type { Logger } from '../log.ts';
import type { EmbeddingProvider } from '../memory.ts';
import type { Db } from '../store/db.ts';
import { partitionOf } from './owners.ts';
import type { IndexEntry } from './recall-protocol.ts';
import { signBits, toBlob } from '../vectors.ts';

export interface EmbedderOptions {
  readonly db: Db;
  readonly provider: EmbeddingProvider;
  readonly log: Logger;
  /** Wait after a store before embedding, so a burst goes in one request. */
  readonly batchMs: number;
  /** Called after each committed batch with what the recall index needs. */
  readonly onEmbedded: (entries: IndexEntry[]) => void;
  /** Texts per request. @default 64 */
  readonly batchSize?: number;
  /** Check for rows stored by another process this often when idle. @default 30000 */
  readonly idlePollMs?: number;
  /** One embedding request may take this long. @default 60000 */
  readonly requestTimeoutMs?: number;
}

export interface EmbedderStatus {
  readonly model: string;
  readonly dims: number | undefined;
  /** Memories without an embedding yet. */
  readonly pending: number;
  /** The model changed at start and old vectors are still being replaced. */
  readonly reembedding: boolean;
  /** Why embedding is failing now, if it is. */
  readonly problem: string | undefined;
}

/** Embedding inputs are cut to this many characters (well under every model's token limit), so one long memory cannot fail every batch. */
const maxInputChars = 8000;
const querySkipMs = 30_000;

export class Embedder {
  private readonly options: EmbedderOptions;
  private readonly db: Db;
  private readonly provider: EmbeddingProvider;
  private readonly log: Logger;
  private readonly batchSize: number;
  private dimensions: number | undefined;
  private reembedding: boolean;
  private failures = 0;
  private problem: string | undefined;
  private queryProblem: string | undefined;
  /** After a failed query embedding, recalls skip it until then (or until a batch succeeds), so a hanging service does not add its timeout to every turn. */
  private querySkipUntil = 0;
  private timer: NodeJS.Timeout | undefined;
  private timerKind: 'soon' | 'idle' | 'backoff' | undefined;
  private running: Promise<void> | undefined;
  private abort: AbortController | undefined;
  private stopped = false;

  constructor(options: EmbedderOptions) {
    this.options = options;
    this.db = options.db;
    this.provider = options.provider;
    this.log = options.log;
    this.batchSize = options.batchSize ?? 64;
    const cleared = this.adoptModel();
    this.reembedding = cleared > 0;
    if (cleared > 0) this.log.info({ model: this.provider.name, memories: cleared }, 'embedding model changed; re-embedding memories in the background');
    this.arm('soon', 0);
  }

  /** The stored vectors' length; undefined until the first one is written. */
  get dims(): number | undefined {
    return this.dimensions;
  }

  /** A memory was stored or changed: embed it soon (but not during a backoff). */
  schedule(): void {
    if (this.stopped || this.running !== undefined || this.timerKind === 'soon' || this.timerKind === 'backoff') return;
    this.arm('soon', this.options.batchMs);
  }

  status(): EmbedderStatus {
    const pending = this.db.prepare('SELECT count(*) FROM memories WHERE embedding IS NULL').pluck().get() as number;
    return { model: this.provider.name, dims: this.dimensions, pending, reembedding: this.reembedding && pending > 0, problem: this.problem };
  }

  /**
   * The query's embedding, or undefined (logged once per failing stretch) when the service
   * fails, is slow or returns another length — and for 30 s after such a failure.
   */
  async embedQuery(text: string, timeoutMs: number): Promise<Float32Array | undefined> {
    if (performance.now() < this.querySkipUntil) return undefined;
    const abort = new AbortController();
    let timer: NodeJS.Timeout | undefined;
    try {
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
      });
      const [vector] = await Promise.race([this.provider.embed([text.slice(0, maxInputChars)], abort.signal), timeout]);
      if (vector === undefined) throw new Error('no vector returned');
      if (this.dimensions !== undefined && vector.length !== this.dimensions) {
        throw new Error(`model ${this.provider.name} returned ${vector.length} dimensions but stored vectors have ${this.dimensions}`);
      }
      if (this.queryProblem !== undefined) this.log.info({ model: this.provider.name }, 'query embeddings work again; recall is hybrid');
      this.queryProblem = undefined;
      return vector;
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      if (this.queryProblem === undefined) {
        const level = message.includes('dimensions but stored') ? 'error' : 'warn';
        this.log[level]({ model: this.provider.name, err: error }, 'cannot embed the recall query; recall is keyword-only until it works again');
      }
      this.queryProblem = message;
      this.querySkipUntil = performance.now() + querySkipMs; // monotonic: a clock step must not stretch the pause
      return undefined;
    } finally {
      clearTimeout(timer);
      abort.abort();
    }
  }

  /** Stops embedding; resolves once no write can follow. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    this.abort?.abort();
    await this.running;
  }

  /** Clears vectors of any other model (re-embedded later); returns how many. */
  private adoptModel(): number {
    const meta = this.db.prepare<[string], string>('SELECT value FROM memory_meta WHERE key = ?').pluck();
    const storedModel = meta.get('embedding_model');
    const storedDims = meta.get('embedding_dims');
    if (storedModel === this.provider.name) {
      this.dimensions = storedDims === undefined ? undefined : Number(storedDims);
      return 0;
    }
    return this.db.transaction(() => {
      const cleared = this.db
        .prepare('UPDATE memories SET embedding = NULL, embedding_bits = NULL, embedding_model = NULL WHERE embedding IS NOT NULL')
        .run().changes;
      this.setMeta('embedding_model', this.provider.name);
      this.db.prepare(`DELETE FROM memory_meta WHERE key = 'embedding_dims'`).run();
      if (storedModel !== undefined) this.log.info({ from: storedModel, to: this.provider.name }, 'embedding model changed');
      return cleared;
    })();
  }

  private setMeta(key: string, value: string): void {
    this.db.prepare('INSERT INTO memory_meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value').run(key, value);
  }

  private arm(kind: 'soon' | 'idle' | 'backoff', delayMs: number): void {
    if (this.stopped) return;
    clearTimeout(this.timer);
    this.timerKind = kind;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.timerKind = undefined;
      this.running = this.tick().finally(() => (this.running = undefined));
    }, delayMs);
    this.timer.unref();
  }

  private async tick(): Promise<void> {
    try {
      const rows = this.db
        .prepare<[number], { rowid: number; content: string }>('SELECT rowid, content FROM memories WHERE embedding IS NULL ORDER BY updated_at LIMIT ?')
        .all(this.batchSize);
      if (rows.length === 0) {
        if (this.reembedding) this.log.info({ model: this.provider.name }, 're-embedding finished');
        this.reembedding = false;
        this.arm('idle', this.options.idlePollMs ?? 30_000);
        return;
      }
      const vectors = await this.embed(rows.map((row) => row.content.slice(0, maxInputChars)));
      if (this.stopped) return;
      this.write(rows, vectors);
      if (this.problem !== undefined) this.log.info({ model: this.provider.name, failures: this.failures }, 'embedding works again; catching up');
      this.problem = undefined;
      this.failures = 0;
      this.querySkipUntil = 0;
      this.arm('soon', rows.length === this.batchSize ? 0 : this.options.batchMs);
    } catch (error) {
      if (this.stopped) return;
      const message = error instanceof Error ? error.message : String(error);
      if (this.problem === undefined) {
        this.log.warn({ model: this.provider.name, err: error }, 'cannot embed memories; they stay keyword-searchable and are retried with backoff');
      }
      this.problem = message;
      this.failures++;
      this.arm('backoff', Math.min(60_000, Math.max(10, this.options.batchMs) * 2 ** this.failures));
    }
  }

  private async embed(texts: string[]): Promise<Float32Array[]> {
    const abort = new AbortController();
    this.abort = abort;
    const timeoutMs = this.options.requestTimeoutMs ?? 60_000;
    const timer = setTimeout(() => abort.abort(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
    try {
      const aborted = new Promise<never>((_, reject) => abort.signal.addEventListener('abort', () => reject(abort.signal.reason), { once: true }));
      const vectors = await Promise.race([this.provider.embed(texts, abort.signal), aborted]);
      if (vectors.length !== texts.length) throw new Error(`asked for ${texts.length} embeddings, got ${vectors.length}`);
      return vectors;
    } finally {
      clearTimeout(timer);
      this.abort = undefined;
    }
  }

  /** Writes the vectors whose row is unchanged since it was read, then tells the index. */
  private write(rows: readonly { rowid: number; content: string }[], vectors: readonly Float32Array[]): void {
    const length = vectors[0]!.length;
    if (vectors.some((vector) => vector.length !== length)) throw new Error(`model ${this.provider.name} returned vectors of different lengths`);
    if (this.dimensions !== undefined && length !== this.dimensions && !this.adoptDims(length)) {
      const error = `model ${this.provider.name} returned ${length}-dimension vectors but the stored ones have ${this.dimensions}; not mixing them (use a model with ${this.dimensions} dimensions, or a new model name to re-embed everything)`;
      if (this.problem !== error) this.log.error({ model: this.provider.name, dims: length, storedDims: this.dimensions }, error);
      this.problem = error;
      throw new Error(error);
    }
    const update = this.db.prepare<[Buffer, Buffer, string, number, string], { scope: string; owner: string }>(
      `UPDATE memories SET embedding = ?, embedding_bits = ?, embedding_model = ?
       WHERE rowid = ? AND embedding IS NULL AND content = ? RETURNING scope, owner`,
    );
    const entries = this.db.transaction(() => {
      if (this.dimensions === undefined) {
        this.setMeta('embedding_dims', String(length));
        this.dimensions = length;
      }
      const written: IndexEntry[] = [];
      rows.forEach((row, i) => {
        const vector = vectors[i]!;
        const bits = signBits(vector);
        // A row changed or deleted while its text was out being embedded is skipped (and re-read later).
        const owner = update.get(toBlob(vector), Buffer.from(bits.buffer, bits.byteOffset, bits.byteLength), this.provider.name, row.rowid, row.content);
        if (owner !== undefined) written.push({ rowid: row.rowid, partition: partitionOf(owner.scope, owner.owner), bits });
      });
      return written;
    })();
    this.options.onEmbedded(entries);
  }

  /** Takes a new length only when no vector of the old one is left. */
  private adoptDims(length: number): boolean {
    if (this.db.prepare('SELECT 1 FROM memories WHERE embedding IS NOT NULL LIMIT 1').get() !== undefined) return false;
    this.log.info({ model: this.provider.name, dims: length, previous: this.dimensions }, 'no stored vectors left; adopting the new dimension');
    this.setMeta('embedding_dims', String(length));
    this.dimensions = length;
    return true;
  }
}
