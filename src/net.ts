/** Small network helpers shared by everything that opens a listener or checks a secret. */
import { createHash, timingSafeEqual } from 'node:crypto';

/** `host:port` split (the form config `listen` keys take); IPv6 hosts come back without brackets. */
export function parseListen(listen: string): { host: string; port: number } {
  const match = /^(?:\[([0-9a-fA-F:.]+)\]|([A-Za-z0-9.-]+)):(\d{1,5})$/.exec(listen);
  const port = match ? Number(match[3]) : NaN;
  if (!match || port > 65_535) throw new TypeError(`listen must be host:port (e.g. 127.0.0.1:8787 or [::1]:8787), got ${JSON.stringify(listen)}`);
  return { host: (match[1] ?? match[2])!, port };
}

/**
 * Whether two secrets (tokens, signatures) are equal, in constant time: both sides are hashed
 * first, so neither the content nor the length of a wrong one leaks.
 */
export function secretsEqual(given: string | Buffer, expected: string | Buffer): boolean {
  const digest = (value: string | Buffer): Buffer => createHash('sha256').update(value).digest();
  return timingSafeEqual(digest(given), digest(expected));
}
