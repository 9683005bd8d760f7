/**
 * The Matrix channel's crypto store: an IndexedDB that lives in our database.
 *
 * Decision (issue 28). matrix-js-sdk's Rust crypto (@matrix-org/matrix-sdk-crypto-wasm) keeps
 * its device keys, Olm and Megolm sessions in IndexedDB or in memory only
 * (matrix-org/matrix-js-sdk#4769), and offers no other store: the wasm `OlmMachine` takes a
 * store *name* (`StoreHandle.open`) and opens it with the global `indexedDB`. Its pickles can
 * not be exported and imported again (the `Migration` class only imports libolm pickles, into
 * that same IndexedDB). So the narrowest adapter it accepts is an IndexedDB, and we give it
 * one: fake-indexeddb's in-memory engine (pure JS, no native code), filled from the channel
 * state store (ChannelState: SQLite on one node, PostgreSQL in a cluster, both held by the
 * storage contract) when a listen starts, and written through after every committed
 * read-write IndexedDB transaction — that transaction's entries in one ChannelState.write,
 * so our database has each transaction whole or not at all, in commit order.
 *
 * Why not the alternatives: a side file (an IndexedDB dumped to disk) would not follow the
 * channel to another node of a cluster; memory only makes a new device at every start, whose
 * people's clients then warn about, and which cannot read what was sent to the old one.
 *
 * Durability: IndexedDB commits in memory first; our copy lands a moment later. `flush()` waits
 * for every commit so far to be in our database: the channel calls it before it saves a /sync
 * token (a to-device message that made an Olm session is then never confirmed to the
 * homeserver before the session is stored) and before it sends an encrypted event (the Megolm
 * ratchet is stored past the index the event used, so a restart never reuses an index). If a
 * write fails, flush rejects and the listen restarts, reloading the state from our database:
 * what was not stored is dropped in memory too, never half kept.
 *
 * Layout in ChannelState: `e2ee-db/<db>` is a database's schema (version, stores, indexes);
 * `e2ee/<db>/<store>/<key hash>` one record (its key and value, v8-serialized — the structured
 * clone format IndexedDB itself stores). Each open makes a fresh IDBFactory, so nothing of one
 * listen (or one channel) leaks into the next; it is made the process's `indexedDB` only for
 * the moment the OlmMachine opens its store.
 */
import { createHash } from 'node:crypto';
import { deserialize, serialize } from 'node:v8';
import type { Logger } from 'pino';
import type { ChannelState, ChannelStateEntry } from '../../src/channel-state.ts';
import { GLOBAL_CLASSES, type FakeIndexedDb, type IDBCursor, type IDBDatabase, type IDBFactory, type IDBIndex, type IDBObjectStore, type IDBOpenDBRequest, type IDBRequest, type IDBTransaction, type IDBTransactionMode, type IDBValidKey } from './idb.ts';

const RECORD = 'e2ee/';
const SCHEMA = 'e2ee-db/';

interface IndexSchema {
  readonly name: string;
  readonly keyPath: string | string[];
  readonly unique: boolean;
  readonly multiEntry: boolean;
}
interface StoreSchema {
  readonly name: string;
  readonly keyPath: string | string[] | null;
  readonly autoIncrement: boolean;
  readonly indexes: readonly IndexSchema[];
}
interface DbSchema {
  readonly name: string;
  readonly version: number;
  readonly stores: readonly StoreSchema[];
}

const hash = (data: string | Buffer): string => createHash('sha256').update(data).digest('base64url').slice(0, 32);
const recordPrefix = (db: string, store?: string): string => `${RECORD}${hash(db)}/${store === undefined ? '' : `${store}/`}`;
const recordKey = (db: string, store: string, key: unknown): string => `${recordPrefix(db, store)}${hash(serialize(key))}`;
const encode = (key: unknown, value: unknown): string => serialize({ k: key, v: value }).toString('base64');
const decode = (text: string): { k: IDBValidKey; v: unknown } => deserialize(Buffer.from(text, 'base64')) as { k: IDBValidKey; v: unknown };

