import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Pacer, type Clock } from './pacer.ts';

/** A virtual clock: `sleep` advances time at once, so the schedule is exact. */
function virtualClock(): Clock & { t: number } {
  const clock = {
    t: 0,
    now: () => clock.t,
    sleep: async (ms: number) => {
      clock.t += ms;
    },
  };
  return clock;
}

describe('irc pacing (token bucket)', () => {
  it('lets a burst through at once, then one line per 1/rate seconds', async () => {
    const clock = virtualClock();
    const pacer = new Pacer(2, 3, clock);
    const times: number[] = [];
    for (let i = 0; i < 7; i++) {
      await pacer.take();
      times.push(clock.t);
    }
    assert.deepEqual(times, [0, 0, 0, 500, 1000, 1500, 2000]);
  });

  it('never exceeds the rate over any window (plus the burst)', async () => {
    const clock = virtualClock();
    const rate = 3;
    const burst = 3;
    const pacer = new Pacer(rate, burst, clock);
    const times: number[] = [];
    await Promise.all(Array.from({ length: 40 }, () => pacer.take().then(() => times.push(clock.t))));
    assert.equal(times.length, 40);
    for (let i = 0; i < times.length; i++) {
      const windowEnd = times[i]! + 1000;
      const inWindow = times.filter((t) => t >= times[i]! && t < windowEnd).length;
      assert.ok(inWindow <= rate + burst, `${inWindow} lines within one second from ${times[i]}`);
    }
    assert.ok(times.at(-1)! >= ((40 - burst) / rate) * 1000 - 1, `40 lines took at least ${((40 - burst) / rate).toFixed(1)} s (${times.at(-1)})`);
  });

  it('refills after a quiet spell, up to the burst only', async () => {
    const clock = virtualClock();
    const pacer = new Pacer(1, 2, clock);
    await pacer.take();
    await pacer.take();
    assert.equal(pacer.available(), 0);
    clock.t += 60_000;
    assert.equal(pacer.available(), 2, 'a long pause refills the burst, not more');
  });

  it('hands out slots in the order they were asked for, across callers', async () => {
    const clock = virtualClock();
    const pacer = new Pacer(5, 1, clock);
    const order: string[] = [];
    await Promise.all(['a', 'b', 'c', 'd'].map((name) => pacer.take().then(() => order.push(name))));
    assert.deepEqual(order, ['a', 'b', 'c', 'd']);
  });

  it('drops a waiter whose signal aborts, and the others still go', async () => {
    const pacer = new Pacer(20, 1);
    await pacer.take();
    const abort = new AbortController();
    const cancelled = pacer.take(abort.signal);
    const next = pacer.take();
    abort.abort(new Error('stop'));
    await assert.rejects(cancelled, /stop/);
    await next;
  });
});
