/**
 * The HTTP gateway (`[gateway] listen`): one node:http server on loopback by default that
 * owns authentication, body limits and JSON errors, serves `/healthz`, `/readyz`, `/metrics`
 * and `/api/status`, and carries the routes and WebSocket upgrades other parts register
 * through {@link GatewayRoutes}.
 */
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { createServer } from '../http/node-http.ts';
import type { AddressInfo, Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import { ConfigError } from '../config/load.ts';
import { parseListen } from '../net.ts';
import { BodyTimeout, BodyTooLarge, declaresBody, readBody } from '../http/body.ts';
import { hostRefusal, isLoopback, jsonRefusal, originRefusal, type Refusal } from '../http/browser-guard.ts';
import { sendJson } from '../http/json.ts';
import { RouteTable } from '../http/route-table.ts';
import { createTokenGuard, type TokenGuard } from '../http/token-guard.ts';
import type { Admission, GatewayRoutes, HttpRoute, RouteAuth, UpgradeRoute } from '../route.ts';
import type { RuntimeHealth } from '../runtime/runtime.ts';
import { iso, statusReport, type ClusterStatus } from '../runtime/status-report.ts';

export interface GatewayOptions {
  /** `host:port` (`[::1]:8787` for IPv6); port 0 picks a free one (tests). */
  readonly listen: string;
  /** The bearer token for `auth: 'token'` routes. Without one those routes are open (loopback only). */
  readonly token?: string;
  readonly log: Logger;
  /** The runtime's health: `/readyz` and `/api/status` read it per request. */
  readonly health: () => RuntimeHealth;
  /** Cluster mode: this node and every node as last reported, for `/api/status`. */
  readonly cluster?: () => ClusterStatus;
  /** The `/metrics` body (Prometheus text). Omitted = no `/metrics`. */
  readonly metrics?: () => string;
  /** Longest request body read, in bytes; a larger one gets 413. @default 1048576 (1 MiB) */
  readonly maxBodyBytes?: number;
  /** Reported by `/api/status`. */
  readonly version?: string;
  /** When the daemon started (ms since the epoch), for uptime. @default when the process started */
  readonly startedAt?: number;
  /**
   * The check of a presented token, shared with the console (token-guard.ts): a wrong bearer
   * token on any token route or upgrade counts toward one limit per client and is logged.
   * @default one of its own over `token`
   */
  readonly tokenGuard?: TokenGuard;
  /** Most open connections; past it a new one is closed at once. @default 256 */
  readonly maxConnections?: number;
  /** How long a client may take to send its request headers (ms); then 408 and the socket is closed. @default 10000 */
  readonly headersTimeoutMs?: number;
  /** How long a client may take to send its whole request, body included (ms). @default 30000 */
  readonly requestTimeoutMs?: number;
}

/**
 * Takes every request no exact route matched (the web console: `/`, its assets and `/api/console/…`).
 * It reads the body itself (with its own limits) and does its own authentication.
 */
export type FallbackHandler = (request: IncomingMessage, response: ServerResponse) => Promise<void>;

/** The gateway: register routes, then `start`. */
export interface Gateway extends GatewayRoutes {
  /** Sets the handler for requests no exact route matched (instead of 404). */
  setFallback(handler: FallbackHandler): void;
  /** Starts listening; resolves with the bound address. */
  start(): Promise<{ host: string; port: number }>;
  /** Stops accepting, ends idle keep-alive connections, and waits up to `graceMs` for requests in progress. */
  stop(graceMs?: number): Promise<void>;
}

// The composition root loads this module lazily and takes these from it.
export { isLoopback } from '../http/browser-guard.ts';
export { createTokenGuard } from '../http/token-guard.ts';
export { statusReport, type StatusReport, type ClusterStatus } from '../runtime/status-report.ts';

/** Shortest token accepted on a non-loopback address. */
const minTokenLength = 16;

/**
 * Checks `[gateway]` before anything starts: a non-loopback `listen` needs a token (of at
 * least 16 characters), else the gateway would hand `/api/status` and the tool socket to the
 * network. Throws ConfigError (exit 78, which systemd does not restart on).
 */
export function validateGatewayConfig(gateway: { readonly listen: string; readonly token?: string | undefined }, file?: string): { host: string; port: number } {
  let address: { host: string; port: number };
  try {
    address = parseListen(gateway.listen);
  } catch (error) {
    throw new ConfigError(file, [{ path: 'gateway.listen', problem: (error as Error).message, example: '[gateway] listen = "127.0.0.1:8787"' }]);
  }
  const token = gateway.token ?? '';
  if (!isLoopback(address.host)) {
    if (token === '' || /^\$\{[^}]*\}$/.test(token)) {
      throw new ConfigError(file, [
        {
          path: 'gateway.token',
          problem: `listen = "${gateway.listen}" is not a loopback address, and without a token anyone who can reach it could read status and register tools; set a token (e.g. export SWITCHBOARD_TOKEN=$(openssl rand -hex 32)) or listen on 127.0.0.1`,
          example: '[gateway] token = "${SWITCHBOARD_TOKEN}"',
        },
      ]);
    }
    if (token.length < minTokenLength) {
      throw new ConfigError(file, [
        { path: 'gateway.token', problem: `is ${token.length} characters; on a non-loopback address use at least ${minTokenLength} (e.g. openssl rand -hex 32)`, example: '[gateway] token = "${SWITCHBOARD_TOKEN}"' },
      ]);
    }
  }
  return address;
}


