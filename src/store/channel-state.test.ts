/**
 * prune() deciding from the figures it carries forward (channel-state-totals.ts) keeps exactly
 * what a full count would: each limit, another writer of the same channel, updates in place,
 * renewed entries and deletes by key.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { openDatabase } from './db.ts';
import { sqliteDatabase } from './sqlite-sql.ts';
import { channelState } from './channel-state.ts';

const keys = async (state: ReturnType<typeof channelState>, prefix = 'r:'): Promise<string[]> => (await state.list(prefix)).map((entry) => entry.key);

describe('channel state prune from known figures', () => {
  it('keeps the newest `keep` at every write, as a full count does', async () => {
    const db = sqliteDatabase(openDatabase(':memory:'));
    const state = channelState(db, 'webhook');
    for (let i = 0; i < 200; i++) {
      await state.put(`r:${i}`, `v${i}`);
      if (i % 3 === 0) await state.put(`r:${i}`, `updated ${i}`); // in place
      await state.prune('r:', { keep: 20 });
      assert.equal((await keys(state)).length, Math.min(i + 1, 20));
    }
    assert.deepEqual(await keys(state), Array.from({ length: 20 }, (_, n) => `r:${180 + n}`));
  });

  it('notices another writer of the same channel and counts again', async () => {
    const db = sqliteDatabase(openDatabase(':memory:'));
    const mine = channelState(db, 'webhook');
    const theirs = channelState(db, 'webhook');
    for (let i = 0; i < 10; i++) await mine.put(`r:a${i}`, 'x');
    assert.equal(await mine.prune('r:', { keep: 10 }), 0);
    await theirs.put('r:b0', 'x');
    await theirs.put('r:b1', 'x');
    await mine.put('r:a10', 'x');
    assert.equal(await mine.prune('r:', { keep: 10 }), 3);
    assert.deepEqual(await keys(mine), ['r:a3', 'r:a4', 'r:a5', 'r:a6', 'r:a7', 'r:a8', 'r:a9', 'r:b0', 'r:b1', 'r:a10']);
  });

  it('counts again after a renew, a delete by key or a write of several', async () => {
    const db = sqliteDatabase(openDatabase(':memory:'));
    const state = channelState(db, 'webhook');
    for (let i = 0; i < 5; i++) await state.put(`r:${i}`, 'x');
    assert.equal(await state.prune('r:', { keep: 5 }), 0);
    await state.put('r:0', 'x', { renew: true });
    await state.put('r:5', 'x');
    assert.equal(await state.prune('r:', { keep: 5 }), 1);
    assert.deepEqual(await keys(state), ['r:2', 'r:3', 'r:4', 'r:0', 'r:5']);
    await state.delete(['r:3']);
    await state.write({ put: [{ key: 'r:6', value: 'x' }, { key: 'r:7', value: 'x' }] });
    assert.equal(await state.prune('r:', { keep: 5 }), 1);
    assert.deepEqual(await keys(state), ['r:4', 'r:0', 'r:5', 'r:6', 'r:7']);
  });

  it('follows bytes and age from the figures too', async () => {
    let now = 1000;
    const db = sqliteDatabase(openDatabase(':memory:'));
    const state = channelState(db, 'webhook', () => now);
    for (let i = 0; i < 10; i++) {
      await state.put(`r:${i}`, 'x'.repeat(10));
      assert.equal(await state.prune('r:', { maxBytes: 50, createdBefore: 0 }), i >= 5 ? 1 : 0);
    }
    await state.put('r:9', 'y'.repeat(30)); // in place, larger: now over the byte budget
    assert.equal(await state.prune('r:', { maxBytes: 50 }), 2);
    assert.deepEqual(await keys(state), ['r:7', 'r:8', 'r:9']);
    now = 5000;
    await state.put('r:10', 'z');
    assert.equal(await state.prune('r:', { maxBytes: 50, createdBefore: 2000 }), 3);
    assert.deepEqual(await keys(state), ['r:10']);
  });
});
