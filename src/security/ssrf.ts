/**
 * SSRF guard for the HTTP tools: a URL may only reach the public internet unless the operator
 * allowed a host or network in `[security] allow_hosts`. Every address a host resolves to is
 * checked (one private answer is enough to refuse), IP literals are normalised from every
 * form a resolver accepts (`2130706433`, `0x7f000001`, `0177.0.0.1`, `127.1`, `::ffff:7f00:1`),
 * and `guardedFetch` connects only to the addresses that were checked, so a second DNS answer
 * (rebinding) cannot redirect the connection.
 */
import { promises as dns } from 'node:dns';
import type http from 'node:http';
import { isIPv6, type LookupFunction } from 'node:net';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream';
import { untilAborted } from '../abort.ts';

export interface SsrfGuardOptions {
  /**
   * Hosts let through even though they resolve to a blocked address: exact host names
   * (`"ollama.local"`), IP addresses (`"127.0.0.1"`, `"::1"`) or CIDRs (`"10.0.0.0/8"`).
   * @default []
   */
  readonly allowHosts?: readonly string[];
  /** Resolves a host name to its addresses. @default dns.promises.lookup with `all: true` */
  readonly resolve?: (host: string) => Promise<string[]>;
}

export type SsrfCheck = { readonly ok: true; readonly addresses: string[] } | { readonly ok: false; readonly error: string };

export interface SsrfGuard {
  /** Decides whether `url` may be fetched; on success, the checked addresses to connect to. */
  check(url: URL): Promise<SsrfCheck>;
}

interface Ip {
  readonly v6: boolean;
  readonly bytes: Uint8Array;
}
interface Cidr {
  readonly ip: Ip;
  readonly bits: number;
}

/** Host names of cloud metadata services; refused by name before any lookup. */
const metadataHosts = new Set(['metadata', 'metadata.google.internal', 'metadata.goog', 'instance-data', 'instance-data.ec2.internal']);

/** IPv4 ranges that never belong to the public internet, with the word used in errors. */
const blockedV4: readonly (readonly [string, string])[] = [
  ['169.254.169.254/32', 'a cloud metadata address'], ['0.0.0.0/8', 'an unspecified ("this network") address'],
  ['10.0.0.0/8', 'a private address'], ['100.64.0.0/10', 'a carrier-grade NAT (shared) address'],
  ['127.0.0.0/8', 'a loopback address'], ['169.254.0.0/16', 'a link-local address'],
  ['172.16.0.0/12', 'a private address'], ['192.0.0.0/24', 'a reserved (IETF protocol) address'],
  ['192.0.2.0/24', 'a documentation address'], ['192.88.99.0/24', 'a reserved (6to4 relay) address'],
  ['192.168.0.0/16', 'a private address'], ['198.18.0.0/15', 'a benchmarking address'],
  ['198.51.100.0/24', 'a documentation address'], ['203.0.113.0/24', 'a documentation address'],
  ['224.0.0.0/4', 'a multicast address'], ['255.255.255.255/32', 'the broadcast address'],
  ['240.0.0.0/4', 'a reserved address'],
];
const blockedV6: readonly (readonly [string, string])[] = [
  ['::/128', 'an unspecified address'], ['::1/128', 'a loopback address'],
  ['::/96', 'a deprecated IPv4-compatible address'], ['64:ff9b:1::/48', 'a local-use NAT64 address'],
  ['100::/64', 'a discard-only address'], ['2001::/32', 'a Teredo tunnel address'],
  ['2001:db8::/32', 'a documentation address'], ['fc00::/7', 'a private (unique local) address'],
  ['fe80::/10', 'a link-local address'], ['fec0::/10', 'a site-local address'],
  ['ff00::/8', 'a multicast address'],
];
/** IPv6 prefixes that carry an IPv4 address, checked as that address: [prefix, offset of the IPv4 bytes, name]. */
const embeddingV6: readonly (readonly [string, number, string])[] = [
  ['::ffff:0:0/96', 12, 'IPv4-mapped'],
  ['64:ff9b::/96', 12, 'NAT64'],
  ['2002::/16', 2, '6to4'],
];

const parsedBlocked = [...blockedV4, ...blockedV6].map(([cidr, reason]) => ({ cidr: parseCidr(cidr)!, reason }));
const parsedEmbedding = embeddingV6.map(([cidr, offset, name]) => ({ cidr: parseCidr(cidr)!, offset, name }));
const mappedV4 = parseCidr('::ffff:0:0/96')!;

