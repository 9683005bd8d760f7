/**
 * Console sign-in: the gateway token, typed once, is exchanged for a session — an HttpOnly,
 * SameSite=Strict cookie naming a random id kept only in this process — plus a CSRF token the
 * page sends back in `X-CSRF-Token` on every change. A session ends when it expires, on sign-out,
 * on restart, and when the token in force is no longer the one it was signed in with. A request
 * with `Authorization: Bearer <token>` (a script, not a browser) needs no session and no CSRF
 * token. Every way of presenting the token (the sign-in form, a bearer header) goes through one
 * check: one failure limit per client address and one log line per failure, so a bearer header
 * is no way around the limit.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { BlockList, isIP } from 'node:net';
import type { Logger } from 'pino';
import { secretsEqual } from '../net.ts';

export interface Session {
  readonly id: string;
  /** The operator's name: their person in the browser chat. */
  readonly operator: string;
  readonly csrf: string;
  readonly expiresAt: number;
  /** Hash of the token signed in with ('' when there was none). */
  readonly tokenPrint: string;
  /** Signed in with a bearer header: no cookie, no CSRF. */
  readonly bearer?: boolean;
}

export interface AuthOptions {
  token(): string | undefined;
  readonly sessionMs: number;
  readonly log: Logger;
  /** @default Date.now */
  readonly now?: () => number;
  /** Failed sign-ins an address may make per window. @default 5 */
  readonly maxFailures?: number;
  /** @default 60000 */
  readonly failureWindowMs?: number;
}

/** A token refused: wrong (401), or too many wrong ones from this address lately (429). */
export interface Refusal {
  readonly ok: false;
  readonly status: 401 | 429;
  readonly error: string;
  readonly retryAfterS?: number;
}

export type SignIn = { readonly ok: true; readonly session: Session } | Refusal;

export const sessionCookie = 'sb_session';
const maxSessions = 200;
const maxTracked = 1000;

const print = (token: string | undefined): string => (token ? createHash('sha256').update(token).digest('hex') : '');

export function parseCookies(header: string | undefined): Map<string, string> {
  const cookies = new Map<string, string>();
  for (const part of (header ?? '').split(';')) {
    const at = part.indexOf('=');
    if (at <= 0) continue;
    cookies.set(part.slice(0, at).trim(), part.slice(at + 1).trim());
  }
  return cookies;
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

export interface Auth {
  signIn(token: string, operator: string, address: string): SignIn;
  /**
   * The request's session: a bearer header's (checked as a sign-in from `address` is: a wrong
   * one counts toward the limit, is logged, and is refused), else the cookie's; undefined when
   * there is neither.
   */
  session(request: IncomingMessage, address: string): SignIn | undefined;
  /** Whether a session is still in force (not expired, not signed out, the same token). */
  current(session: Session): boolean;
  /** Calls `ended` when the session is signed out; returns the unsubscribe. */
  onSignOut(session: Session, ended: () => void): () => void;
  /** True when the request carries the session's CSRF token (always true for bearer sessions). */
  csrfOk(request: IncomingMessage, session: Session): boolean;
  signOut(session: Session): void;
  /** Whether signing in needs a token at all (false: loopback without a token). */
  tokenRequired(): boolean;
}

export function createAuth(options: AuthOptions): Auth {
  const now = options.now ?? Date.now;
  const sessions = new Map<string, Session>();
  const failures = new Map<string, { count: number; since: number }>();
  const maxFailures = options.maxFailures ?? 5;
  const windowMs = options.failureWindowMs ?? 60_000;

  /** Who waits for a session's sign-out (its open event streams). */
  const watchers = new Map<string, Set<() => void>>();

  const inForce = (session: Session): boolean => session.expiresAt > now() && session.tokenPrint === print(options.token()) && (session.bearer === true || sessions.get(session.id) === session);
  const valid = (session: Session | undefined): Session | undefined => {
    if (!session) return undefined;
    if (!inForce(session)) {
      sessions.delete(session.id);
      return undefined;
    }
    return session;
  };

  /** The one check of a presented token: the failure limit, the comparison, the log. */
  const check = (given: string, address: string, via: 'sign-in' | 'bearer', operator: string): Refusal | undefined => {
    const token = options.token();
    const entry = failures.get(address);
    if (entry && now() - entry.since > windowMs) failures.delete(address);
    const current = failures.get(address);
    if (current && current.count >= maxFailures) {
      const retryAfterS = Math.max(1, Math.ceil((current.since + windowMs - now()) / 1000));
      options.log.warn({ address, via, retryAfterS }, 'console sign-in refused: too many failed attempts from this address');
      return { ok: false, status: 429, error: `too many failed sign-ins; try again in ${retryAfterS} s`, retryAfterS };
    }
    if (token !== undefined && !secretsEqual(given, token)) {
      if (failures.size >= maxTracked && !failures.has(address)) failures.delete(failures.keys().next().value!);
      failures.set(address, { count: (current?.count ?? 0) + 1, since: current?.since ?? now() });
      options.log.warn({ address, via, operator }, 'console sign-in failed: wrong token');
      return { ok: false, status: 401, error: 'wrong token' };
    }
    failures.delete(address);
    return undefined;
  };

  return {
    tokenRequired: () => options.token() !== undefined,
    signIn(given, operator, address) {
      const refused = check(given, address, 'sign-in', operator);
      if (refused) return refused;
      if (sessions.size >= maxSessions) sessions.delete(sessions.keys().next().value!);
      const session: Session = { id: randomBytes(32).toString('base64url'), operator, csrf: randomBytes(24).toString('base64url'), expiresAt: now() + options.sessionMs, tokenPrint: print(options.token()) };
      sessions.set(session.id, session);
      options.log.info({ address, operator }, 'console sign-in');
      return { ok: true, session };
    },
    session(request, address) {
      const bearer = /^Bearer\s+(\S+)\s*$/i.exec(request.headers.authorization ?? '');
      const token = options.token();
      if (bearer && token !== undefined) {
        const refused = check(bearer[1]!, address, 'bearer', 'api');
        return refused ?? { ok: true, session: { id: '', operator: 'api', csrf: '', expiresAt: Infinity, tokenPrint: print(token), bearer: true } };
      }
      const id = parseCookies(request.headers.cookie).get(sessionCookie);
      const session = id === undefined ? undefined : valid(sessions.get(id));
      return session ? { ok: true, session } : undefined;
    },
    current: inForce,
    onSignOut(session, ended) {
      let set = watchers.get(session.id);
      if (!set) watchers.set(session.id, (set = new Set()));
      set.add(ended);
      return () => {
        set.delete(ended);
        if (set.size === 0) watchers.delete(session.id);
      };
    },
    csrfOk(request, session) {
      if (session.bearer) return true;
      const given = request.headers['x-csrf-token'];
      return typeof given === 'string' && given !== '' && secretsEqual(given, session.csrf);
    },
    signOut(session) {
      sessions.delete(session.id);
      for (const ended of watchers.get(session.id) ?? []) ended();
      watchers.delete(session.id);
    },
  };
}
