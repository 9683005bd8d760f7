/**
 * What the recall worker does, apart from the thread plumbing: keep the binary index of
 * sign bits in step with the database, and answer searches (binary top candidates rescored
 * with exact cosine, plus keyword search) from its own connection.
 */
import type Database from 'better-sqlite3';
import { BinaryIndex } from './binary-index.ts';
import { KeywordSearch, type Hit } from './fts.ts';
import { partitionOf, partitionsFor } from './owners.ts';
import type { FromWorker, ToWorker, VectorRequest } from './recall-protocol.ts';
import { cosine, fromBlob } from '../vectors.ts';

interface VectorRow {
  readonly rowid: number;
  readonly scope: string;
  readonly owner: string;
  readonly embedding: Buffer | null;
  readonly model: string | null;
}

export class RecallService {
  private readonly db: Database.Database;
  private readonly model: string | undefined;
  private readonly index = new BinaryIndex();
  private readonly keyword: KeywordSearch;
  private readonly vectors: Database.Statement<[string], VectorRow>;

  private readonly maxBytes: number;
  /** The budget ran out since the last load. */
  private full = false;
  /** … and the daemon has been told. */
  private reported = false;

  /**
   * `model`: the embedding model whose vectors are indexed; undefined = keyword search only.
   * `maxBytes`: the index's budget; vectors past it are not indexed.
   */
  constructor(db: Database.Database, model: string | undefined, maxBytes = Number.POSITIVE_INFINITY) {
    this.db = db;
    this.model = model;
    this.maxBytes = maxBytes;
    this.keyword = new KeywordSearch(db);
    this.vectors = db.prepare<[string], VectorRow>(
      `SELECT rowid, scope, owner, embedding, embedding_model AS model FROM memories WHERE rowid IN (SELECT value FROM json_each(?))`,
    );
  }

  /** Indexes the stored vectors of the model, newest first, up to the budget; returns how many. */
  load(): number {
    this.index.clear();
    this.full = false;
    this.reported = false;
    if (this.model === undefined) return 0;
    const rows = this.db
      .prepare<[string], [number, string, string, Buffer]>(
        'SELECT rowid, scope, owner, embedding_bits FROM memories WHERE embedding_bits IS NOT NULL AND embedding_model = ? ORDER BY rowid DESC',
      )
      .raw();
    for (const [rowid, scope, owner, bits] of rows.iterate(this.model)) {
      if (!this.room()) break;
      this.index.add(rowid, partitionOf(scope, owner), bits);
    }
    return this.index.size;
  }

  /** True while the index is under its budget; the first time it is not, marks it full. */
  private room(): boolean {
    if (this.index.bytes < this.maxBytes) return true;
    this.full = true;
    return false;
  }

  /** A 'full' message the first time the budget ran out since the last load, else undefined. */
  takeFull(): FromWorker | undefined {
    if (!this.full || this.reported) return undefined;
    this.reported = true;
    return { type: 'full', indexed: this.index.size, bytes: this.index.bytes };
  }

  get indexed(): number {
    return this.index.size;
  }

  /** Applies a change or answers a request. */
  handle(message: ToWorker): FromWorker | undefined {
    switch (message.type) {
      case 'add':
        for (const entry of message.entries) {
          // A vector already indexed is replaced in place; a new one needs room.
          if (this.index.has(entry.rowid) || this.room()) this.index.add(entry.rowid, entry.partition, entry.bits);
        }
        return this.takeFull();
      case 'remove':
        for (const rowid of message.rowids) this.index.remove(rowid);
        return undefined;
      case 'reload':
        this.load();
        return this.takeFull();
      case 'size':
        return { type: 'size', id: message.id, indexed: this.index.size };
      case 'keyword':
      case 'vector':
        try {
          return message.type === 'keyword'
            ? { type: 'keyword', id: message.id, result: this.keyword.search(message.request.text, message.request.who, message.request.limit) }
            : { type: 'vector', id: message.id, hits: this.nearest(message.request) };
        } catch (error) {
          return { type: 'failed', id: message.id, error: error instanceof Error ? error.message : String(error) };
        }
    }
  }

  /** Binary-index candidates among the caller's partitions, rescored with exact cosine. */
  nearest(request: VectorRequest): Hit[] {
    if (this.model === undefined) return [];
    const query = request.vector;
    const allowed = new Set(partitionsFor(request.who));
    const candidates = this.index.nearest(request.bits, [...allowed], request.candidates);
    if (candidates.length === 0) return [];
    const hits: Hit[] = [];
    for (const row of this.vectors.all(JSON.stringify(candidates))) {
      // Re-checked against the row as it is now: the index may lag a delete by a message.
      if (row.embedding === null || row.model !== this.model || row.embedding.length !== query.length * 4) continue;
      if (!allowed.has(partitionOf(row.scope, row.owner))) continue;
      hits.push({ rowid: row.rowid, score: cosine(fromBlob(row.embedding), query) });
    }
    return hits;
  }
}
