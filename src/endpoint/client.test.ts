import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { brotliCompressSync, deflateSync, gzipSync } from 'node:zlib';
import type { IncomingMessage } from 'node:http';
import { startSocketServer, type SocketServer } from '../../test/fixtures/socket-server.ts';
import { ProviderError } from '../provider.ts';
import { createEndpointClient } from './client.ts';
import { postJson, readEvents, readJsonObject, type EndpointCall } from './http.ts';

type TestServer = SocketServer;
const startServer = (): Promise<SocketServer> => startSocketServer({ buffered: true });

const waitFor = async (check: () => boolean): Promise<void> => {
  for (let i = 0; i < 200 && !check(); i++) await new Promise((resolve) => setTimeout(resolve, 10));
  assert.ok(check(), 'condition not reached within 2 s');
};

describe('endpoint client (node:http)', () => {
  let server: TestServer;
  let other: TestServer;
  before(async () => {
    server = await startServer();
    other = await startServer();
  });
  after(async () => {
    await server.close();
    await other.close();
  });

  it('POSTs the body with its headers and keeps the connection for the next request', async () => {
    const seen: Array<{ body: string; type: string | undefined; port: number | undefined }> = [];
    server.handle((request, response, body) => {
      seen.push({ body, type: request.headers['content-type'], port: request.socket.remotePort });
      response.setHeader('content-type', 'application/json');
      response.setHeader('x-many', ['a', 'b']);
      response.end('{"ok":true}');
    });
    const client = createEndpointClient();
    try {
      for (let i = 0; i < 2; i++) {
        const answer = await client.post(`${server.url}/v1/x`, { headers: { 'content-type': 'application/json' }, body: `{"n":${i}}`, signal: new AbortController().signal });
        assert.equal(answer.status, 200);
        assert.equal(answer.ok, true);
        assert.equal(answer.headers.get('Content-Type'), 'application/json');
        assert.equal(answer.headers.get('x-many'), 'a, b');
        assert.equal(answer.headers.get('x-none'), null);
        assert.equal(await answer.text(), '{"ok":true}');
      }
      assert.deepEqual(
        seen.map((s) => s.body),
        ['{"n":0}', '{"n":1}'],
      );
      assert.equal(seen[0]!.type, 'application/json');
      assert.equal(seen[0]!.port, seen[1]!.port, 'the kept-alive connection was reused');
    } finally {
      client.close();
    }
  });

  it('an abort before the answer rejects with the reason as it is and closes the socket (never pooled)', async () => {
    server.handle(() => undefined); // never answers
    const client = createEndpointClient();
    try {
      const controller = new AbortController();
      const reason = { mine: true };
      const pending = client.post(`${server.url}/hang`, { headers: {}, body: '{}', signal: controller.signal });
      await waitFor(() => server.sockets.size > 0);
      const socket = [...server.sockets][0]!;
      controller.abort(reason);
      await assert.rejects(pending, (error) => error === reason);
      await waitFor(() => server.closed.includes(socket));
    } finally {
      client.close();
    }
  });

  it('an abort while the body is read ends the iteration with the reason and closes the socket', async () => {
    server.handle((_request, response) => {
      response.writeHead(200, { 'content-type': 'text/event-stream' });
      response.write('data: 1\n\n'); // then nothing more
    });
    const client = createEndpointClient();
    try {
      const controller = new AbortController();
      const answer = await client.post(`${server.url}/stream`, { headers: {}, body: '{}', signal: controller.signal });
      const socket = [...server.sockets].at(-1)!;
      const chunks: string[] = [];
      await assert.rejects(
        (async () => {
          for await (const chunk of answer.body!) {
            chunks.push(Buffer.from(chunk).toString());
            controller.abort(new DOMException('stop', 'AbortError'));
          }
        })(),
        { name: 'AbortError', message: 'stop' },
      );
      assert.deepEqual(chunks, ['data: 1\n\n']);
      await waitFor(() => server.closed.includes(socket));
    } finally {
      client.close();
    }
  });

  for (const [coding, encode] of [
    ['gzip', gzipSync],
    ['deflate', deflateSync],
    ['br', brotliCompressSync],
  ] as const) {
    it(`decodes a ${coding} body (and asks for it)`, async () => {
      let asked: string | undefined;
      server.handle((request, response) => {
        asked = request.headers['accept-encoding'];
        response.writeHead(200, { 'content-type': 'application/json', 'content-encoding': coding });
        response.end(encode(Buffer.from('{"text":"héllo"}')));
      });
      const client = createEndpointClient();
      try {
        const answer = await client.post(`${server.url}/z`, { headers: {}, body: '{}', signal: new AbortController().signal });
        assert.equal(await answer.text(), '{"text":"héllo"}');
        assert.equal(asked, 'gzip, deflate, br');
      } finally {
        client.close();
      }
    });
  }

  it('a gzip-encoded event stream arrives event by event', async () => {
    const { createGzip, constants } = await import('node:zlib');
    let release: () => void = () => undefined;
    server.handle((_request, response) => {
      response.writeHead(200, { 'content-type': 'text/event-stream', 'content-encoding': 'gzip' });
      const gzip = createGzip();
      gzip.pipe(response);
      gzip.write('data: one\n\n');
      gzip.flush(constants.Z_SYNC_FLUSH);
      release = () => gzip.end('data: two\n\n');
    });
    const client = createEndpointClient();
    try {
      const call: EndpointCall = { url: `${server.url}/sse`, timeoutMs: 5000, signal: new AbortController().signal };
      const answer = await postJson(client, call, {}, {});
      const seen: string[] = [];
      for await (const event of readEvents(call, answer)) {
        seen.push(event.data);
        if (seen.length === 1) release(); // the second is sent only once the first was read
      }
      assert.deepEqual(seen, ['one', 'two']);
    } finally {
      client.close();
    }
  });

  describe('redirects', () => {
    it('307/308 repeat the POST with its body and key on the same origin', async () => {
      const seen: Array<{ path: string; method: string; auth: string | undefined; body: string }> = [];
      server.handle((request, response, body) => {
        seen.push({ path: request.url!, method: request.method!, auth: request.headers.authorization, body });
        if (request.url === '/a') response.writeHead(307, { location: '/b' }).end();
        else if (request.url === '/b') response.writeHead(308, { location: `${server.url}/c` }).end();
        else response.end('{"done":true}');
      });
      const client = createEndpointClient();
      try {
        const answer = await client.post(`${server.url}/a`, { headers: { authorization: 'Bearer sk-1' }, body: '{"x":1}', signal: new AbortController().signal });
        assert.equal(await answer.text(), '{"done":true}');
        assert.deepEqual(seen, [
          { path: '/a', method: 'POST', auth: 'Bearer sk-1', body: '{"x":1}' },
          { path: '/b', method: 'POST', auth: 'Bearer sk-1', body: '{"x":1}' },
          { path: '/c', method: 'POST', auth: 'Bearer sk-1', body: '{"x":1}' },
        ]);
      } finally {
        client.close();
      }
    });

    it('never hands a key to another origin', async () => {
      server.handle((_request, response) => response.writeHead(307, { location: `${other.url}/elsewhere` }).end());
      const headers: Array<IncomingMessage['headers']> = [];
      other.handle((request, response, body) => {
        headers.push(request.headers);
        response.end(body);
      });
      const client = createEndpointClient();
      try {
        const secrets = { authorization: 'Bearer sk-1', 'x-api-key': 'k', 'x-goog-api-key': 'g', cookie: 'c=1', 'anthropic-version': '2023-06-01', 'content-type': 'application/json' };
        const answer = await client.post(`${server.url}/a`, { headers: secrets, body: '{"x":1}', signal: new AbortController().signal });
        assert.equal(await answer.text(), '{"x":1}', 'the POST went on, without the credentials');
        const got = headers[0]!;
        for (const name of ['authorization', 'x-api-key', 'x-goog-api-key', 'cookie']) assert.equal(got[name], undefined, name);
        assert.equal(got['anthropic-version'], '2023-06-01');
        assert.equal(got['content-type'], 'application/json');
      } finally {
        client.close();
      }
    });

    it('301/302/303 turn the POST into a GET without a body; after 5 hops the redirect is the answer', async () => {
      const seen: string[] = [];
      server.handle((request, response, body) => {
        seen.push(`${request.method} ${request.url} ${body} ${request.headers['content-type'] ?? '-'}`);
        if (request.url === '/moved') response.writeHead(301, { location: '/new' }).end();
        else if (request.url?.startsWith('/loop')) response.writeHead(302, { location: `/loop${seen.length}` }).end('{"error":"loop"}');
        else response.end('{}');
      });
      const client = createEndpointClient();
      try {
        const signal = new AbortController().signal;
        await (await client.post(`${server.url}/moved`, { headers: { 'content-type': 'application/json' }, body: '{"x":1}', signal })).text();
        assert.deepEqual(seen, ['POST /moved {"x":1} application/json', 'GET /new  -']);
        seen.length = 0;
        const looped = await client.post(`${server.url}/loop`, { headers: {}, body: '{}', signal });
        assert.equal(looped.status, 302);
        assert.equal(await looped.text(), '{"error":"loop"}');
        assert.equal(seen.length, 6, 'the first request and 5 hops');
      } finally {
        client.close();
      }
    });
  });

  it('with a proxy environment (NODE_USE_ENV_PROXY=1 hands process.env), requests go through HTTP_PROXY', async () => {
    const proxied: string[] = [];
    other.handle((request, response, body) => {
      // A forward proxy gets the absolute URL; answer for the target instead of forwarding.
      proxied.push(`${request.method} ${request.url} ${body}`);
      response.end('{"via":"proxy"}');
    });
    server.handle((_request, response) => response.end('{"via":"direct"}'));
    const client = createEndpointClient({ proxyEnv: { HTTP_PROXY: other.url } });
    try {
      const answer = await client.post(`${server.url}/v1/chat`, { headers: {}, body: '{"p":1}', signal: new AbortController().signal });
      assert.equal(await answer.text(), '{"via":"proxy"}');
      assert.deepEqual(proxied, [`POST ${server.url}/v1/chat {"p":1}`]);
    } finally {
      client.close();
    }
    const bypass = createEndpointClient({ proxyEnv: { HTTP_PROXY: other.url, NO_PROXY: '127.0.0.1' } });
    try {
      const answer = await bypass.post(`${server.url}/v1/chat`, { headers: {}, body: '{}', signal: new AbortController().signal });
      assert.equal(await answer.text(), '{"via":"direct"}');
    } finally {
      bypass.close();
    }
  });
});

