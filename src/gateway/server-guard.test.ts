/**
 * The gateway against web pages (issue 23, point 3: rebound Host names, foreign Origins,
 * cross-site text/plain POSTs) and against clients that hold sockets (point 6: sockets kept
 * after a 400, no connection cap, bodies buffered and waited for before any check).
 */
import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { after, describe, it } from 'node:test';
import { testLogger } from '../../test/support/log.ts';
import type { RuntimeHealth } from '../runtime/runtime.ts';
import { createGateway, type Gateway, type GatewayOptions } from './server.ts';

const token = 'test-token-0123456789abcdef';
const health = (): RuntimeHealth => ({ channels: [], queued: 0, inFlight: 0, pendingReplies: 0, counters: { received: 0, duplicates: 0, answered: 0, failed: 0, ignored: 0, sent: 0 } });

const started: Gateway[] = [];
const sockets: Socket[] = [];
after(async () => {
  for (const socket of sockets) socket.destroy();
  for (const gateway of started) await gateway.stop(100);
});

/** A gateway with the routes the daemon puts on it: a token GET, a token POST, an upgrade and a signed POST. */
async function start(options: Partial<GatewayOptions> = {}): Promise<{ port: number; calls: string[] }> {
  const calls: string[] = [];
  const gateway = createGateway({ listen: '127.0.0.1:0', log: testLogger(), health, metrics: () => 'up 1\n', ...options });
  gateway.addRoute({ method: 'GET', path: '/api/tools', auth: 'token', handle: (_q, r) => void (calls.push('tools'), r.end('[]')) });
  gateway.addRoute({ method: 'POST', path: '/api/reload', auth: 'token', handle: (_q, r) => void (calls.push('reload'), r.end('{}')) });
  gateway.addRoute({
    method: 'POST',
    path: '/webhook',
    auth: 'signature',
    admit: (request) => (request.headers['x-sig'] === 'good' ? { maxBodyBytes: 64, bodyTimeoutMs: 500 } : { refuse: { status: 401, error: 'bad signature' } }),
    handle: (_q, r, body) => void (calls.push(`webhook ${body.toString()}`), r.end('ok')),
  });
  gateway.addUpgrade({
    path: '/ws/tools',
    auth: 'token',
    handle: (_q, socket) => {
      calls.push('upgrade');
      socket.end('HTTP/1.1 101 Switching Protocols\r\nUpgrade: test\r\nConnection: Upgrade\r\n\r\n');
    },
  });
  const { port } = await gateway.start();
  started.push(gateway);
  return { port, calls };
}

/** Sends `text` on a raw socket; resolves with what came back once the server closed (or after `waitMs`). */
function exchange(port: number, text: string, waitMs = 3000): Promise<{ reply: string; closedMs: number | undefined; socket: Socket }> {
  return new Promise((resolve, reject) => {
    const began = performance.now();
    // allowHalfOpen: like a client that never sends its FIN.
    const socket = connect({ port, host: '127.0.0.1', allowHalfOpen: true }, () => socket.write(text));
    sockets.push(socket);
    let reply = '';
    const timer = setTimeout(() => resolve({ reply, closedMs: undefined, socket }), waitMs);
    socket.on('data', (chunk: Buffer) => (reply += chunk.toString()));
    socket.on('end', () => {
      clearTimeout(timer);
      resolve({ reply, closedMs: performance.now() - began, socket });
    });
    socket.on('error', reject);
  });
}

const request = (method: string, path: string, headers: Record<string, string>, body = ''): string =>
  `${method} ${path} HTTP/1.1\r\n${Object.entries({ 'content-length': String(Buffer.byteLength(body)), ...headers })
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('')}\r\n${body}`;

const statusOf = (reply: string): number => Number(/^HTTP\/1\.1 (\d{3})/.exec(reply)?.[1] ?? 0);

