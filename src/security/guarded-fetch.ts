/**
 * `fetch` for URLs a model chose, behind the SSRF guard (ssrf.ts): every hop checked, the
 * connection made only to the addresses that were checked (so a second DNS answer cannot
 * redirect it), with a deadline and a body cap.
 */
import type http from 'node:http';
import type { LookupFunction } from 'node:net';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream';
import { untilAborted } from '../abort.ts';
import { bareHost } from './ip.ts';
import type { SsrfGuard } from './ssrf.ts';

export interface GuardedFetchInit {
  readonly method?: string;
  readonly headers?: Readonly<Record<string, string>>;
  readonly body?: string | Uint8Array;
  /** Aborts the whole exchange (all hops and the body). */
  readonly signal?: AbortSignal;
}

export interface GuardedFetchOptions {
  /** Redirects followed, each checked by the guard. @default 5 */
  readonly maxRedirects?: number;
  /** Deadline for the whole exchange, redirects and body included. @default 30_000 */
  readonly timeoutMs?: number;
  /** Body bytes kept (after decompression); the rest is not read. @default 1_000_000 */
  readonly maxBytes?: number;
}

export interface GuardedResponse {
  readonly status: number;
  readonly statusText: string;
  /** Lower-case names; repeated headers joined with ", ". */
  readonly headers: Readonly<Record<string, string>>;
  readonly bytes: Buffer;
  /** `bytes` decoded with the charset the response declares (UTF-8 if none). */
  readonly text: string;
  /** The body was longer than `maxBytes` and was cut there. */
  readonly truncated: boolean;
  /** The URL of the final hop. */
  readonly url: string;
  /** URLs that answered with a redirect, in order. */
  readonly redirects: readonly string[];
}

/** Why a guarded fetch failed; `refused` means the guard said no (the message says why). */
export class GuardedFetchError extends Error {
  readonly kind: 'refused' | 'timeout' | 'aborted' | 'network' | 'redirects';
  constructor(kind: GuardedFetchError['kind'], message: string) {
    super(message);
    this.name = 'GuardedFetchError';
    this.kind = kind;
  }
}

/**
 * `fetch` for URLs chosen by a model: every hop is checked by `guard`, the connection goes
 * to the checked address only (custom `lookup`, so Host and TLS SNI stay the URL's host),
 * with a deadline and a body cap. Throws `GuardedFetchError`.
 */
export async function guardedFetch(guard: SsrfGuard, url: URL | string, init: GuardedFetchInit = {}, options: GuardedFetchOptions = {}): Promise<GuardedResponse> {
  const { maxRedirects = 5, timeoutMs = 30_000, maxBytes = 1_000_000 } = options;
  const deadline = AbortSignal.timeout(timeoutMs);
  const signal = init.signal ? AbortSignal.any([init.signal, deadline]) : deadline;
  let current: URL;
  try {
    current = typeof url === 'string' ? new URL(url) : url;
  } catch {
    throw new GuardedFetchError('refused', `${JSON.stringify(url)} is not a valid URL.`);
  }
  let method = (init.method ?? 'GET').toUpperCase();
  let headers: Record<string, string> = { ...init.headers };
  let body = init.body;
  const redirects: string[] = [];
  try {
    for (;;) {
      // A DNS lookup cannot be cancelled, but the caller need not wait for it past the deadline.
      const verdict = await untilAborted(guard.check(current), signal);
      if (!verdict.ok) throw new GuardedFetchError('refused', redirects.length > 0 ? `Redirect from ${redirects.at(-1)} to ${current.href} refused. ${verdict.error}` : verdict.error);
      const res = await send(current, verdict.addresses, method, headers, body, signal);
      const location = res.headers.location;
      if ([301, 302, 303, 307, 308].includes(res.statusCode ?? 0) && location !== undefined) {
        res.destroy();
        if (redirects.length >= maxRedirects) throw new GuardedFetchError('redirects', `Gave up after ${maxRedirects} redirects (last to ${location}).`);
        redirects.push(current.href);
        let next: URL;
        try {
          next = new URL(location, current);
        } catch {
          throw new GuardedFetchError('network', `${current.href} redirected to an invalid URL: ${JSON.stringify(location)}.`);
        }
        // As fetch does: 303 (and 301/302 after POST) turn into a body-less GET.
        if (res.statusCode === 303 ? method !== 'HEAD' : (res.statusCode === 301 || res.statusCode === 302) && method === 'POST') {
          method = 'GET';
          body = undefined;
          headers = Object.fromEntries(Object.entries(headers).filter(([name]) => !/^content-/i.test(name)));
        }
        if (next.origin !== current.origin) {
          headers = Object.fromEntries(Object.entries(headers).filter(([name]) => !/^(authorization|cookie|proxy-authorization)$/i.test(name)));
        }
        current = next;
        continue;
      }
      if (method === 'HEAD') res.destroy();
      const { bytes, truncated } = method === 'HEAD' ? { bytes: Buffer.alloc(0), truncated: false } : await readCapped(res, maxBytes);
      const flat: Record<string, string> = {};
      for (const [name, value] of Object.entries(res.headers)) if (value !== undefined) flat[name] = Array.isArray(value) ? value.join(', ') : value;
      return { status: res.statusCode ?? 0, statusText: res.statusMessage ?? '', headers: flat, bytes, text: decode(bytes, flat['content-type']), truncated, url: current.href, redirects };
    }
  } catch (err) {
    if (err instanceof GuardedFetchError) throw err;
    if (init.signal?.aborted) throw new GuardedFetchError('aborted', 'The request was cancelled.');
    if (deadline.aborted) throw new GuardedFetchError('timeout', `No complete answer from ${current.host} within ${timeoutMs} ms.`);
    const code = (err as { code?: string }).code;
    throw new GuardedFetchError('network', `Request to ${current.host} failed: ${code ? `${code} ` : ''}${(err as Error).message}`);
  }
}

