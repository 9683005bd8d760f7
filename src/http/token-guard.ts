/**
 * The one check of a presented gateway token, for every way it is presented — the console's
 * sign-in form, a bearer header on the console's API, on `/api/status`, `/metrics`,
 * `/api/reload` and the remote-tools socket: one failure limit per client address (5 wrong
 * tries a minute by default, then 429 with Retry-After, the right token included) and one log
 * line per failure. One guard serves the gateway and the console, so no route is a way around
 * the limit. Behind a reverse proxy named in `[gateway] trusted_proxies` the client is the
 * nearest untrusted address in `X-Forwarded-For`.
 */
import type { IncomingMessage } from 'node:http';
import { BlockList, isIP } from 'node:net';
import type { Logger } from 'pino';
import { secretsEqual } from '../net.ts';
import { BoundedMap } from '../bounded-map.ts';

/** A token refused: wrong (401), or too many wrong ones from this address lately (429). */
export interface Refusal {
  readonly ok: false;
  readonly status: 401 | 429;
  readonly error: string;
  readonly retryAfterS?: number;
}

export interface TokenGuardOptions {
  /** The token in force (undefined: none set, every presentation passes). */
  token(): string | undefined;
  readonly log: Logger;
  /** `[gateway] trusted_proxies`. @default none */
  readonly trustedProxies?: readonly string[];
  /** Wrong tokens an address may present per window. @default 5 */
  readonly maxFailures?: number;
  /** @default 60000 */
  readonly failureWindowMs?: number;
  /** @default Date.now */
  readonly now?: () => number;
}

export interface TokenGuard {
  /** The client's address for the limit (see {@link clientAddress}). */
  address(request: IncomingMessage): string;
  /** Checks `given` presented from `address` (by `via`, for `who`): undefined when it is right. */
  check(given: string, address: string, via: 'sign-in' | 'bearer', who: string): Refusal | undefined;
}

/** Addresses tracked at most (the oldest is forgotten first). */
const maxTracked = 1000;

export function createTokenGuard(options: TokenGuardOptions): TokenGuard {
  const now = options.now ?? Date.now;
  const proxies = trustedProxies(options.trustedProxies ?? []);
  const failures = new BoundedMap<string, { count: number; since: number }>(maxTracked);
  const maxFailures = options.maxFailures ?? 5;
  const windowMs = options.failureWindowMs ?? 60_000;
  return {
    address: (request) => clientAddress(request, proxies),
    check(given, address, via, who) {
      const token = options.token();
      const entry = failures.get(address);
      if (entry && now() - entry.since > windowMs) failures.delete(address);
      const current = failures.get(address);
      if (current && current.count >= maxFailures) {
        const retryAfterS = Math.max(1, Math.ceil((current.since + windowMs - now()) / 1000));
        options.log.warn({ address, via, who, retryAfterS }, 'token refused: too many failed attempts from this address');
        return { ok: false, status: 429, error: `too many failed sign-ins; try again in ${retryAfterS} s`, retryAfterS };
      }
      if (token !== undefined && !secretsEqual(given, token)) {
        failures.set(address, { count: (current?.count ?? 0) + 1, since: current?.since ?? now() });
        options.log.warn({ address, via, who }, 'wrong token presented');
        return { ok: false, status: 401, error: 'wrong token' };
      }
      failures.delete(address);
      return undefined;
    },
  };
}

/** `::ffff:10.0.0.1` (an IPv4 client on a dual-stack socket) is 10.0.0.1. */
const plainAddress = (address: string): string => address.replace(/^::ffff:(?=\d+\.\d+\.\d+\.\d+$)/i, '');

/**
 * Which peers are trusted reverse proxies, from `[gateway] trusted_proxies` (addresses or
 * CIDR ranges). Throws on an entry that is neither, naming it.
 */
export function trustedProxies(entries: readonly string[]): BlockList {
  const list = new BlockList();
  for (const entry of entries) {
    const [address = '', bits] = entry.split('/');
    const family = isIP(address);
    if (family === 0 || (bits !== undefined && !(/^\d{1,3}$/.test(bits) && Number(bits) <= (family === 4 ? 32 : 128)))) throw new TypeError(`trusted proxy ${JSON.stringify(entry)} is not an IP address or CIDR range (e.g. "127.0.0.1" or "10.0.0.0/8")`);
    const type = family === 4 ? 'ipv4' : 'ipv6';
    if (bits === undefined) list.addAddress(address, type);
    else list.addSubnet(address, Number(bits), type);
  }
  return list;
}

const trusts = (proxies: BlockList, address: string): boolean => {
  const family = isIP(address);
  return family !== 0 && proxies.check(address, family === 4 ? 'ipv4' : 'ipv6');
};

/**
 * The client's address, for the sign-in limit: the socket's, unless that is a trusted proxy —
 * then the nearest address in `X-Forwarded-For` that is not itself a trusted proxy (read from
 * the right: a proxy appends the address it saw; the left is whatever the client wrote). With
 * no trusted proxy (the default), forwarded headers are ignored: anyone could write them.
 */
export function clientAddress(request: IncomingMessage, proxies: BlockList = new BlockList()): string {
  const peer = plainAddress(request.socket.remoteAddress ?? 'unknown');
  if (!trusts(proxies, peer)) return peer;
  const header = request.headers['x-forwarded-for'];
  const hops = (Array.isArray(header) ? header.join(',') : (header ?? '')).split(',').map((hop) => plainAddress(hop.trim())).filter((hop) => hop !== '');
  for (let i = hops.length - 1; i >= 0; i--) {
    const hop = hops[i]!;
    // Not an address: a proxy did not write it, so nothing left of it can be believed either.
    if (isIP(hop) === 0) return peer;
    if (!trusts(proxies, hop)) return hop;
  }
  return peer;
}

