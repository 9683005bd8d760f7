/**
 * What keeps web pages away from a gateway that has no token (loopback only, the default):
 * a browser will send requests to 127.0.0.1 for any page it shows, so the gateway itself must
 * tell the page's requests from the operator's. Three rules, each answering one attack:
 *
 * - DNS rebinding: a page on evil.example re-points its own name at 127.0.0.1 and then reads
 *   our answers as same-origin. Its requests still say `Host: evil.example`, so without a token
 *   only loopback Host names are served (the console's rule, shared here).
 * - Cross-site requests and WebSockets: a page may POST or open a WebSocket to any address; the
 *   browser then names the page in `Origin`. An Origin that is not this very host is refused.
 * - "Simple" POSTs (text/plain, forms) skip the CORS preflight; requiring application/json
 *   on our own POST endpoints makes a browser ask first, and we never say yes.
 */
import { isIP } from 'node:net';
import type { IncomingMessage } from 'node:http';

const loopbackNames = new Set(['localhost', 'ip6-localhost', 'ip6-loopback']);

/** True for 127.0.0.0/8, ::1 (and ::ffff:127.x) and the name localhost. */
export function isLoopback(host: string): boolean {
  const lower = host.toLowerCase();
  if (loopbackNames.has(lower)) return true;
  if (isIP(lower) === 4) return lower.startsWith('127.');
  if (isIP(lower) === 6) return lower === '::1' || lower === '0:0:0:0:0:0:0:1' || lower.startsWith('::ffff:127.');
  return false;
}

/** The Host header's name without the port (IPv6 without brackets); '' when there is none. */
export function hostName(request: IncomingMessage): string {
  const host = request.headers.host ?? '';
  const bracket = /^\[([^\]]+)\]/.exec(host);
  return bracket ? bracket[1]! : host.split(':')[0]!;
}

/** A refusal: the status and a sentence saying what to change. */
export interface Refusal {
  readonly status: 403 | 415;
  readonly error: string;
}

/**
 * Without a token, only a loopback Host name is served; undefined = fine. With a token the
 * name is free (a reverse proxy may pass its own), because the token is what authenticates.
 */
export function hostRefusal(request: IncomingMessage, tokenSet: boolean): Refusal | undefined {
  if (tokenSet || isLoopback(hostName(request))) return undefined;
  return { status: 403, error: 'this gateway has no token, so it answers only to a loopback host name (127.0.0.1, [::1], localhost); set [gateway] token to serve it under another name' };
}

/**
 * A browser's `Origin` that is not this host itself (scheme-less compare of host:port with
 * `Host`); undefined = no Origin (not a browser, or a same-origin GET) or the same host.
 * `Origin: null` (sandboxed frames, file: pages, cross-site redirects) is foreign too.
 */
export function originRefusal(request: IncomingMessage): Refusal | undefined {
  const origin = request.headers.origin;
  if (origin === undefined) return undefined;
  let originHost: string | undefined;
  try {
    originHost = origin === 'null' ? undefined : new URL(origin).host;
  } catch {
    // unparsable: foreign
  }
  if (originHost !== undefined && originHost === request.headers.host) return undefined;
  return { status: 403, error: `cross-origin request refused (Origin ${JSON.stringify(origin.slice(0, 100))} is not this gateway); call it from a program, not from a web page` };
}

/** A POST body must be declared application/json (so a browser cannot send it without a preflight); undefined = fine. */
export function jsonRefusal(request: IncomingMessage): Refusal | undefined {
  const type = (request.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
  if (type === 'application/json') return undefined;
  return { status: 415, error: `send the body as JSON with Content-Type: application/json (got ${type === '' ? 'none' : JSON.stringify(type.slice(0, 100))})` };
}
