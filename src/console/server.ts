/**
 * The web console's request handler, mounted on the gateway as its fallback (app/console.ts
 * imports this module on the first request, never at start). It serves the built front end
 * (dist/console, read from disk on first use and kept), the sign-in, and the JSON API under
 * `/api/console/`; every answer carries a strict Content-Security-Policy and no-framing headers.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { hostRefusal, originRefusal } from '../http/browser-guard.ts';
import { createAuth, sessionCookie, type Auth, type Session } from './auth.ts';
import { createTokenGuard } from '../http/token-guard.ts';
import type { ConsoleDeps } from './deps.ts';
import { HttpError, readJson, securityHeaders, send, str } from './http.ts';
import { apiRoutes, type ApiContext } from './api.ts';
import { openStream } from './stream.ts';
import { RouteTable } from '../http/route-table.ts';

export type ConsoleHandler = (request: IncomingMessage, response: ServerResponse) => Promise<void>;

const types: Record<string, string> = {
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.html': 'text/html; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.json': 'application/json; charset=utf-8',
};

/** The Set-Cookie value for a session (Secure when the request came over TLS). */
function cookieFor(request: IncomingMessage, value: string, maxAgeS: number): string {
  const tls = (request.socket as { encrypted?: boolean }).encrypted === true || request.headers['x-forwarded-proto'] === 'https';
  return `${sessionCookie}=${value}; Path=/; HttpOnly; SameSite=Strict; Max-Age=${maxAgeS}${tls ? '; Secure' : ''}`;
}

