/**
 * How parts of the daemon put endpoints on the HTTP gateway (`[gateway] listen`): plain HTTP
 * routes and WebSocket upgrades. The gateway owns the server, authentication (`auth: 'token'`
 * = `Authorization: Bearer <gateway.token>`) and body limits; a route only handles requests.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';

/**
 * `token`: the gateway answers 401 unless the request carries the gateway token.
 * `signature`: the route authenticates every request itself by a signature (the webhook), so
 * the gateway asks for no token, serves any Host name (the caller's proxy names its own) and
 * takes any body type; it still refuses a browser's foreign Origin, and reads the body only
 * after the route's `admit` accepted the headers.
 */
export type RouteAuth = 'none' | 'token' | 'signature';

/** What a route decides from the headers alone, before any of the body is read. */
export type Admission =
  | { readonly refuse: { readonly status: number; readonly error: string } }
  | {
      /** Longest body for this request, in bytes (the gateway's own limit still applies). */
      readonly maxBodyBytes?: number;
      /** How long the body may take once the headers are in; past it 408 and the socket is closed. */
      readonly bodyTimeoutMs?: number;
    };

export interface HttpRoute {
  readonly method: 'GET' | 'POST';
  /** Exact path, e.g. "/webhook". */
  readonly path: string;
  readonly auth: RouteAuth;
  /** Checked on the headers (after the gateway's own checks), before the body is read. @default accept with the gateway's limits */
  admit?(request: IncomingMessage): Admission;
  /** Called with the whole body read (POST; capped by the gateway; a GET has none). */
  handle(request: IncomingMessage, response: ServerResponse, body: Buffer): void | Promise<void>;
}

export interface UpgradeRoute {
  /** Exact path, e.g. "/ws/tools". */
  readonly path: string;
  /** An upgrade carries no signature: `signature` is for HTTP routes only. */
  readonly auth: 'none' | 'token';
  /** Takes over the socket (e.g. with ws's `handleUpgrade`). */
  handle(request: IncomingMessage, socket: Duplex, head: Buffer): void;
}

/** What the gateway lets others register (before it starts listening). */
export interface GatewayRoutes {
  addRoute(route: HttpRoute): void;
  addUpgrade(route: UpgradeRoute): void;
}
