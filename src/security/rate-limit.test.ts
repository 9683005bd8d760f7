import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DAY_MS, HOUR_MS, jumpingClock } from '../../test/support/clock.ts';
import { createRateLimiter } from './rate-limit.ts';

function clock(start = 1_000_000) {
  let t = start;
  return { now: () => t, advance: (ms: number) => (t += ms) };
}

describe('rate limiter', () => {
  it('allows `limit` takes per window and says when the next one fits', () => {
    const time = clock();
    const limiter = createRateLimiter({ limit: 3, windowMs: 1000, now: time.now });
    assert.deepEqual(limiter.take('alice'), { ok: true });
    time.advance(100);
    assert.deepEqual(limiter.take('alice'), { ok: true });
    time.advance(100);
    assert.deepEqual(limiter.take('alice'), { ok: true });
    time.advance(100);
    assert.deepEqual(limiter.take('alice'), { ok: false, retryAfterMs: 700 });
    // Refusals are not counted: the window still frees up when the first take expires.
    time.advance(699);
    assert.deepEqual(limiter.take('alice'), { ok: false, retryAfterMs: 1 });
    time.advance(1);
    assert.deepEqual(limiter.take('alice'), { ok: true });
    assert.deepEqual(limiter.take('alice'), { ok: false, retryAfterMs: 100 });
  });

  it('slides rather than resetting at fixed boundaries', () => {
    const time = clock();
    const limiter = createRateLimiter({ limit: 2, windowMs: 1000, now: time.now });
    time.advance(900);
    limiter.take('k');
    limiter.take('k');
    time.advance(200); // a fixed window would have reset here
    assert.equal(limiter.take('k').ok, false);
    time.advance(800);
    assert.equal(limiter.take('k').ok, true);
  });

  it('keeps keys apart', () => {
    const time = clock();
    const limiter = createRateLimiter({ limit: 1, windowMs: 1000, now: time.now });
    assert.equal(limiter.take('alice').ok, true);
    assert.equal(limiter.take('bob').ok, true);
    assert.equal(limiter.take('alice').ok, false);
  });

  it('forgets keys whose window has passed', () => {
    const time = clock();
    const limiter = createRateLimiter({ limit: 5, windowMs: 1000, now: time.now });
    for (let i = 0; i < 100; i++) limiter.take(`sender-${i}`);
    assert.equal(limiter.size(), 100);
    time.advance(1001);
    limiter.take('late');
    assert.equal(limiter.size(), 1);
  });

  it('stays within maxKeys, evicting the least recently used key', () => {
    const time = clock();
    const limiter = createRateLimiter({ limit: 1, windowMs: 60_000, maxKeys: 3, now: time.now });
    limiter.take('a');
    limiter.take('b');
    limiter.take('c');
    limiter.take('a'); // refused, but touches a
    limiter.take('d'); // evicts b
    assert.equal(limiter.size(), 3);
    assert.equal(limiter.take('a').ok, false);
    assert.equal(limiter.take('b').ok, true);
  });

  it('holds at most maxKeys senders (default 10,000) however many write in one window', () => {
    const time = clock();
    const limiter = createRateLimiter({ limit: 1, windowMs: 3_600_000, now: time.now });
    for (let i = 0; i < 100_000; i++) {
      assert.equal(limiter.take(`telegram:${i}`).ok, true);
      time.advance(10);
    }
    assert.ok(limiter.size() <= 10_000 && limiter.size() >= 9_900, `${limiter.size()} senders remembered`);
    // The most recent senders are the ones remembered; a forgotten one starts again.
    assert.equal(limiter.take('telegram:99999').ok, false);
    assert.equal(limiter.take('telegram:0').ok, true);
    assert.ok(limiter.size() <= 10_000);
    time.advance(3_600_000);
    limiter.take('late');
    assert.equal(limiter.size(), 1, 'expired windows are dropped');
  });

  it('rejects bad options eagerly', () => {
    assert.throws(() => createRateLimiter({ limit: 0, windowMs: 1000 }), /limit must be a positive integer, got 0/);
    assert.throws(() => createRateLimiter({ limit: 1.5, windowMs: 1000 }), TypeError);
    assert.throws(() => createRateLimiter({ limit: 1, windowMs: -1 }), /windowMs/);
    assert.throws(() => createRateLimiter({ limit: 1, windowMs: 1000, maxKeys: 0 }), /maxKeys/);
  });
});

describe('rate limiter when the wall clock jumps', () => {
  for (const jump of [HOUR_MS, -HOUR_MS, DAY_MS, -DAY_MS]) {
    it(`by default it counts on the monotonic clock: a step of ${jump / HOUR_MS} h neither opens a full window nor holds it shut`, (t) => {
      const wall = jumpingClock({ mock: t.mock }); // Date.now() follows this clock for the test
      const limiter = createRateLimiter({ limit: 2, windowMs: 60_000 });
      assert.equal(limiter.take('alice').ok, true);
      assert.equal(limiter.take('alice').ok, true);
      wall.jump(jump);
      const refused = limiter.take('alice');
      assert.equal(refused.ok, false, 'still two takes in the last minute');
      assert.ok(!refused.ok && refused.retryAfterMs <= 60_000, `retry after at most the window, not the step: ${JSON.stringify(refused)}`);
    });
  }
});