describe('gateway against web pages (tokenless loopback)', () => {
  it('refuses a rebound Host name on every route, the fallback and the upgrade (DNS rebinding)', async () => {
    const { port, calls } = await start();
    const evil = { host: `evil.example:${port}` };
    for (const path of ['/api/status', '/api/tools', '/metrics', '/healthz', '/readyz', '/anything']) {
      const { reply } = await exchange(port, request('GET', path, evil));
      assert.equal(statusOf(reply), 403, path);
      assert.match(reply, /loopback host name.*set \[gateway\] token/, path);
    }
    const upgrade = await exchange(port, request('GET', '/ws/tools', { ...evil, connection: 'Upgrade', upgrade: 'websocket' }));
    assert.equal(statusOf(upgrade.reply), 403);
    assert.deepEqual(calls, []);
    for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`]) {
      assert.equal(statusOf((await exchange(port, request('GET', '/api/tools', { host, connection: 'close' }))).reply), 200, host);
    }
  });

  it('with a token, serves any Host name (a proxy may pass its own) but still wants the token', async () => {
    const { port } = await start({ token });
    const evil = { host: 'bot.example.org', connection: 'close' };
    assert.equal(statusOf((await exchange(port, request('GET', '/api/status', evil))).reply), 401);
    assert.equal(statusOf((await exchange(port, request('GET', '/api/status', { ...evil, authorization: `Bearer ${token}` }))).reply), 200);
  });

  it('refuses a WebSocket upgrade from a foreign Origin, tokenless or not; a program (no Origin) or the same origin gets through', async () => {
    for (const options of [{}, { token }]) {
      const { port, calls } = await start(options);
      const base = { host: `127.0.0.1:${port}`, connection: 'Upgrade', upgrade: 'websocket', ...('token' in options ? { authorization: `Bearer ${token}` } : {}) };
      for (const origin of ['https://evil.example', 'null', `http://127.0.0.1:${port + 1}`]) {
        const { reply } = await exchange(port, request('GET', '/ws/tools', { ...base, origin }));
        assert.equal(statusOf(reply), 403, origin);
        assert.match(reply, /cross-origin request refused/);
      }
      assert.deepEqual(calls, []);
      assert.equal(statusOf((await exchange(port, request('GET', '/ws/tools', base))).reply), 101);
      assert.equal(statusOf((await exchange(port, request('GET', '/ws/tools', { ...base, origin: `http://127.0.0.1:${port}` }))).reply), 101);
    }
  });

  it('refuses a cross-site POST: a foreign Origin with 403, a text/plain or form body with 415; JSON from a program is served', async () => {
    const { port, calls } = await start();
    const host = `127.0.0.1:${port}`;
    const plain = await exchange(port, request('POST', '/api/reload', { host, 'content-type': 'text/plain' }, '{}'));
    assert.equal(statusOf(plain.reply), 415);
    assert.match(plain.reply, /Content-Type: application\/json/);
    assert.equal(statusOf((await exchange(port, request('POST', '/api/reload', { host, 'content-type': 'application/x-www-form-urlencoded' }, 'a=b'))).reply), 415);
    assert.equal(statusOf((await exchange(port, request('POST', '/api/reload', { host }))).reply), 415, 'no Content-Type at all');
    const cross = await exchange(port, request('POST', '/api/reload', { host, origin: 'https://evil.example', 'content-type': 'application/json' }, '{}'));
    assert.equal(statusOf(cross.reply), 403);
    assert.deepEqual(calls, []);
    const json = await exchange(port, request('POST', '/api/reload', { host, 'content-type': 'application/json; charset=utf-8', connection: 'close' }, '{}'));
    assert.equal(statusOf(json.reply), 200);
    assert.deepEqual(calls, ['reload']);
  });

  it('a signed route takes any Host and body type (its signature authenticates), but not a browser Origin', async () => {
    const { port, calls } = await start();
    const signed = { host: 'hooks.example.org', 'x-sig': 'good', 'content-type': 'text/plain', connection: 'close' };
    assert.equal(statusOf((await exchange(port, request('POST', '/webhook', signed, 'hi'))).reply), 200);
    assert.equal(statusOf((await exchange(port, request('POST', '/webhook', { ...signed, origin: 'https://evil.example' }, 'hi'))).reply), 403);
    assert.deepEqual(calls, ['webhook hi']);
  });
});

