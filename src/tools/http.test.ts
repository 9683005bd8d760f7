import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { testLogger } from '../../test/support/log.ts';
import { createSsrfGuard } from '../security/ssrf.ts';
import type { ToolContext, ToolResult } from '../tool.ts';
import { createHttpRequestTool, createWebFetchTool, type HttpToolOptions } from './http.ts';

interface Seen {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

const page = `<!doctype html><html><head><title> Test page &amp; more </title><style>body { color: red }</style>
<script>alert("tracking")</script></head><body><h1>Hello</h1><p>Read the <a href="/docs">documentation</a> or
<a href="https://example.org/">https://example.org/</a>.</p><noscript>enable js</noscript><a href="javascript:void(0)">menu</a>
<table><tr><th>Name</th><th>Value</th></tr><tr><td>a</td><td>b</td></tr></table><img src="x.png" alt="logo"></body></html>`;

const routes: Record<string, (req: http.IncomingMessage, res: http.ServerResponse) => void> = {
  '/json': (_req, res) => res.writeHead(200, { 'content-type': 'application/json', etag: '"v1"', 'x-secret-internal': 'noise' }).end('{"hello":"world"}'),
  '/echo': (req, res) => res.writeHead(201, { 'content-type': 'text/plain', location: '/items/1' }).end(`${req.method} ${req.headers['content-type']}`),
  '/big': (_req, res) => res.writeHead(200, { 'content-type': 'text/plain' }).end('x'.repeat(50_000)),
  '/png': (_req, res) => res.writeHead(200, { 'content-type': 'image/png' }).end(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0, 0, 0, 0x0d])),
  '/octets': (_req, res) => res.end(Buffer.from([1, 2, 0, 3, 4])),
  '/page': (_req, res) => res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(page),
  '/text': (_req, res) => res.writeHead(200, { 'content-type': 'text/plain' }).end('line one\n'.repeat(100)),
  '/missing': (_req, res) => res.writeHead(404, { 'content-type': 'text/html' }).end('<p>No such page</p>'),
  '/hop': (_req, res) => res.writeHead(302, { location: '/hop2' }).end(),
  '/hop2': (_req, res) => res.writeHead(301, { location: 'http://169.254.169.254/latest/meta-data/' }).end(),
  '/moved': (_req, res) => res.writeHead(301, { location: '/page' }).end(),
};

let server: http.Server;
let origin: string;
const seen: Seen[] = [];

