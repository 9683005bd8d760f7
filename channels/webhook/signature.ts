/**
 * Request and callback signatures, in the style of Stripe's and Slack's:
 *
 *     X-Switchboard-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256>
 *
 * keyed with `[channels.webhook] secret`, over the bytes `<t>.<Idempotency-Key>.<raw body>`
 * (the timestamp as sent, a dot, the Idempotency-Key header as sent, a dot, the body).
 * Signing the key stops a captured request from being sent again under a new key (a new
 * turn); signing the time, and refusing one more than 5 minutes off, bounds how long a
 * captured request is worth anything, and within that window its key answers from the first
 * result. The old form, `sha256=<hex HMAC of the body alone>`, is accepted only with
 * `legacy_signature = true`.
 *
 * The signature is the webhook's only authentication: its form and time are checked on the
 * headers before the body is read, the HMAC before anything parses the body.
 */
import { createHmac } from 'node:crypto';
import { secretsEqual } from '../../src/net.ts';

/** The header both directions carry (requests to us, callbacks from us). */
export const signatureHeader = 'x-switchboard-signature';

/** How far a signature's time may be from ours, either way (seconds). */
export const toleranceSeconds = 300;

/** What is signed: the bytes of `<timestamp>.<key>.<body>`. */
export function signedPayload(timestamp: number | string, key: string, body: Buffer | string): Buffer {
  return Buffer.concat([Buffer.from(`${timestamp}.${key}.`, 'utf8'), typeof body === 'string' ? Buffer.from(body, 'utf8') : body]);
}

/**
 * `t=<unix>,v1=<hex>` for a request (or callback) with Idempotency-Key `key` and `body`.
 *
 * @example
 * headers['x-switchboard-signature'] = sign(secret, { key: 'order-1', body });
 */
export function sign(secret: string, request: { readonly key: string; readonly body: Buffer | string; readonly timestamp?: number }): string {
  const timestamp = request.timestamp ?? Math.floor(Date.now() / 1000);
  return `t=${timestamp},v1=${createHmac('sha256', secret).update(signedPayload(timestamp, request.key, request.body)).digest('hex')}`;
}

/** The old body-only form, `sha256=<hex>` (only with `legacy_signature = true`). */
export function signLegacy(secret: string, body: Buffer | string): string {
  return `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
}

export interface VerifyOptions {
  /** Accept the old body-only `sha256=` form too. @default false */
  readonly legacy?: boolean;
  /** Now, in ms since the epoch. @default Date.now() */
  readonly now?: number;
}

/** A header's parsed form: the new one (time and digest) or the legacy one (digest only). */
export type ParsedSignature = { readonly kind: 'v1'; readonly timestamp: string; readonly digest: Buffer } | { readonly kind: 'legacy'; readonly digest: Buffer };

/** The header checked without the body (form and time): what `verify` then needs, or the 401 text. */
export function checkSignatureHeader(header: string | readonly string[] | undefined, options: VerifyOptions = {}): { ok: true; signature: ParsedSignature } | { ok: false; error: string } {
  const expected = 'send X-Switchboard-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<Idempotency-Key>.<raw body>", keyed with the webhook secret>';
  if (typeof header !== 'string') return { ok: false, error: `missing X-Switchboard-Signature: ${expected}` };
  const value = header.trim();
  const legacy = /^sha256=([0-9a-fA-F]{64})$/.exec(value);
  if (legacy) {
    if (options.legacy === true) return { ok: true, signature: { kind: 'legacy', digest: Buffer.from(legacy[1]!, 'hex') } };
    return { ok: false, error: `the body-only signature (sha256=…) is no longer accepted, since it lets a captured request run again under a new Idempotency-Key: ${expected}; or, while the sender migrates, set [channels.webhook] legacy_signature = true` };
  }
  const match = /^t=(\d{1,12}),v1=([0-9a-fA-F]{64})$/.exec(value);
  if (!match) return { ok: false, error: `malformed X-Switchboard-Signature: ${expected}` };
  const skew = Number(match[1]) - Math.floor((options.now ?? Date.now()) / 1000);
  if (Math.abs(skew) > toleranceSeconds) {
    return {
      ok: false,
      error: `X-Switchboard-Signature timestamp t=${match[1]} is ${Math.abs(skew)} s ${skew < 0 ? 'in the past' : 'in the future'}; at most ${toleranceSeconds} s either way is accepted: sign each request (or retry) when you send it, and keep the sender's clock in sync (NTP)`,
    };
  }
  return { ok: true, signature: { kind: 'v1', timestamp: match[1]!, digest: Buffer.from(match[2]!, 'hex') } };
}

/**
 * True when `signature` (from checkSignatureHeader) is the HMAC of this request. Constant-time:
 * the digests compared are always 32 bytes, so neither the content nor the length of a wrong
 * one leaks.
 */
export function signatureMatches(secret: string, signature: ParsedSignature, key: string, body: Buffer): boolean {
  const payload = signature.kind === 'v1' ? signedPayload(signature.timestamp, key, body) : body;
  return secretsEqual(signature.digest, createHmac('sha256', secret).update(payload).digest());
}

/** Header form, time and HMAC in one: true when `header` signs this request now. */
export function verify(secret: string, request: { readonly key: string; readonly body: Buffer }, header: string | readonly string[] | undefined, options: VerifyOptions = {}): boolean {
  const checked = checkSignatureHeader(header, options);
  return checked.ok && signatureMatches(secret, checked.signature, request.key, request.body);
}
