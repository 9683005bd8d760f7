/**
 * The model endpoints' HTTP client, on node:http / node:https instead of the global `fetch`.
 * `fetch` is Node's bundled undici: ~13 MB of RSS once loaded, and ~7 % of the main thread at
 * ~380 msg/s against a zero-latency model (docs/benchmarks.md, "Lean (issue 29)"), paid from
 * the first model call on. This client does what the providers, the embedder and transcription
 * used of fetch, and nothing more:
 *
 * - keep-alive connections, one pool per client (each provider, embedder and transcriber makes
 *   its own); an idle connection is closed after 4 s (undici's default), sooner when the server's
 *   `Keep-Alive: timeout=` says so;
 * - the signal: an abort before the answer or while its body is read destroys the request (the
 *   socket is closed, never handed back to the pool) and rejects with the signal's reason, as
 *   fetch did — a timeout's `TimeoutError`, the caller's own reason as it is;
 * - failures with fetch's shapes, which the callers' messages and tests read: a request that got
 *   no answer rejects with `TypeError('fetch failed')` whose `cause` is the system error
 *   (ECONNREFUSED…), a body cut off rejects with `TypeError('terminated')` likewise;
 * - `content-encoding` gzip, deflate and br decoded (fetch did it transparently, so we ask for
 *   them); an unknown coding is passed through as fetch did;
 * - redirects followed, at most 5 hops (fetch: 20): 307/308 repeat the POST with its body,
 *   301/302/303 turn it into a GET without one (fetch's rule). When a hop leaves the origin,
 *   credentials stay behind: `authorization`, `cookie`, and any header naming a key, token or
 *   secret (`x-api-key`, `x-goog-api-key`) — fetch dropped only the first two;
 * - a body given as a stream (a multipart upload: the Telegram channel's files through
 *   src/http/fetch.ts) is sent chunked as it is read, never held whole, and follows no
 *   redirect (it cannot be sent again);
 * - HTTPS with Node's CAs (NODE_EXTRA_CA_CERTS applies to node:https as to fetch);
 * - proxies as before: with NODE_USE_ENV_PROXY=1, Node's fetch honoured HTTP_PROXY / HTTPS_PROXY
 *   / NO_PROXY; the agents here are given the same environment (node:http's `proxyEnv`), and
 *   without that variable no proxy is used, as before.
 *
 * No body size limit (fetch had none). The response is our own small type: constructing a global
 * `Response` or `Headers` would load undici. node:http, node:https (and so tls) and node:zlib are
 * required, not imported (src/http/node-http.ts says why for node:http), and only the first time
 * a request, an https URL or an encoded body needs them: a daemon that has not called its model
 * yet has not loaded them.
 */
import type * as Https from 'node:https';
import type * as Zlib from 'node:zlib';
import type * as Http from 'node:http';
import type { Agent, ClientRequest, IncomingMessage, OutgoingHttpHeaders } from 'node:http';
import { createRequire } from 'node:module';
import { pipeline, Readable } from 'node:stream';

const require = createRequire(import.meta.url);

/** What the callers read of an answer. `text()` and `body` share one stream: use one of them, once. */
export interface EndpointResponse {
  readonly status: number;
  readonly ok: boolean;
  readonly headers: { get(name: string): string | null };
  text(): Promise<string>;
  /** The decoded body; an abort or a cut makes the iteration throw (see the file comment). */
  readonly body: AsyncIterable<Uint8Array> | null;
}

/**
 * A request body: bytes, sent with their length, or a stream of them (a multipart upload), sent
 * chunked as it is read and never held whole. A streamed body cannot be sent twice, so its
 * request follows no redirect: the 3xx is the answer.
 */
export type EndpointBody = string | Uint8Array | AsyncIterable<Uint8Array>;

/** Whether `body` is a stream (sent chunked, once) rather than bytes. */
function isStream(body: EndpointBody): body is AsyncIterable<Uint8Array> {
  return typeof body !== 'string' && !(body instanceof Uint8Array);
}

export interface EndpointRequest {
  readonly headers: Readonly<Record<string, string>>;
  readonly body: EndpointBody;
  readonly signal: AbortSignal;
}

