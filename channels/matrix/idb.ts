/**
 * The part of the IndexedDB API the crypto store (crypto-store.ts) uses, typed here: the
 * project compiles without the DOM library (whose declarations would leak browser globals into
 * every file), and fake-indexeddb's own typings are written against it.
 */
export type IDBValidKey = number | string | Date | BufferSource | IDBValidKey[];
type BufferSource = ArrayBufferView | ArrayBuffer;
export type IDBTransactionMode = 'readonly' | 'readwrite' | 'versionchange';

interface Events {
  addEventListener(type: string, listener: () => void): void;
}
export interface IDBRequest<T = unknown> extends Events {
  readonly result: T;
  readonly error: Error | null;
}
export interface IDBOpenDBRequest extends IDBRequest<IDBDatabase> {
  readonly transaction: IDBTransaction | null;
}
export interface IDBCursor {
  readonly primaryKey: IDBValidKey;
  update(value: unknown): IDBRequest<IDBValidKey>;
  delete(): IDBRequest<undefined>;
}
export interface IDBIndex {
  readonly name: string;
  readonly keyPath: string | string[];
  readonly unique: boolean;
  readonly multiEntry: boolean;
  openCursor(...args: unknown[]): IDBRequest<IDBCursor | null>;
}
export interface IDBObjectStore {
  readonly keyPath: string | string[] | null;
  readonly autoIncrement: boolean;
  readonly indexNames: Iterable<string>;
  put(value: unknown, key?: IDBValidKey): IDBRequest<IDBValidKey>;
  add(value: unknown, key?: IDBValidKey): IDBRequest<IDBValidKey>;
  delete(query: unknown): IDBRequest<undefined>;
  clear(): IDBRequest<undefined>;
  getAll(): IDBRequest<unknown[]>;
  getAllKeys(): IDBRequest<IDBValidKey[]>;
  openCursor(...args: unknown[]): IDBRequest<IDBCursor | null>;
  index(name: string): IDBIndex;
  createIndex(name: string, keyPath: string | string[], options: { unique: boolean; multiEntry: boolean }): IDBIndex;
}
export interface IDBTransaction extends Events {
  readonly error: Error | null;
  objectStore(name: string): IDBObjectStore;
}
export interface IDBDatabase {
  readonly name: string;
  readonly version: number;
  readonly objectStoreNames: Iterable<string> & { readonly length: number };
  transaction(stores: string | string[], mode?: IDBTransactionMode, options?: unknown): IDBTransaction;
  createObjectStore(name: string, options: { keyPath: string | string[] | null; autoIncrement: boolean }): IDBObjectStore;
  close(): void;
}
export interface IDBFactory {
  open(name: string, version?: number): IDBOpenDBRequest;
  deleteDatabase(name: string): IDBRequest<undefined>;
  databases(): Promise<Array<{ name?: string; version?: number }>>;
}

/** fake-indexeddb's exports, as this file types them. */
export interface FakeIndexedDb {
  readonly IDBFactory: new () => IDBFactory;
  readonly IDBKeyRange: abstract new (...args: never[]) => unknown;
  readonly [name: string]: unknown;
}

/** The global classes the wasm checks values against (instanceof), as fake-indexeddb/auto sets them. */
export const GLOBAL_CLASSES = ['IDBCursor', 'IDBCursorWithValue', 'IDBDatabase', 'IDBFactory', 'IDBIndex', 'IDBKeyRange', 'IDBObjectStore', 'IDBOpenDBRequest', 'IDBRequest', 'IDBTransaction', 'IDBVersionChangeEvent'] as const;
