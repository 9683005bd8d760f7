/**
 * Hostile URLs through the real http_request and web_fetch tools: each must be refused with a
 * message that names what was refused, and none may reach the local server that most of them
 * point at (it listens on 127.0.0.1, so a guard that let them through would be hit).
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { createSsrfGuard, type SsrfGuard } from '../src/security/ssrf.ts';
import type { ToolContext, ToolResult } from '../src/tool.ts';
import { createHttpRequestTool, createWebFetchTool, type HttpToolOptions } from '../src/tools/http.ts';
import { testLogger } from './support/log.ts';

let server: http.Server;
let port = 0;
const hits: string[] = [];

before(async () => {
  server = http.createServer((req, res) => {
    hits.push(req.url!);
    const to = redirects[req.url!];
    if (to) res.writeHead(302, { location: to(port) }).end();
    else res.end('secret');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
});
after(() => {
  server.closeAllConnections();
  server.close();
});

/** DNS for the test: the listed names only, never the network. */
const dns: Record<string, string[]> = { 'rebind.test': ['93.184.216.34', '127.0.0.1'], 'inner.test': ['10.20.30.40'] };
const resolve = async (host: string): Promise<string[]> => {
  const answer = dns[host];
  if (!answer) throw Object.assign(new Error(`ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
  return answer;
};

/** Fails the test loudly (instead of connecting) if the guard ever lets through anything but 127.0.0.1. */
function onlyLoopbackOrThrow(guard: SsrfGuard): SsrfGuard {
  return {
    async check(url) {
      const verdict = await guard.check(url);
      if (verdict.ok && verdict.addresses.some((address) => address !== '127.0.0.1')) throw new Error(`test safety: ${url.href} would contact ${verdict.addresses.join(', ')}`);
      return verdict;
    },
  };
}

/** Runs `url` through both tools: [tool name, result]. */
async function both(options: HttpToolOptions, url: string): Promise<[string, ToolResult][]> {
  return [
    ['http_request', await createHttpRequestTool(options).execute({ method: 'GET', url }, ctx)],
    ['web_fetch', await createWebFetchTool(options).execute({ url }, ctx)],
  ];
}

const ctx: ToolContext = { conversation: 'c', channel: 'test', senderId: 'attacker', workspace: '/tmp', signal: new AbortController().signal, log: testLogger() };

// [url (with P for the local port), what the refusal must say]
const hostile: [string, RegExp][] = [
  ['http://127.0.0.1:P/', /127\.0\.0\.1 is a loopback address/],
  ['http://localhost:P/', /localhost because it is a loopback host name/],
  ['http://LocalHost.:P/', /localhost because it is a loopback host name/],
  ['http://[::1]:P/', /::1 is a loopback address/],
  ['http://0.0.0.0:P/', /0\.0\.0\.0 is an unspecified/],
  ['http://0:P/', /0\.0\.0\.0 is an unspecified/],
  ['http://[::]:P/', /:: is an unspecified address/],
  ['http://169.254.169.254/latest/meta-data/iam/', /169\.254\.169\.254 is a cloud metadata address/],
  ['http://[fd00:ec2::254]/latest/meta-data/', /fd00:ec2::254 is a private \(unique local\) address/],
  ['http://metadata.google.internal/computeMetadata/v1/', /metadata\.google\.internal because it is a cloud metadata service/],
  ['http://metadata/', /metadata because it is a cloud metadata service/],
  ['http://10.0.0.1/', /10\.0\.0\.1 is a private address/],
  ['http://172.16.0.1/', /172\.16\.0\.1 is a private address/],
  ['http://192.168.1.1/', /192\.168\.1\.1 is a private address/],
  ['http://100.64.0.1/', /100\.64\.0\.1 is a carrier-grade NAT/],
  ['http://[fe80::1]/', /fe80::1 is a link-local address/],
  ['http://2130706433:P/', /127\.0\.0\.1 is a loopback address/],
  ['http://0x7f000001:P/', /127\.0\.0\.1 is a loopback address/],
  ['http://0177.0.0.1:P/', /127\.0\.0\.1 is a loopback address/],
  ['http://127.1:P/', /127\.0\.0\.1 is a loopback address/],
  ['http://0x7f.0.0.1:P/', /127\.0\.0\.1 is a loopback address/],
  ['http://[::ffff:127.0.0.1]:P/', /IPv4-mapped IPv6 of 127\.0\.0\.1, a loopback address/],
  ['http://[64:ff9b::7f00:1]:P/', /NAT64 IPv6 of 127\.0\.0\.1, a loopback address/],
  ['http://rebind.test:P/', /rebind\.test resolves to 127\.0\.0\.1, a loopback address/],
  ['http://user:pass@127.0.0.1:P/', /credentials/],
  ['file:///etc/passwd', /file:\/\/ URL: only http and https/],
  ['gopher://127.0.0.1:P/_GET%20/', /gopher:\/\/ URL: only http and https/],
  ['ftp://127.0.0.1:P/', /ftp:\/\/ URL: only http and https/],
];

/** Routes on the local server that redirect somewhere hostile. */
const redirects: Record<string, (port: number) => string> = {
  '/to-metadata': () => 'http://169.254.169.254/latest/meta-data/',
  '/to-private': () => 'http://10.0.0.1/admin',
  '/to-localhost': (p) => `http://localhost:${p}/secret`,
  '/to-inner': () => 'http://inner.test/',
  '/to-file': () => 'file:///etc/passwd',
  '/chain': () => '/chain-2',
  '/chain-2': () => 'http://[::ffff:a9fe:a9fe]/',
};
const redirectRefusals: Record<string, RegExp> = {
  '/to-metadata': /to http:\/\/169\.254\.169\.254\/latest\/meta-data\/ refused.*cloud metadata address/,
  '/to-private': /to http:\/\/10\.0\.0\.1\/admin refused.*private address/,
  '/to-localhost': /to http:\/\/localhost:\d+\/secret refused.*loopback host name/,
  '/to-inner': /to http:\/\/inner\.test\/ refused.*inner\.test resolves to 10\.20\.30\.40, a private address/,
  '/to-file': /to file:\/\/\/etc\/passwd refused.*only http and https/,
  '/chain': /\/chain-2 to http:\/\/\[::ffff:a9fe:a9fe\]\/ refused.*IPv4-mapped IPv6 of 169\.254\.169\.254/,
};

describe('hostile URLs through the HTTP tools', () => {
  const strict = { guard: onlyLoopbackOrThrow(createSsrfGuard({ resolve })) };

  for (const [template, expected] of hostile) {
    it(`refuses ${template}`, async () => {
      const url = template.replace(':P/', `:${port}/`);
      for (const [name, result] of await both(strict, url)) {
        assert.equal(result.kind, 'error', `${name} ${url}: ${JSON.stringify(result)}`);
        const message = result.kind === 'error' ? result.message : '';
        assert.match(message, expected, name);
        if (!/credentials|only http/.test(expected.source)) assert.match(message, /allow_hosts = \["/);
      }
      assert.deepEqual(hits, []);
    });
  }

  it('has a large enough table', () => assert.ok(hostile.length >= 15));
});

describe('hostile redirects from an allowed server', () => {
  const allowed = { guard: onlyLoopbackOrThrow(createSsrfGuard({ allowHosts: ['127.0.0.1'], resolve })) };

  for (const [path, expected] of Object.entries(redirectRefusals)) {
    it(`refuses the redirect behind ${path}`, async () => {
      hits.length = 0;
      for (const [name, result] of await both(allowed, `http://127.0.0.1:${port}${path}`)) {
        assert.equal(result.kind, 'error', `${name}: ${JSON.stringify(result)}`);
        assert.match(result.kind === 'error' ? result.message : '', expected, name);
      }
      // Only the redirecting hops were served (once per tool); nothing after the refused one.
      const served = path === '/chain' ? ['/chain', '/chain-2'] : [path];
      assert.deepEqual(hits, [...served, ...served]);
    });
  }

  it('still serves the allowed server itself', async () => {
    hits.length = 0;
    for (const [name, result] of await both(allowed, `http://127.0.0.1:${port}/plain`)) assert.equal(result.kind, 'ok', name);
    assert.deepEqual(hits, ['/plain', '/plain']);
  });
});
