import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DAY_MS, HOUR_MS, jumpingClock } from '../../test/support/clock.ts';
import { httpFailure } from './http.ts';

const call = { url: 'http://127.0.0.1:1/v1/chat/completions', timeoutMs: 1000, signal: new AbortController().signal };
const noCode = (): undefined => undefined;

describe('httpFailure: Retry-After', () => {
  it('reads seconds, milliseconds and an HTTP date', async () => {
    const seconds = await httpFailure(call, new Response('{}', { status: 429, headers: { 'retry-after': '7' } }), noCode);
    assert.equal(seconds.retryAfterMs, 7000);
    const ms = await httpFailure(call, new Response('{}', { status: 429, headers: { 'retry-after-ms': '250' } }), noCode);
    assert.equal(ms.retryAfterMs, 250);
  });

  for (const jump of [HOUR_MS, -HOUR_MS, DAY_MS, -DAY_MS]) {
    it(`an HTTP date is read against the server's Date header, so a local clock stepped ${jump / HOUR_MS} h still waits 5 s`, async (t) => {
      const served = Math.floor(Date.now() / 1000) * 1000;
      const local = jumpingClock({ mock: t.mock });
      local.jump(jump);
      const headers = { date: new Date(served).toUTCString(), 'retry-after': new Date(served + 5000).toUTCString() };
      const failure = await httpFailure(call, new Response('{"error":{"message":"slow down"}}', { status: 429, headers }), noCode);
      assert.equal(failure.retryAfterMs, 5000);
      assert.equal(failure.retryable, true);
    });
  }
});
