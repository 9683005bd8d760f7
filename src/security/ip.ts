/**
 * IP addresses as the SSRF guard sees them: every form a resolver accepts parsed to bytes
 * (`2130706433`, `0x7f000001`, `0177.0.0.1`, `127.1`, `::ffff:7f00:1`), CIDRs, and the ranges
 * that never belong to the public internet (private, loopback, link-local, the IPv6 forms
 * that carry an IPv4 address) with the word an error names them by.
 */
import { isIPv6 } from 'node:net';

export interface Ip {
  readonly v6: boolean;
  readonly bytes: Uint8Array;
}
export interface Cidr {
  readonly ip: Ip;
  readonly bits: number;
}

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
export const mappedV4 = parseCidr('::ffff:0:0/96')!;

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

export function parseIp(text: string): Ip | null {
  const v4 = parseIPv4(text);
  if (v4) return { v6: false, bytes: v4 };
  const v6 = parseIPv6(text);
  return v6 ? { v6: true, bytes: v6 } : null;
}

export function parseCidr(text: string): Cidr | null {
  const [address = '', prefix, extra] = text.split('/');
  if (extra !== undefined) return null;
  const ip = parseIp(address);
  if (!ip) return null;
  const max = ip.v6 ? 128 : 32;
  const bits = prefix === undefined ? max : /^\d{1,3}$/.test(prefix) ? Number(prefix) : NaN;
  return bits >= 0 && bits <= max ? { ip, bits } : null;
}

export function inCidr(ip: Ip, cidr: Cidr): boolean {
  if (ip.v6 !== cidr.ip.v6) return false;
  for (let bit = 0; bit < cidr.bits; bit += 8) {
    const mask = cidr.bits - bit >= 8 ? 0xff : (0xff << (8 - (cidr.bits - bit))) & 0xff;
    if ((ip.bytes[bit / 8]! & mask) !== (cidr.ip.bytes[bit / 8]! & mask)) return false;
  }
  return true;
}

export function formatIp(ip: Ip): string {
  if (!ip.v6) return ip.bytes.join('.');
  const words = Array.from({ length: 8 }, (_, i) => ((ip.bytes[i * 2]! << 8) | ip.bytes[i * 2 + 1]!).toString(16));
  return new URL(`http://[${words.join(':')}]`).hostname.slice(1, -1);
}

/** Why `ip` must not be contacted, or `null` if it is a public address. */
export function blockedReason(ip: Ip): string | null {
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

/** Strips IPv6 brackets and a trailing root dot, lowercases: the form host names are compared in. */
export function bareHost(hostname: string): string {
  const host = hostname.startsWith('[') ? hostname.slice(1, -1) : hostname;
  return host.toLowerCase().replace(/\.$/, '');
}
