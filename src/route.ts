/**
 * The HTTP route contract: how an endpoint is described to the server that carries it. The
 * gateway (`[gateway] listen`) carries the routes other parts register through
 * {@link GatewayRoutes} (the webhook channel, `/api/tools`, `/api/reload`) and its own
 * (`/healthz`, `/readyz`, `/metrics`, `/api/status`); the web console's API is a list of the
 * same routes, served by the console. The server owns authentication, Host/Origin checks and
 * body limits (src/http/); a route only handles requests.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';

/**
 * `none`: open. `token`: the gateway answers 401 unless the request carries the gateway token
 * (`Authorization: Bearer <gateway.token>`).
 * `signature`: the route authenticates every request itself by a signature (the webhook), so
 * the gateway asks for no token, serves any Host name (the caller's proxy names its own) and
 * takes any body type; it still refuses a browser's foreign Origin, and reads the body only
 * after the route's `admit` accepted the headers.
 * `session`: a signed-in console session (its cookie, and the CSRF token on a change) or the
 * gateway token; only the console serves these (the gateway refuses to carry one).
 */
export type RouteAuth = 'none' | 'token' | 'signature' | 'session';

/** What a route decides from the headers alone, before any of the body is read. */
export type Admission =
  | { readonly refuse: { readonly status: number; readonly error: string } }
  | {
      /** Longest body for this request, in bytes (the gateway's own limit still applies). */
      readonly maxBodyBytes?: number;
      /** How long the body may take once the headers are in; past it 408 and the socket is closed. */
      readonly bodyTimeoutMs?: number;
    };

/**
 * One endpoint. `Extra` is what the server hands the handler besides the request and the
 * response: the gateway gives the body it read (a GET has none); the console gives its context
 * (the session, the URL, a reader of the JSON body).
 */
export interface HttpRoute<Extra = Buffer> {
  readonly method: 'GET' | 'POST';
  /** Exact path, e.g. "/webhook". */
  readonly path: string;
  readonly auth: RouteAuth;
  /** Longest body this endpoint takes, in bytes (the server's own limit still applies). @default the server's limit */
  readonly maxBodyBytes?: number;
  /** Checked on the headers (after the gateway's own checks), before the body is read. @default accept with the gateway's limits */
  admit?(request: IncomingMessage): Admission;
  handle(request: IncomingMessage, response: ServerResponse, extra: Extra): void | Promise<void>;
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
