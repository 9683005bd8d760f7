import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { KeyedPool } from './local-queue.ts';

/** A promise with its resolve exposed. */
function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

const tick = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

describe('KeyedPool', () => {
  it('runs items of one key in FIFO order, one at a time', async () => {
    const seen: string[] = [];
    let running = 0;
    let maxRunning = 0;
    const pool = new KeyedPool<number>({
      concurrency: 8,
      maxQueued: 100,
      worker: async (item, key) => {
        running++;
        maxRunning = Math.max(maxRunning, running);
        await tick();
        seen.push(`${key}:${item}`);
        running--;
      },
      onError: (error) => assert.fail(String(error)),
    });
    for (let i = 0; i < 10; i++) pool.enqueue('a', i);
    await pool.idle();
    assert.deepEqual(seen, Array.from({ length: 10 }, (_, i) => `a:${i}`));
    assert.equal(maxRunning, 1);
  });

  it('runs many keys in parallel, never more than the concurrency bound', async () => {
    let running = 0;
    let maxRunning = 0;
    const perKey = new Map<string, number>();
    const pool = new KeyedPool<number>({
      concurrency: 4,
      maxQueued: 1000,
      worker: async (_item, key) => {
        running++;
        perKey.set(key, (perKey.get(key) ?? 0) + 1);
        assert.equal(perKey.get(key), 1, `two items of ${key} ran at once`);
        maxRunning = Math.max(maxRunning, running);
        await new Promise((resolve) => setTimeout(resolve, 2));
        perKey.set(key, perKey.get(key)! - 1);
        running--;
      },
      onError: (error) => assert.fail(String(error)),
    });
    for (let i = 0; i < 200; i++) pool.enqueue(`k${i % 20}`, i);
    assert.equal(pool.inFlight, 4);
    await pool.idle();
    assert.equal(maxRunning, 4);
  });

  it('serves keys in the order their items arrived', async () => {
    const gate = deferred();
    const order: string[] = [];
    const pool = new KeyedPool<string>({
      concurrency: 1,
      maxQueued: 100,
      worker: async (item) => {
        if (item === 'block') await gate.promise;
        order.push(item);
      },
      onError: (error) => assert.fail(String(error)),
    });
    pool.enqueue('x', 'block');
    pool.enqueue('c', 'c1');
    pool.enqueue('a', 'a1');
    pool.enqueue('b', 'b1');
    pool.enqueue('a', 'a2');
    gate.resolve();
    await pool.idle();
    assert.deepEqual(order, ['block', 'c1', 'a1', 'b1', 'a2']);
  });

  it('makes producers wait when the queue is full (backpressure) and lets them on as it drains', async () => {
    const gate = deferred();
    const pool = new KeyedPool<number>({
      concurrency: 1,
      maxQueued: 3,
      worker: async () => gate.promise,
      onError: (error) => assert.fail(String(error)),
    });
    let accepted = 0;
    const producer = (async () => {
      for (let i = 0; i < 10; i++) {
        await pool.acquire();
        pool.enqueue(`k${i}`, i, { reserved: true });
        accepted++;
      }
    })();
    await tick();
    // one running + three queued; the fifth acquire waits
    assert.equal(pool.inFlight, 1);
    assert.equal(pool.queued, 3);
    assert.equal(accepted, 4);
    gate.resolve();
    await producer;
    await pool.idle();
    assert.equal(accepted, 10);
  });

  it('wakes a waiting producer when a reservation is given back (no deadlock when nothing runs)', async () => {
    const pool = new KeyedPool<number>({ concurrency: 1, maxQueued: 1, worker: async () => undefined, onError: (error) => assert.fail(String(error)) });
    await pool.acquire();
    let second = false;
    const waiting = pool.acquire().then(() => (second = true));
    await tick();
    assert.equal(second, false, 'the queue is full: the second producer waits');
    pool.release();
    await waiting;
    assert.equal(second, true);
    pool.enqueue('k', 1, { reserved: true });
    await pool.idle();
    assert.equal(pool.queued, 0);
    assert.equal(pool.inFlight, 0);
  });

  it('clearQueued wakes producers and keeps a running key FIFO for later items', async () => {
    const gate = deferred();
    const done: number[] = [];
    const pool = new KeyedPool<number>({
      concurrency: 1,
      maxQueued: 2,
      worker: async (item) => {
        if (item === 0) await gate.promise;
        done.push(item);
      },
      onError: (error) => assert.fail(String(error)),
    });
    pool.enqueue('k', 0);
    pool.enqueue('k', 1);
    pool.enqueue('j', 2);
    let admitted = false;
    const producer = pool.acquire().then(() => (admitted = true));
    await tick();
    assert.equal(admitted, false);
    assert.equal(pool.clearQueued(), 2);
    await producer;
    pool.enqueue('k', 3, { reserved: true });
    gate.resolve();
    await pool.idle();
    assert.deepEqual(done, [0, 3]);
  });

  it('reports a failing item and goes on', async () => {
    const errors: unknown[] = [];
    const done: number[] = [];
    const pool = new KeyedPool<number>({
      concurrency: 2,
      maxQueued: 10,
      worker: async (item) => {
        if (item === 1) throw new Error('boom');
        done.push(item);
      },
      onError: (error) => errors.push(error),
    });
    pool.enqueue('k', 1);
    pool.enqueue('k', 2);
    await pool.idle();
    assert.equal(errors.length, 1);
    assert.deepEqual(done, [2]);
  });

  it('clearQueued drops waiting items but lets running ones finish', async () => {
    const gate = deferred();
    const done: number[] = [];
    const pool = new KeyedPool<number>({
      concurrency: 1,
      maxQueued: 10,
      worker: async (item) => {
        await gate.promise;
        done.push(item);
      },
      onError: (error) => assert.fail(String(error)),
    });
    for (let i = 0; i < 5; i++) pool.enqueue('k', i);
    assert.equal(pool.clearQueued(), 4);
    gate.resolve();
    await pool.idle();
    assert.deepEqual(done, [0]);
  });

  it('rejects nonsense options', () => {
    const worker = async (): Promise<void> => undefined;
    assert.throws(() => new KeyedPool({ concurrency: 0, maxQueued: 1, worker, onError: () => undefined }), /concurrency/);
    assert.throws(() => new KeyedPool({ concurrency: 1, maxQueued: 0, worker, onError: () => undefined }), /maxQueued/);
  });
});