describe('gateway against clients that hold sockets', () => {
  it('destroys the socket after a 400 for a malformed request, so a client that never sends FIN holds no descriptor', async () => {
    const { port } = await start();
    const { reply, socket } = await exchange(port, 'NOT HTTP AT ALL\r\n\r\n');
    assert.match(reply, /^HTTP\/1\.1 400/);
    // An ended (half-closed) socket still reads; a destroyed one answers a write with a reset.
    const reset = await new Promise<boolean>((resolve) => {
      socket.on('error', () => resolve(true));
      socket.on('close', () => resolve(true));
      const poke = setInterval(() => socket.write('x'), 50);
      setTimeout(() => {
        clearInterval(poke);
        resolve(false);
      }, 1500);
    });
    socket.destroy();
    assert.equal(reset, true, 'the server kept the socket open after its 400');
  });

  it('caps open connections (maxConnections): one past the cap is closed at once, and a slot frees when a client leaves', async () => {
    const { port } = await start({ maxConnections: 2 });
    const held = await Promise.all([0, 1].map(() => new Promise<Socket>((resolve) => { const s = connect(port, '127.0.0.1', () => resolve(s)); sockets.push(s); })));
    await new Promise((resolve) => setTimeout(resolve, 100));
    const third = await exchange(port, request('GET', '/healthz', { host: `127.0.0.1:${port}` }), 2000);
    assert.equal(third.reply, '');
    assert.notEqual(third.closedMs, undefined, 'the connection past the cap was kept open');
    third.socket.destroy();
    held[0]!.destroy();
    await new Promise((resolve) => setTimeout(resolve, 100));
    assert.equal(statusOf((await exchange(port, request('GET', '/healthz', { host: `127.0.0.1:${port}`, connection: 'close' }))).reply), 200);
    held[1]!.destroy();
  });

  it('answers a GET at once without waiting for a body; a GET that declares one is refused and closed', async () => {
    const { port } = await start();
    const host = `127.0.0.1:${port}`;
    // 1 MiB declared, 10 bytes sent: before, /healthz waited for the rest (up to requestTimeout).
    const stalled = await exchange(port, `GET /healthz HTTP/1.1\r\nhost: ${host}\r\ncontent-length: 1048576\r\n\r\n0123456789`, 3000);
    assert.equal(statusOf(stalled.reply), 400);
    assert.match(stalled.reply, /carries no body/);
    assert.ok(stalled.closedMs !== undefined && stalled.closedMs < 1000, `closed after ${stalled.closedMs} ms`);
    stalled.socket.destroy();
  });

  it('a route checks the headers before any body is read; a stalled body is cut off with 408 and the socket closed', async () => {
    const { port, calls } = await start();
    const host = 'hooks.example.org';
    const unsigned = await exchange(port, `POST /webhook HTTP/1.1\r\nhost: ${host}\r\ncontent-length: 1048576\r\n\r\nxx`);
    assert.equal(statusOf(unsigned.reply), 401);
    assert.ok(unsigned.closedMs !== undefined && unsigned.closedMs < 1000, 'an unsigned stalled body is not waited for');
    const big = await exchange(port, `POST /webhook HTTP/1.1\r\nhost: ${host}\r\nx-sig: good\r\ncontent-length: 65\r\n\r\n`);
    assert.equal(statusOf(big.reply), 413, 'the route\'s own (small) body limit');
    const slow = await exchange(port, `POST /webhook HTTP/1.1\r\nhost: ${host}\r\nx-sig: good\r\ncontent-length: 60\r\n\r\nxx`);
    assert.equal(statusOf(slow.reply), 408);
    assert.ok(slow.closedMs !== undefined && slow.closedMs < 2000, `closed after ${slow.closedMs} ms`);
    assert.deepEqual(calls, []);
    for (const { socket } of [unsigned, big, slow]) socket.destroy();
  });

  it('cuts off a client that never finishes its headers (408 within headersTimeoutMs)', async () => {
    const { port } = await start({ headersTimeoutMs: 500 });
    const { reply, closedMs, socket } = await exchange(port, `GET /healthz HTTP/1.1\r\nhost: 127.0.0.1:${port}\r\nx-slow: `, 5000);
    assert.match(reply, /^HTTP\/1\.1 408/);
    assert.ok(closedMs !== undefined && closedMs < 2500, `closed after ${closedMs} ms`);
    socket.destroy();
  });
});
