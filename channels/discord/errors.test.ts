import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DiscordAPIError, HTTPError, RateLimitError } from 'discord.js';
import { SendError } from '../../src/channel.ts';
import { isGone, toSendError } from './errors.ts';

const apiError = (status: number, code: number, extra: Record<string, unknown> = {}) =>
  new DiscordAPIError({ message: 'x', code, ...extra }, code, status, 'POST', 'http://discord/api/v10/channels/1/messages', { files: undefined, body: {} });

describe('discord error mapping', () => {
  it('missing access, unknown channel / message and bad requests are permanent', () => {
    for (const [status, code] of [
      [403, 50001],
      [403, 50013],
      [404, 10003],
      [404, 10008],
      [400, 50035],
      [413, 40005],
    ] as const) {
      const error = toSendError(apiError(status, code), 'send');
      assert.ok(error instanceof SendError);
      assert.equal(error.permanent, true, `${status} ${code}`);
      assert.equal(error.retryAfterMs, undefined);
    }
  });

  it('server errors and network failures are retried', () => {
    assert.equal(toSendError(new HTTPError(502, 'Bad Gateway', 'POST', 'u', { files: undefined, body: {} }), 'send').permanent, false);
    assert.equal(toSendError(apiError(500, 0), 'send').permanent, false);
    const network = toSendError(Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }), 'send');
    assert.equal(network.permanent, false);
    assert.match(network.message, /ECONNREFUSED/);
  });

  it('a rate limit the REST client rejects carries its wait', () => {
    const limited = new RateLimitError({
      timeToReset: 4321, limit: 5, method: 'POST', hash: 'h', url: 'u', route: '/channels/:id/messages', majorParameter: '1', global: false, retryAfter: 4000, sublimitTimeout: 0, scope: 'user',
    });
    const error = toSendError(limited, 'send');
    assert.equal(error.permanent, false);
    assert.equal(error.retryAfterMs, 4321);
    assert.equal(error.scope, 'chat', 'a route bucket covers one channel');
  });

  it('a global rate limit (every request of the bot) holds the whole channel', () => {
    const limited = new RateLimitError({
      timeToReset: 2500, limit: 50, method: 'POST', hash: 'Global(POST:/channels/:id/typing)', url: 'u', route: '/channels/:id/typing', majorParameter: '1', global: true, retryAfter: 3000, sublimitTimeout: 0, scope: 'global',
    });
    const error = toSendError(limited, 'typing');
    assert.equal(error.retryAfterMs, 3000);
    assert.equal(error.scope, 'channel');
    const raw = toSendError(apiError(429, 0, { retry_after: 2, global: true }), 'edit');
    assert.equal(raw.retryAfterMs, 2000);
    assert.equal(raw.scope, 'channel');
  });

  it('a 429 that arrives as an API error uses retry_after (seconds)', () => {
    const error = toSendError(apiError(429, 0, { retry_after: 1.5 }), 'send');
    assert.equal(error.permanent, false);
    assert.equal(error.retryAfterMs, 1500);
    assert.equal(error.scope, 'chat');
  });

  it('keeps a SendError as it is, and knows when a channel is gone', () => {
    const original = new SendError('x', { permanent: true });
    assert.equal(toSendError(original, 'send'), original);
    assert.equal(isGone(apiError(404, 10003)), true);
    assert.equal(isGone(apiError(403, 50001)), true);
    assert.equal(isGone(apiError(500, 0)), false);
  });
});