/**
 * Parses an IPv4 address the way `inet_aton` and the WHATWG URL parser do: 1–4 parts, each
 * decimal, `0x` hex or `0` octal, the last part filling the remaining bytes. `null` if not one.
 */
export function parseIPv4(text: string): Uint8Array | null {
  const parts = text.split('.');
  if (parts.length > 1 && parts.at(-1) === '') parts.pop();
  if (parts.length === 0 || parts.length > 4) return null;
  const numbers: number[] = [];
  for (const part of parts) {
    let value: number;
    if (/^0[xX][0-9a-fA-F]*$/.test(part)) value = part.length === 2 ? 0 : parseInt(part.slice(2), 16);
    else if (/^0[0-7]+$/.test(part)) value = parseInt(part.slice(1), 8);
    else if (/^(0|[1-9][0-9]*)$/.test(part)) value = Number(part);
    else return null;
    numbers.push(value);
  }
  const last = numbers.pop()!;
  if (numbers.some((n) => n > 255) || last >= 256 ** (4 - numbers.length)) return null;
  const bytes = new Uint8Array(4);
  numbers.forEach((n, i) => (bytes[i] = n));
  for (let i = 3, rest = last; i >= numbers.length; i--, rest = Math.floor(rest / 256)) bytes[i] = rest % 256;
  return bytes;
}

/** Parses an IPv6 address (brackets and a `%zone` allowed) into 16 bytes; `null` if not one. */
export function parseIPv6(text: string): Uint8Array | null {
  let s = text.startsWith('[') && text.endsWith(']') ? text.slice(1, -1) : text;
  s = s.replace(/%.*$/, '');
  if (!isIPv6(s)) return null;
  const words: number[] = [];
  const tail = /(\d+\.\d+\.\d+\.\d+)$/.exec(s);
  if (tail) {
    const v4 = parseIPv4(tail[1]!)!;
    s = `${s.slice(0, tail.index)}${((v4[0]! << 8) | v4[1]!).toString(16)}:${((v4[2]! << 8) | v4[3]!).toString(16)}`;
  }
  const [head = '', rest] = s.split('::');
  const headWords = head === '' ? [] : head.split(':');
  const restWords = rest === undefined || rest === '' ? [] : rest.split(':');
  const fill = rest === undefined ? 0 : 8 - headWords.length - restWords.length;
  for (const w of [...headWords, ...Array<string>(fill).fill('0'), ...restWords]) words.push(parseInt(w, 16));
  const bytes = new Uint8Array(16);
  words.forEach((w, i) => {
    bytes[i * 2] = w >> 8;
    bytes[i * 2 + 1] = w & 0xff;
  });
  return bytes;
}

function parseIp(text: string): Ip | null {
  const v4 = parseIPv4(text);
  if (v4) return { v6: false, bytes: v4 };
  const v6 = parseIPv6(text);
  return v6 ? { v6: true, bytes: v6 } : null;
}

function parseCidr(text: string): Cidr | null {
  const [address = '', prefix, extra] = text.split('/');
  if (extra !== undefined) return null;
  const ip = parseIp(address);
  if (!ip) return null;
  const max = ip.v6 ? 128 : 32;
  const bits = prefix === undefined ? max : /^\d{1,3}$/.test(prefix) ? Number(prefix) : NaN;
  return bits >= 0 && bits <= max ? { ip, bits } : null;
}

function inCidr(ip: Ip, cidr: Cidr): boolean {
  if (ip.v6 !== cidr.ip.v6) return false;
  for (let bit = 0; bit < cidr.bits; bit += 8) {
    const mask = cidr.bits - bit >= 8 ? 0xff : (0xff << (8 - (cidr.bits - bit))) & 0xff;
    if ((ip.bytes[bit / 8]! & mask) !== (cidr.ip.bytes[bit / 8]! & mask)) return false;
  }
  return true;
}

function formatIp(ip: Ip): string {
  if (!ip.v6) return ip.bytes.join('.');
  const words = Array.from({ length: 8 }, (_, i) => ((ip.bytes[i * 2]! << 8) | ip.bytes[i * 2 + 1]!).toString(16));
  return new URL(`http://[${words.join(':')}]`).hostname.slice(1, -1);
}