describe('endpoint client over https', () => {
  it('refuses a self-signed server, and trusts it once NODE_EXTRA_CA_CERTS names its certificate', (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'sb-client-tls-'));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    const key = join(dir, 'key.pem');
    const cert = join(dir, 'cert.pem');
    execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', key, '-out', cert, '-days', '2', '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1'], { stdio: 'ignore' });
    // A child, since Node reads NODE_EXTRA_CA_CERTS once at start.
    const script = [
      `import { createServer } from 'node:https';`,
      `import { readFileSync } from 'node:fs';`,
      `import { createEndpointClient } from ${JSON.stringify(new URL('./client.ts', import.meta.url).href)};`,
      `const server = createServer({ key: readFileSync(${JSON.stringify(key)}), cert: readFileSync(${JSON.stringify(cert)}) }, (q, s) => { q.resume(); q.on('end', () => s.end('{"tls":true}')); }).listen(0, '127.0.0.1');`,
      `await new Promise((r) => server.once('listening', r));`,
      `const client = createEndpointClient();`,
      `try { const r = await client.post('https://127.0.0.1:' + server.address().port + '/v1', { headers: {}, body: '{}', signal: new AbortController().signal }); process.stdout.write(r.status + ' ' + await r.text()); }`,
      `catch (e) { process.stdout.write(e.message + ': ' + e.cause?.code); }`,
      `finally { server.close(); client.close(); }`,
    ].join('\n');
    const run = (env: NodeJS.ProcessEnv): string => execFileSync(process.execPath, ['--input-type=module', '-e', script], { env: { PATH: process.env.PATH, ...env }, encoding: 'utf8' });
    assert.equal(run({}), 'fetch failed: DEPTH_ZERO_SELF_SIGNED_CERT');
    assert.equal(run({ NODE_EXTRA_CA_CERTS: cert }), '200 {"tls":true}');
  });
});

