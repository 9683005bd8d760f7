import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { describe, it } from 'node:test';
import { SendError } from '../../src/channel.ts';
import { toSendError } from './errors.ts';
import { parseListen } from '../../src/net.ts';
import { verifySignature } from './http.ts';

const platform = (error: string): Error => Object.assign(new Error(`An API error occurred: ${error}`), { code: 'slack_webapi_platform_error', data: { ok: false, error } });

describe('slack error mapping', () => {
  it('a rate limit carries Retry-After', () => {
    const error = toSendError(Object.assign(new Error('rate limited'), { code: 'slack_webapi_rate_limited_error', retryAfter: 7 }), 'chat.postMessage');
    assert.equal(error.retryAfterMs, 7000);
    assert.equal(error.permanent, false);
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

describe('slack request signatures', () => {
  const secret = 'shh';
  const body = Buffer.from('{"type":"event_callback"}');
  const now = 1_700_000_000_000;
  const sign = (ts: string, raw = body, key = secret): string => `v0=${createHmac('sha256', key).update(`v0:${ts}:${raw.toString()}`).digest('hex')}`;

  it('accepts Slack\'s signature of a recent request', () => {
    assert.equal(verifySignature(secret, '1700000000', sign('1700000000'), body, now), true);
    assert.equal(verifySignature(secret, '1699999760', sign('1699999760'), body, now), true);
  });

  it('rejects a wrong key, a changed body, a stale or missing timestamp and junk', () => {
    assert.equal(verifySignature(secret, '1700000000', sign('1700000000', body, 'other'), body, now), false);
    assert.equal(verifySignature(secret, '1700000000', sign('1700000000'), Buffer.from('{"type":"x"}'), now), false);
    assert.equal(verifySignature(secret, '1699999600', sign('1699999600'), body, now), false, 'older than 5 minutes');
    assert.equal(verifySignature(secret, '1700000400', sign('1700000400'), body, now), false, 'from the future');
    assert.equal(verifySignature(secret, undefined, sign('1700000000'), body, now), false);
    assert.equal(verifySignature(secret, '1700000000', undefined, body, now), false);
    assert.equal(verifySignature(secret, '1700000000', 'v0=short', body, now), false);
    assert.equal(verifySignature(secret, 'nope', sign('nope'), body, now), false);
  });

  it('parses listen addresses', () => {
    assert.deepEqual(parseListen('127.0.0.1:3000'), { host: '127.0.0.1', port: 3000 });
    assert.deepEqual(parseListen('[::1]:0'), { host: '::1', port: 0 });
    assert.throws(() => parseListen('nowhere'));
  });
});
