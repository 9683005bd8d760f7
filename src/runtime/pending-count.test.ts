import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, it } from 'node:test';
import { testLogger } from '../../test/support/log.ts';
import { PendingCount } from './pending-count.ts';

describe('PendingCount', () => {
  it('counts at once after a quiet spell, then once per interval however many rounds end', async () => {
    let counts = 0;
    let unsent = 3;
    const pending = new PendingCount(async () => (counts++, unsent), testLogger(), 200);
    pending.stale();
    await sleep(20);
    assert.equal(counts, 1);
    assert.equal(pending.value, 3);
    unsent = 1;
    for (let i = 0; i < 10; i++) pending.stale();
    await sleep(20);
    assert.equal(counts, 1, 'within the interval: no count yet');
    await sleep(250);
    assert.equal(counts, 2, 'the rounds share the one count after the interval');
    assert.equal(pending.value, 1);
    pending.stop();
  });

  it('settled() counts at once, without waiting out the interval, and keeps the last value when a count fails', async () => {
    let unsent = 2;
    let fail = false;
    const pending = new PendingCount(
      async () => {
        if (fail) throw new Error('store away');
        return unsent;
      },
      testLogger(),
      60_000,
    );
    pending.stale();
    await pending.settled();
    assert.equal(pending.value, 2);
    unsent = 0;
    pending.stale();
    const started = performance.now();
    await pending.settled();
    assert.ok(performance.now() - started < 1000);
    assert.equal(pending.value, 0);
    fail = true;
    unsent = 5;
    pending.stale();
    await pending.settled();
    assert.equal(pending.value, 0);
    pending.stop();
    pending.stale();
    await pending.settled();
    assert.equal(pending.value, 0, 'stopped: no more counts');
  });
});
