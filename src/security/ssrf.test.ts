import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, it } from 'node:test';
import { gzipSync } from 'node:zlib';
import { guardedFetch, GuardedFetchError, pinnedLookup } from './guarded-fetch.ts';
import { parseIPv4, parseIPv6 } from './ip.ts';
import { createSsrfGuard } from './ssrf.ts';

/** DNS for tests: only the names listed, never the network. */
function fakeDns(table: Record<string, string[]>) {
  const calls: string[] = [];
  const resolve = async (host: string): Promise<string[]> => {
    calls.push(host);
    const answer = table[host];
    if (!answer) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
    return answer;
  };
  return { resolve, calls };
}

interface Seen {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
}

async function startServer(handler: (req: http.IncomingMessage, res: http.ServerResponse, origin: string) => void) {
  const requests: Seen[] = [];
  const server = http.createServer((req, res) => {
    requests.push({ method: req.method!, url: req.url!, headers: req.headers });
    handler(req, res, origin);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const origin = `http://127.0.0.1:${port}`;
  return {
    origin,
    port,
    requests,
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}

// [url, refused?] — checked with a resolver that knows only the names used here.
const table: [string, boolean][] = [
  ['http://127.0.0.1/', true],
  ['http://127.255.255.254/', true],
  ['http://2130706433/', true],
  ['http://0x7f000001/', true],
  ['http://0177.0.0.1/', true],
  ['http://127.1/', true],
  ['http://0x7f.1/', true],
  ['http://127.0.0.1./', true],
  ['http://0.0.0.0/', true],
  ['http://0/', true],
  ['http://10.0.0.1/', true],
  ['http://172.16.0.1/', true],
  ['http://172.31.255.255/', true],
  ['http://192.168.1.1/', true],
  ['http://169.254.169.254/latest/meta-data/', true],
  ['http://169.254.1.1/', true],
  ['http://100.64.0.1/', true],
  ['http://100.127.255.255/', true],
  ['http://224.0.0.1/', true],
  ['http://255.255.255.255/', true],
  ['http://240.0.0.1/', true],
  ['http://[::1]/', true],
  ['http://[::]/', true],
  ['http://[::ffff:127.0.0.1]/', true],
  ['http://[::ffff:7f00:1]/', true],
  ['http://[::ffff:169.254.169.254]/', true],
  ['http://[64:ff9b::10.0.0.1]/', true],
  ['http://[2002:c0a8:101::]/', true],
  ['http://[fc00::1]/', true],
  ['http://[fd12:3456::1]/', true],
  ['http://[fe80::1]/', true],
  ['http://[ff02::1]/', true],
  ['http://localhost/', true],
  ['http://LOCALHOST./', true],
  ['http://app.localhost/', true],
  ['http://metadata.google.internal/computeMetadata/v1/', true],
  ['http://metadata/', true],
  ['http://user:pass@example.test/', true],
  ['http://user@example.test/', true],
  ['file:///etc/passwd', true],
  ['gopher://example.test:70/', true],
  ['ftp://example.test/', true],
  ['http://private.test/', true],
  ['http://mixed.test/', true],
  ['http://unknown.test/', true],
  ['http://8.8.8.8/', false],
  ['https://1.1.1.1/', false],
  ['http://134744072/', false],
  ['http://172.15.255.255/', false],
  ['http://172.32.0.1/', false],
  ['http://100.63.255.255/', false],
  ['http://100.128.0.1/', false],
  ['http://[2606:4700:4700::1111]/', false],
  ['http://[::ffff:8.8.8.8]/', false],
  ['https://example.test/path?q=1', false],
];

describe('ssrf guard', () => {
  const dns = fakeDns({ 'example.test': ['93.184.216.34', '2606:2800:220:1::1'], 'private.test': ['10.1.2.3'], 'mixed.test': ['93.184.216.34', '192.168.0.7'] });
  const guard = createSsrfGuard({ resolve: dns.resolve });

  for (const [url, refused] of table) {
    it(`${refused ? 'refuses' : 'allows'} ${url}`, async () => {
      const verdict = await guard.check(new URL(url));
      assert.equal(verdict.ok, !refused, JSON.stringify(verdict));
      if (!verdict.ok) assert.match(verdict.error, /Refused|Could not resolve/);
    });
  }

  it('never asks DNS about IP literals', async () => {
    dns.calls.length = 0;
    for (const url of ['http://2130706433/', 'http://[::1]/', 'http://8.8.8.8/']) await guard.check(new URL(url));
    assert.deepEqual(dns.calls, []);
  });

  it('refuses a host when any of its addresses is private, and says how to allow it', async () => {
    const verdict = await guard.check(new URL('http://mixed.test/x'));
    assert.equal(verdict.ok, false);
    assert.match(!verdict.ok ? verdict.error : '', /mixed\.test resolves to 192\.168\.0\.7, a private address.*\[security\] allow_hosts = \["mixed\.test"\]/);
  });

  it('names what was refused for odd literal forms', async () => {
    const verdict = await guard.check(new URL('http://0x7f000001:8080/'));
    assert.match(!verdict.ok ? verdict.error : '', /127\.0\.0\.1 is a loopback address.*allow_hosts = \["127\.0\.0\.1"\]/);
    const mapped = await guard.check(new URL('http://[::ffff:169.254.169.254]/'));
    assert.match(!mapped.ok ? mapped.error : '', /IPv4-mapped IPv6 of 169\.254\.169\.254, a cloud metadata address/);
    const scheme = await guard.check(new URL('file:///etc/passwd'));
    assert.match(!scheme.ok ? scheme.error : '', /only http and https/);
  });

  it('returns the checked addresses on success', async () => {
    assert.deepEqual(await guard.check(new URL('https://example.test/')), { ok: true, addresses: ['93.184.216.34', '2606:2800:220:1::1'] });
  });

  it('lets through an allowed host name, IP and CIDR', async () => {
    const allowed = createSsrfGuard({ allowHosts: ['private.test', '127.0.0.1', '192.168.0.0/16', '[fd00::/8]'], resolve: dns.resolve });
    assert.deepEqual(await allowed.check(new URL('http://private.test/')), { ok: true, addresses: ['10.1.2.3'] });
    assert.equal((await allowed.check(new URL('http://127.0.0.1:11434/'))).ok, true);
    assert.equal((await allowed.check(new URL('http://2130706433/'))).ok, true);
    assert.equal((await allowed.check(new URL('http://[::ffff:127.0.0.1]/'))).ok, true);
    assert.equal((await allowed.check(new URL('http://mixed.test/'))).ok, true);
    assert.equal((await allowed.check(new URL('http://[fd00::5]/'))).ok, true);
    assert.equal((await allowed.check(new URL('http://127.0.0.2/'))).ok, false);
    assert.equal((await allowed.check(new URL('http://10.1.2.3/'))).ok, false);
    assert.equal((await allowed.check(new URL('http://localhost/'))).ok, false);
  });

  it('rejects a malformed allow_hosts entry eagerly', () => {
    assert.throws(() => createSsrfGuard({ allowHosts: ['10.0.0.0/33'] }), /allow_hosts: "10\.0\.0\.0\/33"/);
    assert.throws(() => createSsrfGuard({ allowHosts: ['http://x'] }), TypeError);
  });

  it('parses IPv4 and IPv6 in every form', () => {
    assert.deepEqual([...parseIPv4('2130706433')!], [127, 0, 0, 1]);
    assert.deepEqual([...parseIPv4('0x7f.0.0.1')!], [127, 0, 0, 1]);
    assert.deepEqual([...parseIPv4('10.1')!], [10, 0, 0, 1]);
    assert.deepEqual([...parseIPv4('192.168.257')!], [192, 168, 1, 1]);
    assert.equal(parseIPv4('256.1.1.1'), null);
    assert.equal(parseIPv4('1.2.3.4.5'), null);
    assert.equal(parseIPv4('example.com'), null);
    assert.equal(parseIPv4('08.1.1.1'), null);
    assert.deepEqual([...parseIPv6('[::ffff:127.0.0.1]')!.subarray(10)], [0xff, 0xff, 127, 0, 0, 1]);
    assert.deepEqual([...parseIPv6('fe80::1%eth0')!.subarray(0, 2)], [0xfe, 0x80]);
    assert.equal(parseIPv6('1::2::3'), null);
  });
});

describe('guardedFetch', () => {
  const local = () => createSsrfGuard({ allowHosts: ['127.0.0.1'], resolve: fakeDns({}).resolve });

  it('refuses a redirect to a private address and does not follow it', async () => {
    const server = await startServer((_req, res) => res.writeHead(302, { location: 'http://10.0.0.1/admin' }).end());
    try {
      await assert.rejects(guardedFetch(local(), `${server.origin}/start`), (err: GuardedFetchError) => {
        assert.equal(err.kind, 'refused');
        assert.match(err.message, /Redirect from .*\/start to http:\/\/10\.0\.0\.1\/admin refused.*private address/);
        return true;
      });
      assert.equal(server.requests.length, 1);
    } finally {
      await server.close();
    }
  });

  it('connects to the checked address only, keeping the Host header (no DNS rebinding)', async () => {
    const server = await startServer((_req, res) => res.end('pinned'));
    let answers = 0;
    const guard = createSsrfGuard({ allowHosts: ['127.0.0.0/8'], resolve: async () => (answers++ === 0 ? ['127.0.0.1'] : ['10.9.9.9']) });
    try {
      const response = await guardedFetch(guard, `http://rebind.test:${server.port}/x`);
      assert.equal(response.text, 'pinned');
      assert.equal(answers, 1);
      assert.equal(server.requests[0]!.headers.host, `rebind.test:${server.port}`);
    } finally {
      await server.close();
    }
  });

  it('follows redirects, turning 303 into GET and dropping credentials across origins', async () => {
    const other = await startServer((_req, res) => res.end('landed'));
    const server = await startServer((req, res) => {
      if (req.url === '/post') res.writeHead(303, { location: '/next' }).end();
      else if (req.url === '/next') res.writeHead(307, { location: `${other.origin}/final` }).end();
    });
    try {
      const response = await guardedFetch(local(), `${server.origin}/post`, { method: 'POST', body: '{"a":1}', headers: { authorization: 'Bearer s', 'content-type': 'application/json' } });
      assert.equal(response.status, 200);
      assert.equal(response.text, 'landed');
      assert.equal(response.url, `${other.origin}/final`);
      assert.deepEqual(response.redirects, [`${server.origin}/post`, `${server.origin}/next`]);
      assert.equal(server.requests[1]!.method, 'GET');
      assert.equal(server.requests[1]!.headers.authorization, 'Bearer s');
      assert.equal(server.requests[1]!.headers['content-type'], undefined);
      assert.equal(other.requests[0]!.headers.authorization, undefined);
    } finally {
      await server.close();
      await other.close();
    }
  });

  it('gives up after maxRedirects', async () => {
    const server = await startServer((req, res) => res.writeHead(302, { location: `/r${Number(req.url!.slice(2) || 0) + 1}` }).end());
    try {
      await assert.rejects(guardedFetch(local(), `${server.origin}/r0`, {}, { maxRedirects: 2 }), { kind: 'redirects', message: /after 2 redirects/ });
      assert.equal(server.requests.length, 3);
    } finally {
      await server.close();
    }
  });

  it('caps the decoded body and says it was truncated', async () => {
    const server = await startServer((req, res) => {
      if (req.url === '/gzip') res.writeHead(200, { 'content-encoding': 'gzip', 'content-type': 'text/plain' }).end(gzipSync('a'.repeat(200_000)));
      else res.end('b'.repeat(5000));
    });
    try {
      const zipped = await guardedFetch(local(), `${server.origin}/gzip`, {}, { maxBytes: 1000 });
      assert.equal(zipped.bytes.length, 1000);
      assert.equal(zipped.truncated, true);
      assert.equal(zipped.text, 'a'.repeat(1000));
      const plain = await guardedFetch(local(), `${server.origin}/plain`, {}, { maxBytes: 5000 });
      assert.equal(plain.truncated, false);
      assert.equal(plain.bytes.length, 5000);
    } finally {
      await server.close();
    }
  });

  it('times out a server that never finishes, and honours the caller signal', async () => {
    const server = await startServer((_req, res) => res.write('partial'));
    try {
      const started = Date.now();
      await assert.rejects(guardedFetch(local(), `${server.origin}/slow`, {}, { timeoutMs: 200 }), { kind: 'timeout' });
      assert.ok(Date.now() - started < 5000);
      const controller = new AbortController();
      setTimeout(() => controller.abort(), 50);
      await assert.rejects(guardedFetch(local(), `${server.origin}/slow`, { signal: controller.signal }), { kind: 'aborted' });
    } finally {
      await server.close();
    }
  });

  it('does not wait past the deadline for a DNS answer that never comes', async () => {
    const hanging = createSsrfGuard({ resolve: () => new Promise<string[]>(() => {}) });
    await assert.rejects(guardedFetch(hanging, 'http://slow-dns.test/', {}, { timeoutMs: 100 }), { kind: 'timeout', message: /slow-dns\.test within 100 ms/ });
  });

  it('decodes the declared charset', async () => {
    const server = await startServer((_req, res) => res.writeHead(200, { 'content-type': 'text/plain; charset=iso-8859-1' }).end(Buffer.from([0x63, 0x61, 0x66, 0xe9])));
    try {
      assert.equal((await guardedFetch(local(), server.origin)).text, 'café');
    } finally {
      await server.close();
    }
  });

  it('pinnedLookup answers with the checked addresses in both callback shapes', () => {
    const lookup = pinnedLookup(['127.0.0.1', '::1']);
    lookup('x', { all: true } as never, (err: unknown, list: unknown) => assert.deepEqual([err, list], [null, [{ address: '127.0.0.1', family: 4 }, { address: '::1', family: 6 }]]));
    lookup('x', { family: 6 }, (err, address, family) => assert.deepEqual([err, address, family], [null, '::1', 6]));
    pinnedLookup(['127.0.0.1'])('x', { family: 6 }, (err) => assert.equal((err as { code?: string }).code, 'ENOTFOUND'));
  });
});