before(async () => {
  server = http.createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8').on('data', (chunk: string) => (body += chunk));
    req.on('end', () => {
      seen.push({ method: req.method!, url: req.url!, headers: req.headers, body });
      (routes[req.url!] ?? ((_q, r) => r.writeHead(404).end()))(req, res);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
after(() => {
  server.closeAllConnections();
  server.close();
});

const noDns = async (host: string): Promise<string[]> => {
  throw Object.assign(new Error(`no DNS in tests (${host})`), { code: 'ENOTFOUND' });
};
const options = (extra: Partial<HttpToolOptions> = {}): HttpToolOptions => ({ guard: createSsrfGuard({ allowHosts: ['127.0.0.1'], resolve: noDns }), ...extra });
const ctx: ToolContext = { conversation: 'c', channel: 'test', senderId: 'u1', workspace: '/tmp', signal: new AbortController().signal, log: testLogger() };

function text(result: ToolResult): string {
  assert.equal(result.kind, 'ok', JSON.stringify(result));
  return result.kind === 'ok' ? result.text : '';
}
function error(result: ToolResult): string {
  assert.equal(result.kind, 'error', JSON.stringify(result));
  return result.kind === 'error' ? result.message : '';
}

describe('http_request', () => {
  const tool = createHttpRequestTool(options());

  it('reaches 127.0.0.1 when allowed, and the same URL is refused without allow_hosts', async () => {
    const before = seen.length;
    const out = text(await tool.execute({ method: 'GET', url: `${origin}/json` }, ctx));
    assert.match(out, /^HTTP 200 OK\ncontent-type: application\/json\n.*etag: "v1"\n\n\{"hello":"world"\}$/s);
    assert.doesNotMatch(out, /x-secret-internal/);
    assert.equal(seen.length, before + 1);

    const strict = createHttpRequestTool({ guard: createSsrfGuard({ resolve: noDns }) });
    const message = error(await strict.execute({ method: 'GET', url: `${origin}/json` }, ctx));
    assert.match(message, /127\.0\.0\.1 is a loopback address.*\[security\] allow_hosts = \["127\.0\.0\.1"\]/);
    assert.equal(seen.length, before + 1);
  });

  it('assesses reads as low risk and writes as medium, mutating', () => {
    assert.deepEqual(tool.assess!({ method: 'GET', url: 'https://x.test/' }, ctx), { risk: 'low', mutates: false, summary: 'http_request: GET https://x.test/' });
    assert.equal(tool.assess!({ method: 'HEAD', url: 'https://x.test/' }, ctx).mutates, false);
    for (const method of ['POST', 'PUT', 'PATCH', 'DELETE'] as const) {
      assert.deepEqual(tool.assess!({ method, url: 'https://x.test/' }, ctx), { risk: 'medium', mutates: true, summary: `http_request: ${method} https://x.test/` });
    }
  });

  it('sends a body, guessing JSON, and shows status and selected headers', async () => {
    const out = text(await tool.execute({ method: 'POST', url: `${origin}/echo`, body: '{"a":1}', headers: { 'X-Trace': 't1' } }, ctx));
    assert.match(out, /^HTTP 201 Created\ncontent-type: text\/plain\n.*location: \/items\/1\n\nPOST application\/json$/s);
    const request = seen.at(-1)!;
    assert.equal(request.body, '{"a":1}');
    assert.equal(request.headers['x-trace'], 't1');
    assert.match(request.headers['user-agent']!, /Switchboard/);
    const plain = text(await tool.execute({ method: 'PUT', url: `${origin}/echo`, body: 'hi', headers: { 'Content-Type': 'text/csv' } }, ctx));
    assert.match(plain, /PUT text\/csv$/);
  });

  it('answers HEAD with the status line and headers only', async () => {
    assert.match(text(await tool.execute({ method: 'HEAD', url: `${origin}/json` }, ctx)), /^HTTP 200 OK\ncontent-type: application\/json\n.*etag: "v1"$/s);
  });

  it('refuses Host and hop-by-hop headers, and a body on GET', async () => {
    for (const name of ['Host', 'connection', 'Transfer-Encoding', 'Upgrade', 'Proxy-Authorization']) {
      assert.match(error(await tool.execute({ method: 'GET', url: `${origin}/json`, headers: { [name]: 'x' } }, ctx)), new RegExp(`Header "${name}" cannot be set`));
    }
    assert.match(error(await tool.execute({ method: 'GET', url: `${origin}/json`, headers: { 'X-A': 'a\r\nHost: evil' } }, ctx)), /single-line/);
    assert.match(error(await tool.execute({ method: 'GET', url: `${origin}/json`, body: 'x' }, ctx)), /GET request cannot have a body/);
  });

  it('caps a large body and says so', async () => {
    const capped = createHttpRequestTool(options({ maxBytes: 10_000, maxChars: 2000 }));
    const out = text(await capped.execute({ method: 'GET', url: `${origin}/big` }, ctx));
    assert.match(out, /\n\nx{2000}\n\[truncated: showing 2000 of 10000 characters\]\n\[truncated: the response was larger than 10000 bytes; only the first 10000 were read\]$/);
  });

  it('describes a binary body instead of dumping it', async () => {
    assert.match(text(await tool.execute({ method: 'GET', url: `${origin}/png` }, ctx)), /\n\n\[binary body: image\/png, 8 bytes, not shown\]$/);
    assert.match(text(await tool.execute({ method: 'GET', url: `${origin}/octets` }, ctx)), /\[binary body: unknown type, 5 bytes, not shown\]$/);
  });

  it('refuses a redirect chain from the allowed server to the metadata address', async () => {
    const before = seen.length;
    const message = error(await tool.execute({ method: 'GET', url: `${origin}/hop` }, ctx));
    assert.match(message, /Redirect from .*\/hop2 to http:\/\/169\.254\.169\.254\/latest\/meta-data\/ refused.*cloud metadata address/);
    assert.deepEqual(seen.slice(before).map((r) => r.url), ['/hop', '/hop2']);
  });

  it('reports an unreachable server as an error the model can read', async () => {
    const closed = http.createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    assert.match(error(await tool.execute({ method: 'GET', url: `http://127.0.0.1:${port}/` }, ctx)), /Request to 127\.0\.0\.1:\d+ failed: ECONNREFUSED/);
  });
});

describe('web_fetch', () => {
  const tool = createWebFetchTool(options());

  it('turns HTML into readable text, keeping links and dropping scripts and styles', async () => {
    const out = text(await tool.execute({ url: `${origin}/page` }, ctx));
    assert.match(out, /^URL: http:\/\/127\.0\.0\.1:\d+\/page\nTitle: Test page & more\n\n/);
    assert.match(out, /HELLO/);
    assert.match(out, new RegExp(`documentation \\[${origin}/docs\\]`));
    assert.match(out, /https:\/\/example\.org\/\./);
    assert.doesNotMatch(out, /\[https:\/\/example\.org\/\]/);
    assert.match(out, /NAME +VALUE\na +b/);
    for (const hidden of ['javascript', 'alert', 'tracking', 'color: red', 'enable js', 'logo', '<']) assert.ok(!out.includes(hidden), `${hidden} leaked: ${out}`);
  });

  it('says where a redirect led', async () => {
    assert.match(text(await tool.execute({ url: `${origin}/moved` }, ctx)), /\(followed 1 redirect to http:\/\/127\.0\.0\.1:\d+\/page\)/);
  });

  it('returns other text as is, capped at max_chars', async () => {
    const out = text(await tool.execute({ url: `${origin}/text`, max_chars: 100 }, ctx));
    assert.match(out, /\n\n(line one\n){11}l\n\[truncated: showing 100 of 899 characters\]$/);
  });

  it('refuses binary content and reports HTTP errors', async () => {
    assert.match(error(await tool.execute({ url: `${origin}/png` }, ctx)), /is image\/png \(8 bytes\), not text/);
    assert.match(error(await tool.execute({ url: `${origin}/missing` }, ctx)), /^HTTP 404 Not Found from .*\/missing\. The page says: No such page$/);
  });

  it('is assessed as a low-risk read', () => {
    assert.deepEqual(tool.assess!({ url: 'https://x.test/' }, ctx), { risk: 'low', mutates: false, summary: 'web_fetch: https://x.test/' });
  });
});
