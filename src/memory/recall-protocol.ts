/**
 * Messages between the daemon and its recall worker. The worker owns the binary vector index
 * and its own read-only connection; the daemon tells it about every embedding it writes or
 * memory it deletes, in commit order, so the index matches the database (the worker applies
 * them after loading its snapshot; replaying a change the snapshot already has is harmless).
 */
import type { MemoryWho } from '../memory.ts';
import type { Hit, KeywordMode } from './fts.ts';

export interface WorkerConfig {
  /** The database file. */
  readonly path: string;
  /** Embedding model whose vectors are indexed (others are ignored); undefined = none. */
  readonly model: string | undefined;
}

/** A vector's sign bits (see vectors.ts) and the partition (scope + owner) it belongs to. */
export interface IndexEntry {
  readonly rowid: number;
  readonly partition: string;
  readonly bits: Uint8Array;
}

export interface SearchRequest {
  readonly who: MemoryWho;
  readonly text: string;
  /** The query embedding and its sign bits; absent = keyword only. */
  readonly vector?: Float32Array;
  readonly bits?: Uint8Array;
  /** Candidates from the binary index rescored with exact cosine; also the keyword limit. */
  readonly candidates: number;
}

export interface SearchResult {
  /** Exact cosine of the rescored candidates. */
  readonly vector: Hit[];
  readonly keyword: Hit[];
  readonly keywordMode: KeywordMode;
  readonly keywordError?: string;
}

export type ToWorker =
  | { readonly type: 'add'; readonly entries: readonly IndexEntry[] }
  | { readonly type: 'remove'; readonly rowids: readonly number[] }
  /** Another process changed the database: rebuild the index from it. */
  | { readonly type: 'reload' }
  | { readonly type: 'search'; readonly id: number; readonly request: SearchRequest }
  | { readonly type: 'size'; readonly id: number };

export type FromWorker =
  | { readonly type: 'ready'; readonly indexed: number; readonly ms: number }
  | { readonly type: 'result'; readonly id: number; readonly result: SearchResult }
  | { readonly type: 'size'; readonly id: number; readonly indexed: number }
  | { readonly type: 'failed'; readonly id: number; readonly error: string };
