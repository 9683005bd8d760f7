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
import type { Logger } from 'pino';
import { secretsEqual } from '../net.ts';
import { createTokenGuard, type Refusal, type TokenGuard } from '../http/token-guard.ts';
import { BoundedMap } from '../bounded-map.ts';

export type { Refusal } from '../http/token-guard.ts';

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
  /** The token check shared with the gateway's routes (one limit for every way in). @default one of its own */
  readonly guard?: TokenGuard;
}

export type SignIn = { readonly ok: true; readonly session: Session } | Refusal;

export const sessionCookie = 'sb_session';
const maxSessions = 200;

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
  const sessions = new BoundedMap<string, Session>(maxSessions);
  const guard =
    options.guard ??
    createTokenGuard({ token: options.token, log: options.log, now, ...(options.maxFailures === undefined ? {} : { maxFailures: options.maxFailures }), ...(options.failureWindowMs === undefined ? {} : { failureWindowMs: options.failureWindowMs }) });

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

  /** The one check of a presented token: the failure limit, the comparison, the log (token-guard.ts). */
  const check = (given: string, address: string, via: 'sign-in' | 'bearer', operator: string): Refusal | undefined => guard.check(given, address, via, operator);

  return {
    tokenRequired: () => options.token() !== undefined,
    signIn(given, operator, address) {
      const refused = check(given, address, 'sign-in', operator);
      if (refused) return refused;
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
