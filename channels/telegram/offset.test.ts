import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { pino } from 'pino';
import { channelState } from '../../src/store/channel-state.ts';
import { sqliteFile, testChannelState } from '../../test/support/channel-state.ts';
import { OFFSET_TRUSTED_MS, OffsetStore } from './offset.ts';

const log = pino({ level: 'silent' });

describe('telegram getUpdates offset', () => {
  it('a new owner on another node starts from the offset the last owner stored', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sb-tg-offset-'));
    const [nodeA, nodeB] = [sqliteFile(join(dir, 'switchboard.db')), sqliteFile(join(dir, 'switchboard.db'))];
    try {
      const owner = new OffsetStore({ state: channelState(nodeA, 'telegram'), bot: '42', log });
      assert.equal(await owner.load(), undefined, 'nothing stored yet: the server decides');
      await owner.save(1001);
      const next = new OffsetStore({ state: channelState(nodeB, 'telegram'), bot: '42', log });
      assert.equal(await next.load(), 1001);
    } finally {
      await Promise.all([nodeA.close(), nodeB.close()]);
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('ignores an offset of another bot, an old one, and an unreadable one', async () => {
    let now = 1_000_000_000;
    const state = testChannelState('telegram');
    await new OffsetStore({ state, bot: '42', log, now: () => now }).save(77);
    assert.equal(await new OffsetStore({ state, bot: '43', log, now: () => now }).load(), undefined, 'another bot (a new token)');
    now += OFFSET_TRUSTED_MS;
    assert.equal(await new OffsetStore({ state, bot: '42', log, now: () => now }).load(), undefined, 'a day old: Telegram may have renumbered');
    await state.put('offset', 'not json');
    assert.equal(await new OffsetStore({ state, bot: '42', log, now: () => now }).load(), undefined);
  });

  it('reports a failed save and does not reject', async () => {
    const reported: string[] = [];
    const real = testChannelState('telegram');
    const failing = { ...real, put: async () => Promise.reject(Object.assign(new Error('disk full'), { code: 'SQLITE_FULL' })) };
    const store = new OffsetStore({ state: failing, bot: '42', log, storage: { failed: (_error, what) => (reported.push(what), undefined) } });
    await store.save(5);
    assert.deepEqual(reported, ['save the Telegram getUpdates offset']);
  });
});