/** Why `ip` must not be contacted, or `null` if it is a public address. */
function blockedReason(ip: Ip): string | null {
  if (ip.v6) {
    for (const { cidr, offset, name } of parsedEmbedding) {
      if (!inCidr(ip, cidr)) continue;
      const v4: Ip = { v6: false, bytes: ip.bytes.slice(offset, offset + 4) };
      const inner = blockedReason(v4);
      return inner && `${name} IPv6 of ${formatIp(v4)}, ${inner}`;
    }
  }
  return parsedBlocked.find(({ cidr }) => inCidr(ip, cidr))?.reason ?? null;
}

async function defaultResolve(host: string): Promise<string[]> {
  const answers = await dns.lookup(host, { all: true, verbatim: true });
  return answers.map((answer) => answer.address);
}

/** Strips IPv6 brackets and a trailing root dot, lowercases: the form host names are compared in. */
function bareHost(hostname: string): string {
  const host = hostname.startsWith('[') ? hostname.slice(1, -1) : hostname;
  return host.toLowerCase().replace(/\.$/, '');
}

/** Builds the guard; throws a TypeError naming a bad `allowHosts` entry. */
export function createSsrfGuard(options: SsrfGuardOptions = {}): SsrfGuard {
  const resolve = options.resolve ?? defaultResolve;
  const allowedNames = new Set<string>();
  const allowedNets: Cidr[] = [];
  for (const entry of options.allowHosts ?? []) {
    const cidr = parseCidr(entry.startsWith('[') ? entry.replace(/^\[(.*)\]/, '$1') : entry);
    if (cidr) allowedNets.push(cidr);
    else if (/^[a-z0-9_]([a-z0-9_.-]*[a-z0-9_])?\.?$/i.test(entry)) allowedNames.add(bareHost(entry));
    else throw new TypeError(`allow_hosts: ${JSON.stringify(entry)} is neither a host name, an IP address nor a CIDR like "10.0.0.0/8"`);
  }
  const allowedIp = (ip: Ip): boolean => {
    if (allowedNets.some((net) => inCidr(ip, net))) return true;
    // ::ffff:a.b.c.d is the same endpoint as a.b.c.d.
    return ip.v6 && inCidr(ip, mappedV4) && allowedNets.some((net) => inCidr({ v6: false, bytes: ip.bytes.slice(12) }, net));
  };
  const hint = (what: string) => `To allow it, add it to the config: [security] allow_hosts = ["${what}"]`;

  return {
    async check(url) {
      if (url.protocol !== 'http:' && url.protocol !== 'https:') {
        return { ok: false, error: `Refused ${url.protocol}// URL: only http and https URLs can be fetched.` };
      }
      if (url.username !== '' || url.password !== '') {
        return { ok: false, error: 'Refused a URL with credentials (user:password@host): send them in an Authorization header instead.' };
      }
      const host = bareHost(url.hostname);
      const nameAllowed = allowedNames.has(host);
      const literal = parseIp(host);
      if (!literal && !nameAllowed) {
        if (metadataHosts.has(host)) return { ok: false, error: `Refused ${host} because it is a cloud metadata service. ${hint(host)}` };
        if (host === 'localhost' || host.endsWith('.localhost')) return { ok: false, error: `Refused ${host} because it is a loopback host name. ${hint(host)}` };
      }
      let addresses: string[];
      if (literal) addresses = [formatIp(literal)];
      else {
        try {
          addresses = await resolve(host);
        } catch (err) {
          const code = (err as { code?: string }).code ?? (err as Error).message;
          return { ok: false, error: `Could not resolve ${host} (${code}).` };
        }
        if (addresses.length === 0) return { ok: false, error: `Could not resolve ${host} (no addresses).` };
      }
      const checked: string[] = [];
      for (const address of addresses) {
        const ip = parseIp(address);
        if (!ip) return { ok: false, error: `Refused ${host} because it resolved to ${JSON.stringify(address)}, which is not an IP address.` };
        const reason = blockedReason(ip);
        if (reason && !nameAllowed && !allowedIp(ip)) {
          const shown = formatIp(ip);
          const what = literal ? `${shown} is ${reason}` : `${host} resolves to ${shown}, ${reason}`;
          return { ok: false, error: `Refused ${url.origin} because ${what}. ${hint(literal ? shown : host)}` };
        }
        checked.push(formatIp(ip));
      }
      return { ok: true, addresses: checked };
    },
  };
}

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
  const transport = url.protocol === 'https:' ? (await import('node:https')).default : (await import('node:http')).default;
  return new Promise((resolve, reject) => {
    const req = transport.request({
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