describe('postJson and the readers over the client: fetch-shaped failures', () => {
  let server: TestServer;
  before(async () => {
    server = await startServer();
  });
  after(async () => {
    await server.close();
  });
  const callFor = (url: string, timeoutMs = 5000): EndpointCall => ({ url, timeoutMs, signal: new AbortController().signal });

  it('nothing listening: a retryable ProviderError with fetch\'s message and the hint', async () => {
    const client = createEndpointClient();
    const call = callFor('http://127.0.0.1:1/v1/chat/completions');
    await assert.rejects(postJson(client, call, {}, {}), (error: unknown) => {
      assert.ok(error instanceof ProviderError);
      assert.match(error.message, /^model endpoint http:\/\/127\.0\.0\.1:1\/v1\/chat\/completions unreachable: fetch failed: connect ECONNREFUSED 127\.0\.0\.1:1; nothing listens there/);
      assert.equal(error.retryable, true);
      return true;
    });
  });

  it('a body cut off mid-JSON is a retryable "failed while answering"', async () => {
    server.handle((_request, response) => {
      response.writeHead(200, { 'content-type': 'application/json', 'content-length': '100' });
      response.write('{"choices":[{"mess');
      setTimeout(() => response.socket?.destroy(), 20);
    });
    const client = createEndpointClient();
    try {
      const call = callFor(`${server.url}/v1/chat/completions`);
      const answer = await postJson(client, call, {}, {});
      await assert.rejects(readJsonObject(call, answer), (error: unknown) => {
        assert.ok(error instanceof ProviderError);
        assert.match(error.message, /failed while answering: terminated: aborted; the connection was dropped/);
        assert.equal(error.retryable, true);
        return true;
      });
    } finally {
      client.close();
    }
  });

  it('a stream that stalls mid-way times out under the same deadline, and its socket is closed', async () => {
    server.handle((_request, response) => {
      response.writeHead(200, { 'content-type': 'text/event-stream' });
      response.write('data: {"a":1}\n\n');
    });
    const client = createEndpointClient();
    try {
      const call = callFor(`${server.url}/v1/chat/completions`, 300);
      const answer = await postJson(client, call, {}, {});
      const socket = [...server.sockets].at(-1)!;
      const seen: string[] = [];
      await assert.rejects(
        (async () => {
          for await (const event of readEvents(call, answer)) seen.push(event.data);
        })(),
        (error: unknown) => {
          assert.ok(error instanceof ProviderError);
          assert.match(error.message, /failed while answering: the answer stalled and was not complete within 300 ms/);
          assert.equal(error.retryable, true);
          return true;
        },
      );
      assert.deepEqual(seen, ['{"a":1}']);
      await waitFor(() => server.closed.includes(socket));
    } finally {
      client.close();
    }
  });

  it('no answer within the timeout: "no answer within", and the caller\'s own abort passes through as it is', async () => {
    server.handle(() => undefined);
    const client = createEndpointClient();
    try {
      await assert.rejects(postJson(client, callFor(`${server.url}/hang`, 200), {}, {}), /unreachable: no answer within 200 ms/);
      const controller = new AbortController();
      const reason = new Error('shutting down');
      const pending = postJson(client, { url: `${server.url}/hang`, timeoutMs: 5000, signal: controller.signal }, {}, {});
      setTimeout(() => controller.abort(reason), 50);
      await assert.rejects(pending, (error) => error === reason);
    } finally {
      client.close();
    }
  });
});
