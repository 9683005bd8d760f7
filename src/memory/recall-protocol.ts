/**
 * Messages between the daemon and its recall worker. The worker owns the binary vector index
 * and its own read-only connection; the daemon tells it about every embedding it writes or
 * memory it deletes, in commit order, so the index matches the database (the worker applies
 * them after loading its snapshot; replaying a change the snapshot already has is harmless).
 */
import type { MemoryWho } from '../memory.ts';
import type { Hit, KeywordResult } from './fts.ts';

export interface WorkerConfig {
  /** The database file. */
  readonly path: string;
  /** Embedding model whose vectors are indexed (others are ignored); undefined = none. */
  readonly model: string | undefined;
  /**
   * The index's budget in bytes (`[memory] max_index_mb`): past it, vectors are not indexed
   * (those memories are recalled by keyword only) and the worker says so once. @default unlimited
   */
  readonly maxIndexBytes?: number;
}

/** A vector's sign bits (see vectors.ts) and the partition (scope + owner) it belongs to. */
export interface IndexEntry {
  readonly rowid: number;
  readonly partition: string;
  readonly bits: Uint8Array;
}

/** Keyword search among `who`'s memories (sent at once, while the query is being embedded). */
export interface KeywordRequest {
  readonly who: MemoryWho;
  readonly text: string;
  readonly limit: number;
}

/** Binary-index candidates among `who`'s memories, rescored with exact cosine. */
export interface VectorRequest {
  readonly who: MemoryWho;
  readonly vector: Float32Array;
  /** `vector`'s sign bits. */
  readonly bits: Uint8Array;
  readonly candidates: number;
}

export type ToWorker =
  | { readonly type: 'add'; readonly entries: readonly IndexEntry[] }
  | { readonly type: 'remove'; readonly rowids: readonly number[] }
  /** Another process changed the database: rebuild the index from it. */
  | { readonly type: 'reload' }
  | { readonly type: 'keyword'; readonly id: number; readonly request: KeywordRequest }
  | { readonly type: 'vector'; readonly id: number; readonly request: VectorRequest }
  | { readonly type: 'size'; readonly id: number };

export type FromWorker =
  | { readonly type: 'ready'; readonly indexed: number; readonly ms: number }
  | { readonly type: 'keyword'; readonly id: number; readonly result: KeywordResult }
  | { readonly type: 'vector'; readonly id: number; readonly hits: Hit[] }
  | { readonly type: 'size'; readonly id: number; readonly indexed: number }
  /** The index reached maxIndexBytes; sent once per (re)load. */
  | { readonly type: 'full'; readonly indexed: number; readonly bytes: number }
  | { readonly type: 'failed'; readonly id: number; readonly error: string };