/** @example gateway.setFallback(createConsole(deps)); */
export function createConsole(deps: ConsoleDeps): ConsoleHandler {
  // The daemon gives the gateway's guard (one limit for the console and the gateway's routes); tests may not.
  const guard = deps.tokenGuard ?? createTokenGuard({ token: () => deps.token(), log: deps.log, trustedProxies: deps.trustedProxies ?? [] });
  const auth: Auth = createAuth({ token: () => deps.token(), sessionMs: deps.sessionMs, log: deps.log, guard });
  const files = new Map<string, { body: Buffer; type: string }>();
  const maxJson = deps.maxJsonBytes ?? 64 * 1024;
  const routes = new RouteTable('console route', apiRoutes);
  // The console checks sessions only: an API route of another kind would be served unguarded.
  for (const route of apiRoutes) if (route.auth !== 'session') throw new TypeError(`console route ${route.path} must have auth 'session'`);
  /** Open event streams (each an open page); past the cap a page gets 429 and its EventSource retries. */
  let streams = 0;
  const maxStreams = 32;

  async function asset(name: string): Promise<{ body: Buffer; type: string } | undefined> {
    const known = files.get(name);
    if (known) return known;
    try {
      const body = await readFile(join(deps.staticDir, name));
      const entry = { body, type: types[name.slice(name.lastIndexOf('.'))] ?? 'application/octet-stream' };
      if (files.size < 64) files.set(name, entry);
      return entry;
    } catch {
      return undefined;
    }
  }

  async function serveStatic(request: IncomingMessage, response: ServerResponse, path: string): Promise<void> {
    const name = path === '/' || path === '/index.html' ? 'index.html' : /^\/assets\/[A-Za-z0-9._-]+$/.test(path) ? path.slice(1) : undefined;
    const file = name === undefined ? undefined : await asset(name);
    if (!file) {
      if (name === 'index.html') throw new HttpError(503, 'the console is not built: run `npm run build` (it builds dist/console)');
      throw new HttpError(404, `no such page: ${path}`);
    }
    const immutable = name !== 'index.html';
    response.writeHead(200, {
      ...securityHeaders,
      'content-type': file.type,
      'content-length': file.body.length,
      'cache-control': immutable ? 'public, max-age=31536000, immutable' : 'no-cache',
    });
    response.end(request.method === 'HEAD' ? undefined : file.body);
  }

  async function sessionRoute(request: IncomingMessage, response: ServerResponse, session: Session | undefined, address: string): Promise<void> {
    if (request.method === 'GET') {
      send(response, 200, session ? { signedIn: true, operator: session.operator, csrf: session.csrf, tokenRequired: auth.tokenRequired() } : { signedIn: false, tokenRequired: auth.tokenRequired() });
      return;
    }
    if (request.method === 'POST') {
      const body = await readJson(request, 4096);
      const token = body.token === undefined ? '' : str(body, 'token', 512, true);
      const name = body.name === undefined ? 'operator' : str(body, 'name', 40);
      if (!/^[\p{L}\p{N} ._-]+$/u.test(name)) throw new HttpError(400, '"name" may hold letters, digits, spaces, dots, dashes and underscores');
      const result = auth.signIn(token, name.trim(), address);
      if (!result.ok) {
        send(response, result.status, { error: result.error }, result.retryAfterS === undefined ? {} : { 'retry-after': String(result.retryAfterS) });
        return;
      }
      send(response, 200, { signedIn: true, operator: result.session.operator, csrf: result.session.csrf, tokenRequired: auth.tokenRequired() }, { 'set-cookie': cookieFor(request, result.session.id, Math.floor(deps.sessionMs / 1000)) });
      return;
    }
    if (request.method === 'DELETE') {
      if (session && !auth.csrfOk(request, session)) throw new HttpError(403, 'missing or wrong CSRF token (X-CSRF-Token)');
      if (session) auth.signOut(session);
      send(response, 200, { signedIn: false }, { 'set-cookie': cookieFor(request, '', 0) });
      return;
    }
    throw new HttpError(405, `${request.method} is not allowed on /api/console/session`, { allow: 'GET, POST, DELETE' });
  }

  async function handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const url = new URL(request.url ?? '/', 'http://console.invalid');
    const path = url.pathname;
    // Without a token the console is open on loopback: refuse other Host names, so a web page
    // that rebinds its own name to 127.0.0.1 cannot reach it (DNS rebinding).
    const wrongHost = hostRefusal(request, deps.token() !== undefined);
    if (wrongHost) throw new HttpError(wrongHost.status, wrongHost.error);
    if (!path.startsWith('/api/')) {
      if (request.method !== 'GET' && request.method !== 'HEAD') throw new HttpError(405, `${request.method} is not allowed on ${path}`, { allow: 'GET, HEAD' });
      await serveStatic(request, response, path);
      return;
    }
    const mutation = request.method !== 'GET' && request.method !== 'HEAD';
    // A browser names the page a request came from: another site's page (or Origin: null) is refused outright.
    const foreign = mutation ? originRefusal(request) : undefined;
    if (foreign) throw new HttpError(foreign.status, foreign.error);
    const address = guard.address(request);
    const presented = auth.session(request, address);
    if (presented && !presented.ok) throw new HttpError(presented.status, presented.error, presented.retryAfterS === undefined ? {} : { 'retry-after': String(presented.retryAfterS) });
    const session = presented?.session;
    if (path === '/api/console/session') return sessionRoute(request, response, session, address);
    const found = routes.match(request.method ?? '', path);
    if (!('route' in found)) throw new HttpError(found.status, found.error, found.allow === undefined ? {} : { allow: found.allow });
    const { route } = found;
    if (!session) throw new HttpError(401, 'sign in first (POST /api/console/session with the gateway token)');
    if (mutation && !auth.csrfOk(request, session)) throw new HttpError(403, 'missing or wrong CSRF token (X-CSRF-Token)');
    if (route.path === '/api/console/stream') {
      if (streams >= maxStreams) throw new HttpError(429, `too many open console pages (${maxStreams}); close some`, { 'retry-after': '5' });
      streams++;
      response.once('close', () => streams--);
      openStream(request, response, deps, session, url, { current: () => auth.current(session), onSignOut: (ended) => auth.onSignOut(session, ended) });
      return;
    }
    const context: ApiContext = { url, session, deps, json: () => readJson(request, route.maxBodyBytes ?? maxJson) };
    await route.handle(request, response, context);
  }

  return async (request, response) => {
    try {
      await handle(request, response);
    } catch (error) {
      request.resume();
      if (response.headersSent) {
        response.destroy();
        return;
      }
      if (error instanceof HttpError) {
        send(response, error.status, { error: error.message }, error.headers as Record<string, string>);
        return;
      }
      deps.log.error({ err: error, path: request.url?.split('?')[0] }, 'console request failed');
      send(response, 500, { error: 'internal error; see the daemon log' });
    }
  };
}
