import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { pino } from 'pino';
import type { ChannelState } from '../../src/channel-state.ts';
import { testChannelState } from '../../test/support/channel-state.ts';
import { openPersistentIndexedDb, type PersistentIndexedDb } from './crypto-store.ts';
import type { IDBDatabase, IDBFactory, IDBRequest, IDBTransaction } from './idb.ts';

const log = pino({ level: 'silent' });
/** fake-indexeddb's IDBKeyRange, a global once a store was opened (the project compiles without the DOM types). */
const keyRange = (): { bound(lower: string, upper: string): unknown } => (globalThis as unknown as { IDBKeyRange: { bound(lower: string, upper: string): unknown } }).IDBKeyRange;

const done = <T>(request: IDBRequest<T>): Promise<T> =>
  new Promise((resolve, reject) => {
    request.addEventListener('success', () => resolve(request.result));
    request.addEventListener('error', () => reject(request.error ?? new Error('failed')));
  });
const committed = (tx: IDBTransaction): Promise<void> =>
  new Promise((resolve, reject) => {
    tx.addEventListener('complete', () => resolve());
    tx.addEventListener('abort', () => reject(tx.error ?? new Error('aborted')));
  });

/** Opens `name` as the SDK does (its schema made in an upgrade). */
function open(factory: IDBFactory, version = 1): Promise<IDBDatabase> {
  const request = factory.open('db', version);
  request.addEventListener('upgradeneeded', () => {
    const db = request.result;
    if (![...db.objectStoreNames].includes('inline')) db.createObjectStore('inline', { keyPath: 'id', autoIncrement: false }).createIndex('by_room', 'room', { unique: false, multiEntry: false });
    if (![...db.objectStoreNames].includes('outofline')) db.createObjectStore('outofline', { keyPath: null, autoIncrement: false });
  });
  return done(request);
}

async function contents(store: PersistentIndexedDb): Promise<Record<string, unknown>> {
  const db = await open(store.factory);
  const tx = db.transaction(['inline', 'outofline'], 'readonly');
  const result: Record<string, unknown> = {};
  for (const name of ['inline', 'outofline']) {
    const [keys, values] = await Promise.all([done(tx.objectStore(name).getAllKeys()), done(tx.objectStore(name).getAll())]);
    result[name] = keys.map((key, i) => [key, values[i]]);
  }
  db.close();
  return result;
}

describe('the Matrix crypto store (IndexedDB over the channel state)', () => {
  it('restores every committed change from the channel state: puts, adds, deletes, clears, key ranges, cursor updates and deletes', async () => {
    const state = testChannelState('matrix');
    const first = await openPersistentIndexedDb(state, log);
    const db = await open(first.factory);
    let tx = db.transaction(['inline', 'outofline'], 'readwrite');
    for (let i = 0; i < 5; i++) tx.objectStore('inline').put({ id: `s${i}`, room: i % 2 === 0 ? '!a' : '!b', bytes: new Uint8Array([i, 1, 2]) });
    tx.objectStore('outofline').add({ n: 1 }, ['k', 1]);
    tx.objectStore('outofline').put('two', 'k2');
    tx.objectStore('outofline').put('gone', 'k3');
    await committed(tx);
    tx = db.transaction(['inline', 'outofline'], 'readwrite');
    tx.objectStore('outofline').delete('k3');
    tx.objectStore('inline').delete(keyRange().bound('s3', 's4'));
    const cursor = tx.objectStore('inline').index('by_room').openCursor('!a');
    cursor.addEventListener('success', () => {
      const at = cursor.result as unknown as { value: { id: string }; update(v: unknown): void; delete(): void; continue(): void } | null;
      if (!at) return;
      if (at.value.id === 's0') at.update({ ...at.value, edited: true });
      else at.delete();
      at.continue();
    });
    await committed(tx);
    // A read-only transaction changes nothing; an aborted one is not stored.
    tx = db.transaction('outofline', 'readwrite');
    tx.objectStore('outofline').put('aborted', 'k4');
    (tx as unknown as { abort(): void }).abort();
    await committed(tx).catch(() => undefined);
    await first.flush();
    db.close();
    const expected = await contents(first);
    assert.deepEqual(expected, {
      inline: [
        ['s0', { id: 's0', room: '!a', bytes: new Uint8Array([0, 1, 2]), edited: true }],
        ['s1', { id: 's1', room: '!b', bytes: new Uint8Array([1, 1, 2]) }],
      ],
      outofline: [
        ['k2', 'two'],
        [['k', 1], { n: 1 }],
      ],
    });

    const second = await openPersistentIndexedDb(state, log);
    assert.deepEqual(await contents(second), expected, 'the same after a restart');
    const db2 = await open(second.factory);
    tx = db2.transaction('outofline', 'readwrite');
    tx.objectStore('outofline').clear();
    await committed(tx);
    await second.flush();
    db2.close();
    const third = await openPersistentIndexedDb(state, log);
    assert.deepEqual((await contents(third)).outofline, []);
  });

  it('keeps a schema change (an SDK migration) with its stores, and wipes everything on a reset', async () => {
    const state = testChannelState('matrix');
    const first = await openPersistentIndexedDb(state, log);
    let db = await open(first.factory, 1);
    const tx = db.transaction('inline', 'readwrite');
    tx.objectStore('inline').put({ id: 'x', room: '!a' });
    await committed(tx);
    db.close();
    const upgrade = first.factory.open('db', 2);
    upgrade.addEventListener('upgradeneeded', () => upgrade.result.createObjectStore('added', { keyPath: null, autoIncrement: false }).put('v', 'k'));
    db = await done(upgrade);
    db.close();
    await first.flush();
    const second = await openPersistentIndexedDb(state, log);
    const again = await done(second.factory.open('db'));
    assert.equal(again.version, 2);
    assert.deepEqual([...again.objectStoreNames].sort(), ['added', 'inline', 'outofline']);
    assert.equal(await done(again.transaction('added', 'readonly').objectStore('added').getAll()).then((v) => v.length), 1);
    again.close();
    await second.wipe();
    assert.equal((await state.list('e2ee')).length, 0);
  });

  it('rejects flush when a commit could not be stored, and stores nothing after it', async () => {
    const real = testChannelState('matrix');
    let fail = false;
    const state: ChannelState = { ...real, write: (changes) => (fail ? Promise.reject(new Error('disk full')) : real.write(changes)) };
    const store = await openPersistentIndexedDb(state, log);
    const db = await open(store.factory);
    await store.flush();
    fail = true;
    let tx = db.transaction('outofline', 'readwrite');
    tx.objectStore('outofline').put('lost', 'a');
    await committed(tx);
    await assert.rejects(store.flush(), /could not be stored/);
    fail = false;
    tx = db.transaction('outofline', 'readwrite');
    tx.objectStore('outofline').put('after', 'b');
    await committed(tx);
    await assert.rejects(store.flush(), /could not be stored/);
    db.close();
    const reloaded = await openPersistentIndexedDb(real, log);
    assert.deepEqual((await contents(reloaded)).outofline, [], 'neither the failed commit nor a later one: no gap');
  });
});