/** Waits for an IDBRequest. */
function done<T>(request: IDBRequest<T>): Promise<T> {
  return new Promise((resolve, reject) => {
    request.addEventListener('success', () => resolve(request.result));
    request.addEventListener('error', () => reject(request.error ?? new Error('IndexedDB request failed')));
  });
}
function committed(tx: IDBTransaction): Promise<void> {
  return new Promise((resolve, reject) => {
    tx.addEventListener('complete', () => resolve());
    tx.addEventListener('abort', () => reject(tx.error ?? new Error('IndexedDB transaction aborted')));
    tx.addEventListener('error', () => reject(tx.error ?? new Error('IndexedDB transaction failed')));
  });
}

/** What one read-write transaction changed in one object store. */
interface StoreChanges {
  /** Cleared, or changed in a way we do not follow record by record (a cursor, a key range): stored again whole. */
  whole: boolean;
  readonly records: Map<string, { readonly key: unknown; readonly value: unknown } | null>;
}

export interface PersistentIndexedDb {
  /** The databases restored from our database (the others are new). */
  readonly restored: readonly string[];
  /** The factory holding the restored databases; the OlmMachine must open its store through it (see `asGlobal`). */
  readonly factory: IDBFactory;
  /** Runs `open` with `factory` as the process's `indexedDB` (the wasm reads the global). */
  asGlobal<T>(open: () => Promise<T>): Promise<T>;
  /** Resolves when every IndexedDB commit so far is in our database; rejects if one could not be written. */
  flush(): Promise<void>;
  /** Deletes every database of this store, here and in our database (a reset of the bot's device). */
  wipe(): Promise<void>;
}

