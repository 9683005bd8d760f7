/**
 * SSRF guard for the HTTP tools: a URL may only reach the public internet unless the operator
 * allowed a host or network in `[security] allow_hosts`. Every address a host resolves to is
 * checked (one private answer is enough to refuse), IP literals are normalised from every
 * form a resolver accepts (`2130706433`, `0x7f000001`, `0177.0.0.1`, `127.1`, `::ffff:7f00:1`),
 * and `guardedFetch` (guarded-fetch.ts) connects only to the addresses that were checked, so a
 * second DNS answer (rebinding) cannot redirect the connection. The address parsing and the
 * blocked ranges are in ip.ts.
 */
import { promises as dns } from 'node:dns';
import { bareHost, blockedReason, formatIp, inCidr, mappedV4, parseCidr, parseIp, type Cidr, type Ip } from './ip.ts';

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

/** Host names of cloud metadata services; refused by name before any lookup. */
const metadataHosts = new Set(['metadata', 'metadata.google.internal', 'metadata.goog', 'instance-data', 'instance-data.ec2.internal']);

async function defaultResolve(host: string): Promise<string[]> {
  const answers = await dns.lookup(host, { all: true, verbatim: true });
  return answers.map((answer) => answer.address);
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

