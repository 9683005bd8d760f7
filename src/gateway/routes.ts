/**
 * How parts of the daemon put endpoints on the HTTP gateway (`[gateway] listen`): plain HTTP
 * routes and WebSocket upgrades. The gateway owns the server, authentication (`auth: 'token'`
 * = `Authorization: Bearer <gateway.token>`) and body limits; a route only handles requests.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';

export interface HttpRoute {
  readonly method: 'GET' | 'POST';
  /** Exact path, e.g. "/webhook". */
  readonly path: string;
  /** `token`: the gateway answers 401 unless the request carries the gateway token. */
  readonly auth: 'none' | 'token';
  /** Called with the whole body read (POST; capped by the gateway). */
  handle(request: IncomingMessage, response: ServerResponse, body: Buffer): void | Promise<void>;
}

export interface UpgradeRoute {
  /** Exact path, e.g. "/ws/tools". */
  readonly path: string;
  readonly auth: 'none' | 'token';
  /** Takes over the socket (e.g. with ws's `handleUpgrade`). */
  handle(request: IncomingMessage, socket: Duplex, head: Buffer): void;
}

/** What the gateway lets others register (before it starts listening). */
export interface GatewayRoutes {
  addRoute(route: HttpRoute): void;
  addUpgrade(route: UpgradeRoute): void;
}