/** Restores the databases kept in `state` into a fresh in-memory IndexedDB and writes its commits back. */
export async function openPersistentIndexedDb(state: ChannelState, log: Logger): Promise<PersistentIndexedDb> {
  const fake = (await import('fake-indexeddb')) as unknown as FakeIndexedDb;
  // The classes must be globals too (what fake-indexeddb/auto does): the wasm checks values with instanceof.
  const global = globalThis as Record<string, unknown>;
  for (const name of GLOBAL_CLASSES) global[name] ??= fake[name];
  const { IDBFactory: Factory, IDBKeyRange: KeyRange } = fake;
  const factory: IDBFactory = new Factory();
  const schemas = (await state.list(SCHEMA)).map((entry) => JSON.parse(entry.value) as DbSchema);
  for (const schema of schemas) await restore(schema);

  const openUnwatched = factory.open.bind(factory);
  let tail: Promise<void> = Promise.resolve();
  let failure: unknown;

  async function restore(schema: DbSchema): Promise<void> {
    const open = factory.open(schema.name, schema.version);
    open.addEventListener('upgradeneeded', () => {
      const db = open.result;
      for (const store of schema.stores) {
        const made = db.createObjectStore(store.name, { keyPath: store.keyPath, autoIncrement: store.autoIncrement });
        for (const index of store.indexes) made.createIndex(index.name, index.keyPath, { unique: index.unique, multiEntry: index.multiEntry });
      }
    });
    const db = await done(open);
    try {
      const entries = await state.list(recordPrefix(schema.name));
      if (entries.length === 0 || db.objectStoreNames.length === 0) return;
      const tx = db.transaction([...db.objectStoreNames], 'readwrite');
      const byHash = new Map(schema.stores.map((store) => [recordPrefix(schema.name, store.name), store]));
      for (const entry of entries) {
        const prefix = entry.key.slice(0, entry.key.lastIndexOf('/') + 1);
        const store = byHash.get(prefix);
        if (!store) continue;
        const { k, v } = decode(entry.value);
        if (store.keyPath === null) tx.objectStore(store.name).put(v, k);
        else tx.objectStore(store.name).put(v);
      }
      await committed(tx);
      log.debug({ database: schema.name, records: entries.length }, 'restored the Matrix crypto store');
    } finally {
      db.close();
    }
  }

  function schemaOf(db: IDBDatabase): DbSchema {
    const names = [...db.objectStoreNames];
    if (names.length === 0) return { name: db.name, version: db.version, stores: [] };
    const tx = db.transaction(names, 'readonly');
    const stores = names.map((name) => {
      const store = tx.objectStore(name);
      const indexes = [...store.indexNames].map((indexName) => {
        const index = store.index(indexName);
        return { name: index.name, keyPath: index.keyPath, unique: index.unique, multiEntry: index.multiEntry };
      });
      return { name, keyPath: store.keyPath, autoIncrement: store.autoIncrement, indexes };
    });
    return { name: db.name, version: db.version, stores };
  }

  /**
   * Every record of `storeName` as it is now (after a commit we could not follow record by
   * record), through a connection of our own: the SDK may have closed its own by now.
   */
  async function readWhole(dbName: string, storeName: string): Promise<ChannelStateEntry[]> {
    const db = await done(openUnwatched(dbName));
    try {
      if (![...db.objectStoreNames].includes(storeName)) return []; // deleted since (an SDK migration)
      const tx = db.transaction(storeName, 'readonly');
      const store = tx.objectStore(storeName);
      const [keys, values] = await Promise.all([done(store.getAllKeys()), done(store.getAll())]);
      return keys.map((key, i) => ({ key: recordKey(dbName, storeName, key), value: encode(key, values[i]) }));
    } finally {
      db.close();
    }
  }

  /** Queues the write of one committed transaction (in commit order); `schema` when the database's schema changed. */
  function persist(db: IDBDatabase, changes: Map<string, StoreChanges>, schema?: DbSchema): void {
    tail = tail.then(async () => {
      if (failure !== undefined) return; // the listen restarts and reloads: writing on would store a gap
      try {
        const put: ChannelStateEntry[] = [];
        const remove = new Set<string>();
        if (schema) {
          put.push({ key: `${SCHEMA}${hash(db.name)}`, value: JSON.stringify(schema) });
          // Stores a migration dropped go with their records.
          for (const entry of await state.list(recordPrefix(db.name))) remove.add(entry.key);
        }
        for (const [storeName, change] of changes) {
          if (change.whole) {
            const now = await readWhole(db.name, storeName);
            for (const entry of await state.list(recordPrefix(db.name, storeName))) remove.add(entry.key);
            for (const entry of now) {
              remove.delete(entry.key);
              put.push(entry);
            }
            continue;
          }
          for (const [, record] of change.records) {
            if (record === null) continue;
            put.push({ key: recordKey(db.name, storeName, record.key), value: encode(record.key, record.value) });
          }
          for (const [key, record] of change.records) if (record === null) remove.add(key);
        }
        await state.write({ put, delete: [...remove] });
      } catch (error) {
        failure = error;
        log.error({ err: error }, 'could not store the Matrix crypto state; the channel restarts from what was stored');
      }
    });
  }

  /** Follows a read-write transaction's changes and writes them when it commits. */
  function watch(db: IDBDatabase, tx: IDBTransaction): void {
    const changes = new Map<string, StoreChanges>();
    const of = (name: string): StoreChanges => {
      let change = changes.get(name);
      if (!change) changes.set(name, (change = { whole: false, records: new Map() }));
      return change;
    };
    const objectStore = tx.objectStore.bind(tx);
    tx.objectStore = (name: string): IDBObjectStore => {
      const store = objectStore(name);
      const change = of(name);
      const { put, add, delete: remove, clear, openCursor, index } = store;
      const track = (request: IDBRequest<IDBValidKey>, value: unknown): IDBRequest<IDBValidKey> => {
        // The structured clone is taken now, as IndexedDB takes it.
        const copy = deserialize(serialize(value)) as unknown;
        request.addEventListener('success', () => change.records.set(recordKey(db.name, name, request.result), { key: request.result, value: copy }));
        return request;
      };
      store.put = (value: unknown, key?: IDBValidKey) => track(put.call(store, value, key), value);
      store.add = (value: unknown, key?: IDBValidKey) => track(add.call(store, value, key), value);
      store.delete = (query: unknown) => {
        if (query instanceof KeyRange) change.whole = true;
        else change.records.set(recordKey(db.name, name, query), null);
        return remove.call(store, query);
      };
      store.clear = () => {
        change.whole = true;
        return clear.call(store);
      };
      // A cursor in a read-write transaction may update or delete the records it passes over.
      const followCursor = (request: IDBRequest<IDBCursor | null>): IDBRequest<IDBCursor | null> => {
        const patched = new WeakSet<IDBCursor>();
        request.addEventListener('success', () => {
          const cursor = request.result;
          if (!cursor || patched.has(cursor)) return;
          patched.add(cursor);
          const { update, delete: drop } = cursor;
          cursor.update = (value: unknown) => {
            const key = cursor.primaryKey;
            change.records.set(recordKey(db.name, name, key), { key, value: deserialize(serialize(value)) as unknown });
            return update.call(cursor, value);
          };
          cursor.delete = () => {
            change.records.set(recordKey(db.name, name, cursor.primaryKey), null);
            return drop.call(cursor);
          };
        });
        return request;
      };
      store.openCursor = (...args: Parameters<IDBObjectStore['openCursor']>) => followCursor(openCursor.apply(store, args));
      store.index = (indexName: string) => {
        const found = index.call(store, indexName);
        const indexCursor = found.openCursor;
        found.openCursor = (...args: Parameters<IDBIndex['openCursor']>) => followCursor(indexCursor.apply(found, args));
        return found;
      };
      return store;
    };
    tx.addEventListener('complete', () => {
      if ([...changes.values()].some((change) => change.whole || change.records.size > 0)) persist(db, changes);
    });
  }

  /** Wraps `factory.open`: every database opened through it is followed. */
  const open = openUnwatched;
  factory.open = (name: string, version?: number): IDBOpenDBRequest => {
    const request = open(name, version);
    let upgraded = false;
    request.addEventListener('upgradeneeded', () => {
      upgraded = true;
    });
    request.addEventListener('success', () => {
      const db = request.result;
      if (upgraded) {
        // A new database, or the SDK's migration of one: its schema, and whatever the upgrade wrote, stored whole.
        const schema = schemaOf(db);
        persist(db, new Map(schema.stores.map((store) => [store.name, { whole: true, records: new Map() }])), schema);
      }
      const transaction = db.transaction.bind(db);
      db.transaction = ((stores: string | string[], mode?: IDBTransactionMode, options?: unknown) => {
        const tx = transaction(stores, mode, options);
        if (mode === 'readwrite') watch(db, tx);
        return tx;
      }) as IDBDatabase['transaction'];
    });
    return request;
  };

  return {
    factory,
    restored: schemas.map((schema) => schema.name),
    async asGlobal<T>(run: () => Promise<T>): Promise<T> {
      const before = global.indexedDB;
      global.indexedDB = factory;
      try {
        return await run();
      } finally {
        global.indexedDB = before;
      }
    },
    async flush(): Promise<void> {
      await tail;
      if (failure !== undefined) throw new Error('the Matrix crypto state could not be stored', { cause: failure });
    },
    async wipe(): Promise<void> {
      await tail;
      const stored = await state.list(RECORD);
      const dbs = await state.list(SCHEMA);
      await state.write({ delete: [...stored, ...dbs].map((entry) => entry.key) });
      for (const db of await factory.databases()) if (db.name !== undefined) await done(factory.deleteDatabase(db.name) as IDBRequest<unknown>);
    },
  };
}