/** A `lookup` that answers only with addresses the guard already checked (no second DNS query). */
export function pinnedLookup(addresses: readonly string[]): LookupFunction {
  return (_host, options, callback) => {
    const all = addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
    const wanted = options.family === 4 || options.family === 6 ? all.filter((a) => a.family === options.family) : all;
    if (wanted.length === 0) {
      callback(Object.assign(new Error('no checked address of the requested family'), { code: 'ENOTFOUND' }), '', 0);
    } else if (options.all) {
      (callback as unknown as (err: null, list: typeof all) => void)(null, wanted);
    } else callback(null, wanted[0]!.address, wanted[0]!.family);
  };
}

/**
 * node:https (TLS) and zlib cost ~50 ms and ~15 MB to load: they are imported on the first
 * request, not when the daemon starts.
 */
async function send(url: URL, addresses: readonly string[], method: string, headers: Record<string, string>, body: string | Uint8Array | undefined, signal: AbortSignal): Promise<http.IncomingMessage> {
  // node:http through src/http/node-http.ts: its ES namespace would load undici.
  const request = url.protocol === 'https:' ? (await import('node:https')).default.request : (await import('../http/node-http.ts')).httpRequest;
  return new Promise((resolve, reject) => {
    const req = request({
      protocol: url.protocol,
      hostname: bareHost(url.hostname),
      port: url.port === '' ? undefined : Number(url.port),
      path: `${url.pathname}${url.search}`,
      method,
      headers: { 'accept-encoding': 'gzip, deflate, br', ...headers },
      // A fresh agent per request: no pooled socket to another address, no proxy from the environment.
      agent: false,
      lookup: pinnedLookup(addresses),
      signal,
    });
    req.once('response', resolve);
    req.once('error', reject);
    req.end(body);
  });
}

async function readCapped(res: http.IncomingMessage, maxBytes: number): Promise<{ bytes: Buffer; truncated: boolean }> {
  const { default: zlib } = await import('node:zlib');
  const encoding = (res.headers['content-encoding'] ?? '').trim().toLowerCase();
  const lenient = { finishFlush: zlib.constants.Z_SYNC_FLUSH };
  const decoder =
    encoding === 'gzip' || encoding === 'x-gzip' ? zlib.createGunzip(lenient)
    : encoding === 'deflate' ? zlib.createInflate(lenient)
    : encoding === 'br' ? zlib.createBrotliDecompress()
    : null;
  // pipeline's own callback may ignore errors: they also destroy `decoder`, so the loop below throws them.
  const source: Readable = decoder ? pipeline(res, decoder, () => {}) : res;
  const chunks: Buffer[] = [];
  let size = 0;
  let truncated = false;
  try {
    // The cap applies to decoded bytes, so a small compressed bomb stops at maxBytes too.
    for await (const chunk of source as AsyncIterable<Buffer>) {
      if (size + chunk.length > maxBytes) {
        chunks.push(chunk.subarray(0, maxBytes - size));
        size = maxBytes;
        truncated = true;
        break;
      }
      chunks.push(chunk);
      size += chunk.length;
    }
  } finally {
    res.destroy();
  }
  return { bytes: Buffer.concat(chunks, size), truncated };
}

function decode(bytes: Buffer, contentType: string | undefined): string {
  const declared = /charset\s*=\s*"?([\w.:-]+)/i.exec(contentType ?? '')?.[1];
  const html = contentType === undefined || /html/i.test(contentType);
  const sniffed = declared ?? (html ? /<meta[^>]+charset\s*=\s*["']?([\w.:-]+)/i.exec(bytes.subarray(0, 2048).toString('latin1'))?.[1] : undefined);
  try {
    return new TextDecoder(sniffed ?? 'utf-8').decode(bytes);
  } catch {
    return new TextDecoder('utf-8').decode(bytes);
  }
}
