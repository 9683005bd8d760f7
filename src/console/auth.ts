/**
 * Console sign-in: the gateway token, typed once, is exchanged for a session — an HttpOnly,
 * SameSite=Strict cookie naming a random id kept only in this process — plus a CSRF token the
 * page sends back in `X-CSRF-Token` on every change. A session ends when it expires, on sign-out,
 * on restart, and when the token in force is no longer the one it was signed in with. Failed
 * sign-ins are logged and limited per address. A request with `Authorization: Bearer <token>`
 * (a script, not a browser) needs no session and no CSRF token.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
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

export type SignIn = { readonly ok: true; readonly session: Session } | { readonly ok: false; readonly status: 401 | 429; readonly error: string; readonly retryAfterS?: number };

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

/** The client's address, for the rate limit (the socket's: a proxy's headers are not trusted). */
export const clientAddress = (request: IncomingMessage): string => request.socket.remoteAddress ?? 'unknown';

export interface Auth {
  signIn(token: string, operator: string, address: string): SignIn;
  /** The request's session (cookie or bearer), or undefined. */
  session(request: IncomingMessage): Session | undefined;
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

  const valid = (session: Session | undefined): Session | undefined => {
    if (!session) return undefined;
    if (session.expiresAt <= now() || session.tokenPrint !== print(options.token())) {
      sessions.delete(session.id);
      return undefined;
    }
    return session;
  };

  return {
    tokenRequired: () => options.token() !== undefined,
    signIn(given, operator, address) {
      const token = options.token();
      const entry = failures.get(address);
      if (entry && now() - entry.since > windowMs) failures.delete(address);
      const current = failures.get(address);
      if (current && current.count >= maxFailures) {
        const retryAfterS = Math.max(1, Math.ceil((current.since + windowMs - now()) / 1000));
        options.log.warn({ address, retryAfterS }, 'console sign-in refused: too many failed attempts from this address');
        return { ok: false, status: 429, error: `too many failed sign-ins; try again in ${retryAfterS} s`, retryAfterS };
      }
      if (token !== undefined && !secretsEqual(given, token)) {
        if (failures.size >= maxTracked && !failures.has(address)) failures.delete(failures.keys().next().value!);
        failures.set(address, { count: (current?.count ?? 0) + 1, since: current?.since ?? now() });
        options.log.warn({ address, operator }, 'console sign-in failed: wrong token');
        return { ok: false, status: 401, error: 'wrong token' };
      }
      failures.delete(address);
      if (sessions.size >= maxSessions) sessions.delete(sessions.keys().next().value!);
      const session: Session = { id: randomBytes(32).toString('base64url'), operator, csrf: randomBytes(24).toString('base64url'), expiresAt: now() + options.sessionMs, tokenPrint: print(token) };
      sessions.set(session.id, session);
      options.log.info({ address, operator }, 'console sign-in');
      return { ok: true, session };
    },
    session(request) {
      const bearer = /^Bearer\s+(\S+)\s*$/i.exec(request.headers.authorization ?? '');
      const token = options.token();
      if (bearer && token !== undefined) {
        return secretsEqual(bearer[1]!, token) ? { id: '', operator: 'api', csrf: '', expiresAt: Infinity, tokenPrint: print(token), bearer: true } : undefined;
      }
      const id = parseCookies(request.headers.cookie).get(sessionCookie);
      return id === undefined ? undefined : valid(sessions.get(id));
    },
    csrfOk(request, session) {
      if (session.bearer) return true;
      const given = request.headers['x-csrf-token'];
      return typeof given === 'string' && given !== '' && secretsEqual(given, session.csrf);
    },
    signOut(session) {
      sessions.delete(session.id);
    },
  };
}
