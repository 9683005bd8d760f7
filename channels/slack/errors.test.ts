import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { SendError } from '../../src/channel.ts';
import { toSendError } from './errors.ts';
import { parseListen } from '../../src/net.ts';

const platform = (error: string): Error => Object.assign(new Error(`An API error occurred: ${error}`), { code: 'slack_webapi_platform_error', data: { ok: false, error } });

describe('slack error mapping', () => {
  it('a rate limit carries Retry-After', () => {
    const error = toSendError(Object.assign(new Error('rate limited'), { code: 'slack_webapi_rate_limited_error', retryAfter: 7 }), 'chat.postMessage');
    assert.equal(error.retryAfterMs, 7000);
    assert.equal(error.permanent, false);
    assert.equal(error.scope, 'chat');
  });

  it('a rate limit covers what the method\'s limit covers: one chat (chat.postMessage) or the whole channel (tier limits)', () => {
    const limited = Object.assign(new Error('rate limited'), { code: 'slack_webapi_rate_limited_error', retryAfter: 3 });
    assert.equal(toSendError(limited, 'chat.update', 'channel').scope, 'channel');
    assert.equal(toSendError(platform('ratelimited'), 'chat.update', 'channel').scope, 'channel');
    assert.equal(toSendError(limited, 'chat.postMessage', 'chat').scope, 'chat');
  });

  it('errors retrying cannot fix are permanent', () => {
    for (const code of ['channel_not_found', 'not_in_channel', 'is_archived', 'invalid_auth', 'msg_too_long', 'message_not_found']) {
      assert.equal(toSendError(platform(code), 'x').permanent, true, code);
    }
  });

  it('outages and network failures are retried', () => {
    assert.equal(toSendError(platform('internal_error'), 'x').permanent, false);
    assert.equal(toSendError(platform('ratelimited'), 'x').retryAfterMs, 1000);
    assert.equal(toSendError(Object.assign(new Error('boom'), { code: 'slack_webapi_http_error', statusCode: 503 }), 'x').permanent, false);
    assert.equal(toSendError(Object.assign(new Error('bad'), { code: 'slack_webapi_http_error', statusCode: 400 }), 'x').permanent, true);
    assert.equal(toSendError(Object.assign(new Error('ECONNRESET'), { code: 'slack_webapi_request_error' }), 'x').permanent, false);
    const own = new SendError('mine', { permanent: true });
    assert.equal(toSendError(own, 'x'), own);
  });
});

describe('listen addresses', () => {
  it('parses listen addresses', () => {
    assert.deepEqual(parseListen('127.0.0.1:3000'), { host: '127.0.0.1', port: 3000 });
    assert.deepEqual(parseListen('[::1]:0'), { host: '::1', port: 0 });
    assert.throws(() => parseListen('nowhere'));
  });
});
