/**
 * A `fetch`-shaped function on the endpoint client (src/endpoint/client.ts), for a library that takes a
 * `fetch` option and would otherwise bring its own HTTP stack: grammY's Api (the Telegram
 * channel) loads node-fetch, whose header handling, url.parse and agent path cost ~11 % of the
 * daemon's main thread per Telegram message (docs/benchmarks.md, "Lean (issue 29)"); global
 * fetch would load undici (~13 MB). It does what grammY's client (grammy/out/core/client.js)
 * uses, and nothing more:
 *
 * - POST only (every Bot API call is one), with a string body (JSON calls) or a stream of bytes
 *   (multipart uploads: grammY's payload.js hands a Readable), streamed as it is read;
 * - the signal: grammY's own, from the abort-controller polyfill (no `reason`, no
 *   `throwIfAborted`), or a native one. An abort rejects as fetch does: with the native signal's
 *   reason, or an `AbortError` DOMException for the polyfill's;
 * - failures with fetch's shapes (src/endpoint/client.ts): `TypeError('fetch failed', { cause })` for a
 *   request that got no answer, `TypeError('terminated')` for a body cut off;
 * - the answer: `ok`, `status`, `statusText`, `headers.get`, `text()`, `json()`. A body that is
 *   not JSON (a proxy's HTML error page) rejects with a SyntaxError naming the status, as
 *   fetch's `json()` rejects with one;
 * - any other init field (grammY's `baseFetchConfig`: node-fetch's `agent`, `compress`,
 *   `duplex`) is ignored: the client keeps its own connections and asks for compressed answers.
 */
import { createEndpointClient, type EndpointBody, type EndpointClientOptions } from '../endpoint/client.ts';
import { STATUS_CODES } from './node-http.ts';

/** A signal as grammY hands it: the native AbortSignal or the abort-controller polyfill's. */
export interface SignalLike {
  readonly aborted: boolean;
  readonly reason?: unknown;
  addEventListener(type: 'abort', listener: () => void): void;
  removeEventListener(type: 'abort', listener: () => void): void;
}

export interface FetchInit {
  readonly method?: string;
  readonly headers?: Readonly<Record<string, string>> | ReadonlyArray<readonly [string, string]>;
  readonly body?: EndpointBody | null;
  readonly signal?: SignalLike | null;
}

export interface FetchResponse {
  readonly ok: boolean;
  readonly status: number;
  readonly statusText: string;
  readonly headers: { get(name: string): string | null };
  text(): Promise<string>;
  json(): Promise<unknown>;
}

export type EndpointFetch = (url: string | URL, init?: FetchInit) => Promise<FetchResponse>;

/** Each fetch made here has its own keep-alive pool (an endpoint client made with `options`). */
export function createEndpointFetch(options: EndpointClientOptions = {}): EndpointFetch {
  const client = createEndpointClient(options);
  return async (url, init = {}) => {
    const method = (init.method ?? 'GET').toUpperCase();
    if (method !== 'POST') throw new TypeError('fetch failed', { cause: new Error(`only POST is supported here, not ${method}`) });
    const { signal, release } = nativeSignal(init.signal ?? undefined);
    try {
      const response = await client.post(String(url), { headers: headerRecord(init.headers), body: init.body ?? '', signal });
      const text = async (): Promise<string> => {
        try {
          return await response.text();
        } finally {
          release();
        }
      };
      return {
        ok: response.ok,
        status: response.status,
        statusText: STATUS_CODES[response.status] ?? '',
        headers: response.headers,
        text,
        async json() {
          const body = await text();
          try {
            return JSON.parse(body) as unknown;
          } catch (error) {
            throw new SyntaxError(`the answer (HTTP ${response.status}) is not JSON: ${(error as Error).message}`, { cause: error });
          }
        },
      };
    } catch (error) {
      release();
      throw error;
    }
  };
}

function headerRecord(headers: FetchInit['headers']): Record<string, string> {
  if (headers === undefined) return {};
  if (Array.isArray(headers)) return Object.fromEntries(headers as ReadonlyArray<readonly [string, string]>);
  return { ...(headers as Readonly<Record<string, string>>) };
}

/** The native signal the client needs, following `given`; `release` stops following it. */
function nativeSignal(given: SignalLike | undefined): { signal: AbortSignal; release(): void } {
  if (given instanceof AbortSignal) return { signal: given, release: () => undefined };
  const controller = new AbortController();
  if (given === undefined) return { signal: controller.signal, release: () => undefined };
  const abort = (): void => controller.abort(given.reason ?? new DOMException('This operation was aborted', 'AbortError'));
  if (given.aborted) abort();
  else given.addEventListener('abort', abort);
  return { signal: controller.signal, release: () => given.removeEventListener('abort', abort) };
}