export interface EndpointClient {
  post(url: string, request: EndpointRequest): Promise<EndpointResponse>;
  /** Closes the pooled connections. */
  close(): void;
}

export interface EndpointClientOptions {
  /** Redirect hops followed before the last 3xx is returned as the answer. @default 5 */
  readonly maxRedirects?: number;
  /** An idle pooled connection is closed after this long. @default 4000 */
  readonly idleMs?: number;
  /** Proxy variables (HTTP_PROXY, HTTPS_PROXY, NO_PROXY). @default process.env when NODE_USE_ENV_PROXY=1, else none */
  readonly proxyEnv?: NodeJS.ProcessEnv;
}

const REDIRECTS = new Set([301, 302, 303, 307, 308]);

export function createEndpointClient(options: EndpointClientOptions = {}): EndpointClient {
  const maxRedirects = options.maxRedirects ?? 5;
  // Node's built-in proxy support (v24.5) reads this switch for its global agents only; fetch
  // read it too. Ours are not global, so they are handed the environment the same switch gives.
  const proxyEnv = options.proxyEnv ?? (process.env.NODE_USE_ENV_PROXY === '1' ? process.env : undefined);
  const agentOptions = { keepAlive: true, timeout: options.idleMs ?? 4000, ...(proxyEnv ? { proxyEnv } : {}) };
  let plain: Agent | undefined;
  let secure: Https.Agent | undefined;
  let http: typeof Http | undefined;
  let https: typeof Https | undefined;

  function open(url: URL, method: string, headers: OutgoingHttpHeaders): ClientRequest {
    if (url.protocol === 'https:') {
      https ??= require('node:https') as typeof Https;
      secure ??= new https.Agent(agentOptions);
      return https.request(url, { method, headers, agent: secure });
    }
    if (url.protocol !== 'http:') throw new TypeError('fetch failed', { cause: new Error(`unsupported protocol ${url.protocol} (only http and https)`) });
    http ??= require('node:http') as typeof Http;
    plain ??= new http.Agent(agentOptions);
    return http.request(url, { method, headers, agent: plain });
  }

  /** One hop: resolves with the response once its headers are in. */
  function hop(url: URL, method: string, headers: Record<string, string>, body: EndpointBody | undefined, signal: AbortSignal): Promise<IncomingMessage> {
    return new Promise((resolve, reject) => {
      let request: ClientRequest;
      const outgoing: OutgoingHttpHeaders = { 'accept-encoding': 'gzip, deflate, br', ...headers };
      if (typeof body === 'string') outgoing['content-length'] = Buffer.byteLength(body);
      else if (body instanceof Uint8Array) outgoing['content-length'] = body.byteLength;
      try {
        request = open(url, method, outgoing);
      } catch (error) {
        reject(error instanceof TypeError ? error : new TypeError('fetch failed', { cause: error }));
        return;
      }
      const onAbort = (): void => {
        request.destroy();
        reject(signal.reason);
      };
      signal.addEventListener('abort', onAbort, { once: true });
      // `on`, not `once`: a socket can fail again after the answer has come (the body's own
      // failures reach its reader through the response).
      request.on('error', (error) => {
        signal.removeEventListener('abort', onAbort);
        reject(signal.aborted ? signal.reason : new TypeError('fetch failed', { cause: error }));
      });
      request.once('response', (response) => {
        signal.removeEventListener('abort', onAbort);
        resolve(response);
      });
      if (body === undefined || !isStream(body)) request.end(body);
      // A failure either side ends both: the request's own error (or the abort) rejects above;
      // an upload source that throws destroys the request, which then fails as 'fetch failed'.
      else pipeline(body instanceof Readable ? body : Readable.from(body, { objectMode: false }), request, () => undefined);
    });
  }

  return {
    async post(target, { headers, body, signal }) {
      signal.throwIfAborted();
      let url = new URL(target);
      let method = 'POST';
      let sent: EndpointBody | undefined = body;
      const streamed = isStream(body);
      let current = { ...headers };
      for (let hops = 0; ; hops++) {
        signal.throwIfAborted();
        const response = await hop(url, method, current, sent, signal);
        const location = response.headers.location;
        if (!REDIRECTS.has(response.statusCode ?? 0) || location === undefined || hops >= maxRedirects || streamed) return wrap(response, signal);
        let next: URL;
        try {
          next = new URL(location, url);
        } catch {
          return wrap(response, signal);
        }
        // The redirect's own body is not wanted: read it off so its connection goes back to the pool.
        response.resume();
        if (response.statusCode === 303 || ((response.statusCode === 301 || response.statusCode === 302) && method === 'POST')) {
          method = 'GET';
          sent = undefined;
          current = withoutBodyHeaders(current);
        }
        if (next.origin !== url.origin) current = withoutCredentials(current);
        url = next;
      }
    },
    close() {
      plain?.destroy();
      secure?.destroy();
    },
  };
}