const statusText: Record<number, string> = { 401: 'Unauthorized', 403: 'Forbidden', 404: 'Not Found', 405: 'Method Not Allowed', 429: 'Too Many Requests', 500: 'Internal Server Error' };

/** An HTTP error written straight to a socket being upgraded (there is no ServerResponse yet). */
function refuseUpgrade(socket: Duplex, status: number, message: string, extra = ''): void {
  const body = JSON.stringify({ error: message });
  socket.end(
    `HTTP/1.1 ${status} ${statusText[status] ?? 'Error'}\r\nConnection: close\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\n${extra}\r\n${body}`,
  );
}

/**
 * @example
 * const gateway = createGateway({ listen: '127.0.0.1:8787', token, log, health: () => runtime.health(), metrics: () => metrics.render() });
 * gateway.addRoute(webhookRoute);   // before start
 * await gateway.start();
 */
export function createGateway(options: GatewayOptions): Gateway {
  const { log } = options;
  const address = parseListen(options.listen);
  const token = options.token === undefined || options.token === '' ? undefined : options.token;
  if (!token && !isLoopback(address.host)) throw new TypeError(`createGateway: refusing to listen on ${options.listen} without a token (see validateGatewayConfig)`);
  const maxBody = options.maxBodyBytes ?? 1024 * 1024;
  if (!(Number.isInteger(maxBody) && maxBody > 0)) throw new TypeError(`createGateway: maxBodyBytes must be a positive whole number, got ${maxBody}`);
  const maxConnections = options.maxConnections ?? 256;
  if (!(Number.isInteger(maxConnections) && maxConnections > 0)) throw new TypeError(`createGateway: maxConnections must be a positive whole number, got ${maxConnections}`);
  const headersTimeout = options.headersTimeoutMs ?? 10_000;
  const requestTimeout = Math.max(headersTimeout, options.requestTimeoutMs ?? 30_000);
  const startedAt = options.startedAt ?? Math.round(Date.now() - process.uptime() * 1000);
  // The uptime is counted on the monotonic clock from here on, so a wall clock step does not change it.
  const startedMonotonic = performance.now() - (Date.now() - startedAt);
  const routes = new RouteTable<HttpRoute>('gateway route');
  const upgrades = new Map<string, UpgradeRoute>();
  let server: Server | undefined;
  let fallback: FallbackHandler | undefined;

  const addRoute = (route: HttpRoute): void => {
    if (route.auth === 'session') throw new TypeError(`gateway route ${route.method} ${route.path}: the gateway has no console sessions; use 'token'`);
    routes.add(route);
  };
  const guard = options.tokenGuard ?? createTokenGuard({ token: () => token, log });
  /** Undefined when the request may pass; else the refusal (a wrong or missing token: 401; too many wrong ones: 429). */
  const tokenRefusal = (request: IncomingMessage, auth: RouteAuth, path: string): { status: 401 | 429; error: string; headers: Record<string, string> } | undefined => {
    if (auth !== 'token' || token === undefined) return undefined;
    const bearer = /^Bearer\s+(\S+)\s*$/i.exec(request.headers.authorization ?? '')?.[1];
    // no token at all is no guess: refused without counting (a scraper not yet configured)
    const refused = bearer === undefined ? { status: 401 as const, error: 'wrong token' } : guard.check(bearer, guard.address(request), 'bearer', path);
    if (!refused) return undefined;
    if (refused.status === 429) return { status: 429, error: refused.error, headers: { 'retry-after': String(refused.retryAfterS ?? 60) } };
    return { status: 401, error: 'missing or wrong token: send Authorization: Bearer <gateway.token>', headers: unauthorized };
  };
  const unauthorized = { 'www-authenticate': 'Bearer realm="switchboard"' };

  addRoute({ method: 'GET', path: '/healthz', auth: 'none', handle: (_req, res) => sendJson(res, 200, { status: 'ok' }) });
  addRoute({
    method: 'GET',
    path: '/readyz',
    auth: 'none',
    handle: (_req, res) => {
      // Names, states and codes only: this endpoint is open, and error texts may say too much.
      const health = options.health();
      const notRunning = health.channels.filter((channel) => channel.state !== 'running').map(({ name, state }) => ({ name, state }));
      const storage = health.storage?.writable === false ? { storage: { writable: false, code: health.storage.code, since: iso(health.storage.since), reason: 'the disk of the data_dir is full: new messages are refused until space is freed' } } : {};
      const ready = notRunning.length === 0 && storage.storage === undefined;
      sendJson(res, ready ? 200 : 503, ready ? { ready: true } : { ready: false, notRunning, ...storage });
    },
  });
  addRoute({
    method: 'GET',
    path: '/api/status',
    auth: 'token',
    handle: (_req, res) => sendJson(res, 200, statusReport(options.health(), startedAt, performance.now() - startedMonotonic, options.version, options.cluster?.())),
  });
  const metrics = options.metrics;
  if (metrics) {
    addRoute({
      method: 'GET',
      path: '/metrics',
      auth: 'token',
      handle: (_req, res) => {
        const body = metrics();
        res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4; charset=utf-8', 'content-length': Buffer.byteLength(body), 'cache-control': 'no-store' });
        res.end(body);
      },
    });
  }

  /**
   * An answer given before the body was read: the connection is closed after it, so an unread
   * (or stalled) body holds nothing.
   */
  const refuse = (response: ServerResponse, status: number, error: string, headers: Record<string, string> = {}): void =>
    sendJson(response, status, { error }, { connection: 'close', ...headers });

  /** The browser rules (see browser-guard.ts): Host name without a token, Origin on a change. */
  const browserRefusal = (request: IncomingMessage, signed: boolean): Refusal | undefined => {
    const mutation = request.method !== 'GET' && request.method !== 'HEAD';
    return (signed ? undefined : hostRefusal(request, token !== undefined)) ?? (mutation ? originRefusal(request) : undefined);
  };

  async function onRequest(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const path = (request.url ?? '/').split('?')[0]!;
    const found = routes.match(request.method ?? '', path);
    const browser = browserRefusal(request, 'route' in found && found.route.auth === 'signature');
    if (browser) return refuse(response, browser.status, browser.error);
    if (!('route' in found) && found.status === 404 && fallback) {
      try {
        await fallback(request, response);
      } catch (error) {
        log.error({ err: error, path }, 'gateway fallback failed');
        if (!response.headersSent) sendJson(response, 500, { error: 'internal error; see the daemon log' });
        else response.destroy();
      }
      return;
    }
    if (!('route' in found)) return refuse(response, found.status, found.error, found.allow === undefined ? {} : { allow: found.allow });
    const { route } = found;
    const denied = tokenRefusal(request, route.auth, path);
    if (denied) return refuse(response, denied.status, denied.error, denied.headers);
    let body: Buffer = Buffer.alloc(0);
    if (route.method === 'GET') {
      // Nothing a GET route answers depends on a body, so none is waited for or buffered.
      if (declaresBody(request)) return refuse(response, 400, `a GET request carries no body; send ${path} without one`);
    } else {
      const json = route.auth === 'signature' ? undefined : jsonRefusal(request);
      if (json) return refuse(response, json.status, json.error);
      const admission: Admission = route.admit?.(request) ?? {};
      if ('refuse' in admission) return refuse(response, admission.refuse.status, admission.refuse.error);
      const limit = Math.min(maxBody, route.maxBodyBytes ?? maxBody, admission.maxBodyBytes ?? maxBody);
      try {
        body = await readBody(request, limit, admission.bodyTimeoutMs);
      } catch (error) {
        if (error instanceof BodyTooLarge) return refuse(response, 413, `request body larger than ${limit} bytes`);
        if (error instanceof BodyTimeout) {
          refuse(response, 408, `the request body did not arrive within ${admission.bodyTimeoutMs} ms; send it at once`);
          // A client that stalls on purpose would not read the answer either.
          response.once('finish', () => request.socket.destroy());
          return;
        }
        log.debug({ err: error, path }, 'request body could not be read');
        response.destroy();
        return;
      }
    }
    try {
      await route.handle(request, response, body);
    } catch (error) {
      log.error({ err: error, method: route.method, path }, 'gateway route failed');
      if (!response.headersSent) sendJson(response, 500, { error: 'internal error; see the daemon log' });
      else response.destroy();
    }
  }

  function onUpgrade(request: IncomingMessage, socket: Duplex, head: Buffer): void {
    socket.on('error', (error) => log.debug({ err: error }, 'upgrade socket error'));
    const path = (request.url ?? '/').split('?')[0]!;
    // A page may open a WebSocket to any address, and the browser sends no preflight first.
    const browser = hostRefusal(request, token !== undefined) ?? originRefusal(request);
    if (browser) return refuseUpgrade(socket, browser.status, browser.error);
    const route = upgrades.get(path);
    if (!route) return refuseUpgrade(socket, 404, `no such endpoint: ${path}`);
    const denied = tokenRefusal(request, route.auth, path);
    if (denied) return refuseUpgrade(socket, denied.status, denied.error, Object.entries(denied.headers).map(([name, value]) => `${name}: ${value}\r\n`).join(''));
    try {
      route.handle(request, socket, head);
    } catch (error) {
      log.error({ err: error, path }, 'gateway upgrade failed');
      refuseUpgrade(socket, 500, 'internal error; see the daemon log');
    }
  }

  return {
    addRoute,
    setFallback(handler) {
      fallback = handler;
    },
    addUpgrade(route) {
      if (upgrades.has(route.path)) throw new TypeError(`gateway upgrade ${route.path} is registered twice`);
      upgrades.set(route.path, route);
    },

    start() {
      if (server) return Promise.reject(new Error('gateway already started'));
      const created = createServer(
        // Slow or stalled clients are cut off early: checked every second instead of every 30 s.
        { headersTimeout, requestTimeout, connectionsCheckingInterval: Math.min(1000, headersTimeout) },
        (request, response) => void onRequest(request, response),
      );
      server = created;
      created.maxConnections = maxConnections;
      let dropped = 0;
      created.on('drop', () => {
        if (dropped++ % 100 === 0) log.warn({ maxConnections, dropped }, 'gateway at its connection limit: new connections are closed ([gateway] max_connections)');
      });
      created.on('upgrade', onUpgrade);
      created.on('clientError', (error: NodeJS.ErrnoException, socket: Duplex) => {
        log.debug({ err: error }, 'bad HTTP request');
        // Destroyed, not ended: a client that never sends its FIN would otherwise keep the descriptor.
        if (socket.writable && (socket as Socket).bytesWritten === 0 && error.code !== 'ECONNRESET') {
          socket.write(error.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 'HTTP/1.1 408 Request Timeout\r\nConnection: close\r\n\r\n' : 'HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n');
        }
        socket.destroy();
      });
      return new Promise((resolve, reject) => {
        const failed = (error: Error): void => {
          server = undefined;
          reject(error);
        };
        created.once('error', failed);
        created.listen(address.port, address.host, () => {
          created.off('error', failed);
          created.on('error', (error) => log.error({ err: error }, 'gateway server error'));
          const bound = created.address() as AddressInfo;
          log.info({ host: bound.address, port: bound.port, auth: token ? 'token' : 'none (loopback)' }, 'gateway listening');
          resolve({ host: bound.address, port: bound.port });
        });
      });
    },

    async stop(graceMs = 5000) {
      const current = server;
      if (!current) return;
      server = undefined;
      const closed = new Promise<void>((resolve) => current.close(() => resolve()));
      current.closeIdleConnections();
      const timer = setTimeout(() => current.closeAllConnections(), graceMs);
      timer.unref();
      await closed;
      clearTimeout(timer);
    },
  };
}
