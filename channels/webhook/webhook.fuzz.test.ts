/**
 * Fuzzing the webhook channel's door: the signature header (checked before anything reads
 * the body) and the request validation after it.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { anyJson, fuzz, nastyText } from '../../test/support/fuzz.ts';
import { maxIdLength, parseWebhookRequest } from './request.ts';
import { sign, verify } from './signature.ts';

const secret = 'webhook-secret';
const body = fc.oneof(nastyText(200), anyJson.map((value) => JSON.stringify(value) ?? ''), fc.uint8Array({ maxLength: 200 }).map((b) => Buffer.from(b).toString('latin1')));
const header = fc.oneof(
  fc.constant(undefined),
  nastyText(80),
  fc.uint8Array({ minLength: 32, maxLength: 32 }).map((b) => `sha256=${Buffer.from(b).toString('hex')}`),
  fc.array(fc.string(), { maxLength: 3 }),
  fc.constantFrom('sha256=', 'sha1=abc', ` sha256=${'0'.repeat(64)} `, `SHA256=${'f'.repeat(64)}`, `t=1,v1=${'0'.repeat(64)}`, `t=${Math.floor(Date.now() / 1000)},v1=${'a'.repeat(64)}`),
);

describe('webhook (fuzz)', () => {
  it('random headers never verify; the right signature always does, for that body only; nothing throws', (t) => {
    fuzz(t, 'webhook signature', fc.tuple(body, header, fc.string({ minLength: 1, maxLength: 20 })), ([text, given, other]) => {
      const request = { key: 'k-1', body: Buffer.from(text, 'utf8') };
      assert.equal(verify(secret, request, given as string | string[] | undefined), false);
      assert.equal(verify(secret, request, given as string | string[] | undefined, { legacy: true }), false);
      assert.equal(verify(secret, request, sign(secret, request)), true);
      assert.equal(verify(secret, request, sign(secret, request).replace(/v1=(\w+)/, (_m, hex: string) => `v1=${hex.toUpperCase()}`)), true, 'hex digits in either case');
      assert.equal(verify(secret, { ...request, body: Buffer.concat([request.body, Buffer.from(other)]) }, sign(secret, request)), false);
      assert.equal(verify(secret, { ...request, key: other }, sign(secret, request)), false, 'another key');
      assert.equal(verify(`${secret}x`, request, sign(secret, request)), false);
    }, { runs: 500 });
  });

  it('any signed request is accepted with its fields intact, or refused with a 400 that says why', (t) => {
    const fields = fc.record({ sender: fc.oneof(nastyText(30), anyJson), conversation: fc.oneof(nastyText(30), anyJson), text: fc.oneof(nastyText(100), anyJson), callback_url: fc.oneof(fc.constant(undefined), fc.webUrl(), nastyText(30), anyJson) }, { requiredKeys: [] });
    const request = fc.tuple(fc.oneof(fields.map((f) => JSON.stringify(f)), body), fc.oneof(fc.constant(undefined), nastyText(30), fc.string({ minLength: 1, maxLength: 40 }), fc.array(fc.string(), { maxLength: 2 })));
    fuzz(t, 'webhook request', request, ([text, key]) => {
      const parsed = parseWebhookRequest({ 'idempotency-key': key as string | undefined }, Buffer.from(text, 'utf8'));
      if (!parsed.ok) {
        assert.equal(parsed.status, 400);
        assert.ok(parsed.error.length > 0);
        return;
      }
      const { id, sender, conversation, text: message, callbackUrl } = parsed.request;
      assert.equal(id, key);
      assert.ok(id.length <= maxIdLength && /^[\x21-\x7e]/.test(id));
      for (const value of [sender, conversation, message]) assert.ok(typeof value === 'string' && value.trim() !== '');
      assert.ok(sender.length <= maxIdLength && conversation.length <= maxIdLength);
      const sent = JSON.parse(text) as Record<string, unknown>;
      assert.equal(message, sent.text);
      if (callbackUrl !== undefined) assert.match(new URL(callbackUrl).protocol, /^https?:$/);
    }, { runs: 500 });
  });
});