function withoutBodyHeaders(headers: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(headers).filter(([name]) => !/^content-/i.test(name)));
}

/** Drops what would hand a key to another origin. */
function withoutCredentials(headers: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(headers).filter(([name]) => !/^(authorization|proxy-authorization|cookie)$|key|token|secret|auth/i.test(name)));
}

/** The answer as an EndpointResponse; the signal keeps watch until its body is read or dropped. */
function wrap(response: IncomingMessage, signal: AbortSignal): EndpointResponse {
  const status = response.statusCode ?? 0;
  const stream = decoded(response);
  // A body nobody reads can still fail (the server resets); the reader, if any, sees it through
  // its iterator, so the event itself must not go unhandled.
  const ignore = (): void => undefined;
  response.on('error', ignore);
  stream.on('error', ignore);
  const onAbort = (): void => {
    response.destroy();
    stream.destroy(signal.reason instanceof Error ? signal.reason : new Error(String(signal.reason)));
  };
  if (signal.aborted) onAbort();
  else signal.addEventListener('abort', onAbort, { once: true });
  const unwatch = (): void => signal.removeEventListener('abort', onAbort);
  stream.once('close', unwatch);

  async function* chunks(): AsyncGenerator<Uint8Array, void, undefined> {
    try {
      for await (const chunk of stream) yield chunk as Buffer;
    } catch (error) {
      if (signal.aborted) throw signal.reason;
      throw new TypeError('terminated', { cause: error });
    } finally {
      unwatch();
      // Stopped early (the stream's last event was read): the rest is not wanted.
      if (!stream.readableEnded) response.destroy();
    }
  }
  const body = chunks();
  return {
    status,
    ok: status >= 200 && status <= 299,
    headers: {
      get(name) {
        const value = response.headers[name.toLowerCase()];
        return value === undefined ? null : Array.isArray(value) ? value.join(', ') : value;
      },
    },
    async text() {
      const parts: Uint8Array[] = [];
      for await (const chunk of body) parts.push(chunk);
      // TextDecoder, as fetch's text(): invalid bytes become U+FFFD, a leading BOM goes.
      return new TextDecoder().decode(Buffer.concat(parts));
    },
    body,
  };
}

/** The body with its content-encoding undone (codings listed in the order they were applied). */
function decoded(response: IncomingMessage): Readable {
  const codings = (response.headers['content-encoding'] ?? '').toLowerCase().split(',').map((coding) => coding.trim()).filter((coding) => coding !== '' && coding !== 'identity');
  if (codings.length === 0) return response;
  const zlib = require('node:zlib') as typeof Zlib;
  const decoders: Readable[] = [];
  for (const coding of codings.reverse()) {
    if (coding === 'gzip' || coding === 'x-gzip') decoders.push(zlib.createGunzip({ finishFlush: zlib.constants.Z_SYNC_FLUSH }));
    else if (coding === 'deflate') decoders.push(zlib.createInflate({ finishFlush: zlib.constants.Z_SYNC_FLUSH }));
    else if (coding === 'br') decoders.push(zlib.createBrotliDecompress({ finishFlush: zlib.constants.BROTLI_OPERATION_FLUSH }));
    // An unknown coding: fetch passed the bytes on as they came.
    else return response;
  }
  return pipeline([response, ...decoders] as unknown as [Readable, ...Readable[]], () => undefined) as unknown as Readable;
}
