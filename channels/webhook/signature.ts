/**
 * Request and callback signatures: `X-Switchboard-Signature: sha256=<hex>`, the HMAC-SHA256 of
 * the raw body keyed with `[channels.webhook] secret`. The signature is the webhook's only
 * authentication, so it is checked before anything else reads the body.
 */
import { createHmac } from 'node:crypto';
import { secretsEqual } from '../../src/net.ts';

/** The header both directions carry (requests to us, callbacks from us). */
export const signatureHeader = 'x-switchboard-signature';

/** `sha256=<hex>` for `body`. */
export function sign(secret: string, body: Buffer | string): string {
  return `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
}

/**
 * True when `header` is `sha256=<hex>` of `body` with `secret`. Constant-time: the digests
 * compared are always 32 bytes, so neither the content nor the length of a wrong one leaks.
 */
export function verify(secret: string, body: Buffer, header: string | readonly string[] | undefined): boolean {
  if (typeof header !== 'string') return false;
  const match = /^sha256=([0-9a-fA-F]{64})$/.exec(header.trim());
  if (!match) return false;
  return secretsEqual(Buffer.from(match[1]!, 'hex'), createHmac('sha256', secret).update(body).digest());
}
