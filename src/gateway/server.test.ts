import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import { after, describe, it } from 'node:test';
import { testLogger } from '../../test/support/log.ts';
import { ConfigError } from '../config/load.ts';
import type { ChannelHealth } from '../runtime/supervisor.ts';
import type { RuntimeHealth } from '../runtime/runtime.ts';
import { createGateway, isLoopback, validateGatewayConfig, type Gateway, type GatewayOptions } from './server.ts';

const token = 'test-token-0123456789abcdef';

function health(channels: Array<Partial<ChannelHealth> & { name: string }>): RuntimeHealth {
  return {
    channels: channels.map((channel) => ({ state: 'running', restarts: 0, since: Date.now() - 5000, ...channel })),
    queued: 2,
    inFlight: 1,
    pendingReplies: 0,
    counters: { received: 5, duplicates: 1, answered: 4, failed: 0, ignored: 0, sent: 4 },
  };
}

const started: Gateway[] = [];
after(async () => {
  for (const gateway of started) await gateway.stop(100);
});

async function start(options: Partial<GatewayOptions> = {}, setup?: (gateway: Gateway) => void): Promise<{ gateway: Gateway; base: string; port: number }> {
  const gateway = createGateway({ listen: '127.0.0.1:0', log: testLogger(), health: () => health([{ name: 'irc' }]), metrics: () => 'up 1\n', ...options });
  setup?.(gateway);
  const { port } = await gateway.start();
  started.push(gateway);
  return { gateway, base: `http://127.0.0.1:${port}`, port };
}

/** Raw HTTP (fetch refuses some of what we want to send). */
function raw(port: number, method: string, path: string, headers: Record<string, string | number>, body?: Buffer): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port, method, path, headers }, (res) => {
      let text = '';
      res.on('data', (chunk: Buffer) => (text += chunk.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
    });
    req.on('error', reject);
    if (body) req.write(body);
    req.end();
  });
}

describe('gateway configuration', () => {
  it('refuses a non-loopback address without a (long enough) token, naming the key and the fix', () => {
    for (const gateway of [{ listen: '0.0.0.0:8787' }, { listen: '[::]:8787', token: '' }, { listen: '192.168.1.5:8787', token: '${SWITCHBOARD_TOKEN}' }]) {
      assert.throws(
        () => validateGatewayConfig(gateway, '/etc/sb.toml'),
        (error: unknown) => error instanceof ConfigError && error.problems[0]!.path === 'gateway.token' && /not a loopback address/.test(error.message),
        JSON.stringify(gateway),
      );
    }
    assert.throws(() => validateGatewayConfig({ listen: '0.0.0.0:8787', token: 'short' }), /at least 16/);
    assert.throws(() => validateGatewayConfig({ listen: 'localhost' }), (error: unknown) => error instanceof ConfigError && error.problems[0]!.path === 'gateway.listen');
    assert.deepEqual(validateGatewayConfig({ listen: '127.0.0.1:8787' }), { host: '127.0.0.1', port: 8787 });
    assert.deepEqual(validateGatewayConfig({ listen: '[::1]:8787' }), { host: '::1', port: 8787 });
    assert.deepEqual(validateGatewayConfig({ listen: '0.0.0.0:8787', token }), { host: '0.0.0.0', port: 8787 });
    assert.throws(() => createGateway({ listen: '0.0.0.0:0', log: testLogger(), health: () => health([]) }), /without a token/);
  });

  it('knows loopback addresses', () => {
    for (const host of ['127.0.0.1', '127.1.2.3', '::1', 'localhost', '::ffff:127.0.0.1']) assert.equal(isLoopback(host), true, host);
    for (const host of ['0.0.0.0', '::', '10.0.0.1', 'example.org', '128.0.0.1']) assert.equal(isLoopback(host), false, host);
  });
});

describe('gateway', () => {
  it('serves /healthz and /readyz (503 naming the channels not running)', async () => {
    let channels: Array<Partial<ChannelHealth> & { name: string }> = [{ name: 'irc' }, { name: 'email', state: 'backoff', lastError: 'secret detail' }];
    const { base } = await start({ health: () => health(channels) });
    const healthz = await fetch(`${base}/healthz`);
    assert.equal(healthz.status, 200);
    assert.deepEqual(await healthz.json(), { status: 'ok' });
    const notReady = await fetch(`${base}/readyz`);
    assert.equal(notReady.status, 503);
    const body = await notReady.text();
    assert.deepEqual(JSON.parse(body), { ready: false, notRunning: [{ name: 'email', state: 'backoff' }] });
    assert.doesNotMatch(body, /secret detail/);
    channels = [{ name: 'irc' }, { name: 'email' }];
    const ready = await fetch(`${base}/readyz`);
    assert.equal(ready.status, 200);
    assert.deepEqual(await ready.json(), { ready: true });
  });

  it('/readyz is 503 while the data_dir is full, saying so without the path; /api/status counts the refused writes', async () => {
    let storage: RuntimeHealth['storage'] = { writable: false, code: 'SQLITE_FULL', since: Date.parse('2026-01-02T03:04:05Z'), refused: 7 };
    const { base } = await start({ health: () => ({ ...health([{ name: 'irc' }]), storage }) });
    const notReady = await fetch(`${base}/readyz`);
    assert.equal(notReady.status, 503);
    assert.deepEqual(await notReady.json(), {
      ready: false,
      notRunning: [],
      storage: { writable: false, code: 'SQLITE_FULL', since: '2026-01-02T03:04:05.000Z', reason: 'the disk of the data_dir is full: new messages are refused until space is freed' },
    });
    const status = (await (await fetch(`${base}/api/status`)).json()) as { storage?: unknown };
    assert.deepEqual(status.storage, { writable: false, code: 'SQLITE_FULL', since: '2026-01-02T03:04:05.000Z', refused: 7 });
    storage = { writable: true };
    assert.equal((await fetch(`${base}/readyz`)).status, 200);
    assert.equal(((await (await fetch(`${base}/api/status`)).json()) as { storage?: unknown }).storage, undefined);
  });

  it('guards token routes with a constant-time bearer check; open routes stay open', async () => {
    const { base } = await start({ token }, (g) => g.addRoute({ method: 'POST', path: '/echo', auth: 'token', handle: (_q, r, b) => void r.end(b) }));
    for (const headers of [{}, { authorization: 'Bearer wrong' }, { authorization: `Basic ${token}` }, { authorization: `Bearer ${token}x` }]) {
      const denied = await fetch(`${base}/api/status`, { headers });
      assert.equal(denied.status, 401, JSON.stringify(headers));
      assert.match(denied.headers.get('www-authenticate') ?? '', /Bearer/);
      assert.match(((await denied.json()) as { error: string }).error, /token/);
    }
    assert.equal((await fetch(`${base}/metrics`)).status, 401);
    assert.equal((await fetch(`${base}/healthz`)).status, 200);
    const status = await fetch(`${base}/api/status`, { headers: { authorization: `Bearer ${token}` } });
    assert.equal(status.status, 200);
    const report = (await status.json()) as { channels: Array<{ name: string; state: string }>; queued: number; inFlight: number; totals: { answered: number }; uptimeSeconds: number };
    assert.deepEqual(report.channels.map((c) => [c.name, c.state]), [['irc', 'running']]);
    assert.equal(report.queued, 2);
    assert.equal(report.inFlight, 1);
    assert.equal(report.totals.answered, 4);
    assert.ok(report.uptimeSeconds >= 0);
    const metrics = await fetch(`${base}/metrics`, { headers: { authorization: `bearer ${token}` } });
    assert.equal(metrics.status, 200);
    assert.match(metrics.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/);
    assert.equal(await metrics.text(), 'up 1\n');
    const echoed = await fetch(`${base}/echo`, { method: 'POST', body: '"hello"', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' } });
    assert.equal(await echoed.text(), '"hello"');
    assert.equal((await fetch(`${base}/echo`, { method: 'POST', body: '"hello"', headers: { 'content-type': 'application/json' } })).status, 401);
  });

  it('without a token (loopback) token routes are open', async () => {
    const { base } = await start();
    assert.equal((await fetch(`${base}/api/status`)).status, 200);
    assert.equal((await fetch(`${base}/metrics`)).status, 200);
  });

  it('answers unknown paths 404 and wrong methods 405, in JSON', async () => {
    const { base } = await start();
    const missing = await fetch(`${base}/nope?x=1`);
    assert.equal(missing.status, 404);
    assert.match(missing.headers.get('content-type') ?? '', /application\/json/);
    assert.deepEqual(await missing.json(), { error: 'no such endpoint: /nope' });
    const wrong = await fetch(`${base}/healthz`, { method: 'POST', body: 'x' });
    assert.equal(wrong.status, 405);
    assert.equal(wrong.headers.get('allow'), 'GET');
  });

  it('caps request bodies (declared or streamed) with 413, and keeps serving', async () => {
    let seen = 0;
    const { port, base } = await start({ maxBodyBytes: 1024 }, (g) =>
      g.addRoute({
        method: 'POST',
        path: '/in',
        auth: 'none',
        handle: (_q, r, body) => {
          seen = body.length;
          r.end('ok');
        },
      }),
    );
    const fits = await fetch(`${base}/in`, { method: 'POST', body: Buffer.alloc(1024, 'a'), headers: { 'content-type': 'application/json' } });
    assert.equal(fits.status, 200);
    assert.equal(seen, 1024);
    const declared = await raw(port, 'POST', '/in', { 'content-length': 5000, 'content-type': 'application/json' }, Buffer.alloc(5000, 'b'));
    assert.equal(declared.status, 413);
    assert.match(JSON.parse(declared.body).error, /larger than 1024 bytes/);
    const chunked = await raw(port, 'POST', '/in', { 'transfer-encoding': 'chunked', 'content-type': 'application/json' }, Buffer.alloc(4096, 'c'));
    assert.equal(chunked.status, 413);
    assert.equal((await fetch(`${base}/healthz`)).status, 200);
  });

  it('turns a throwing route into a JSON 500', async () => {
    const { base } = await start({}, (g) =>
      g.addRoute({
        method: 'GET',
        path: '/boom',
        auth: 'none',
        handle: () => {
          throw new Error('kaput');
        },
      }),
    );
    const response = await fetch(`${base}/boom`);
    assert.equal(response.status, 500);
    assert.doesNotMatch(await response.text(), /kaput/);
  });

  it('refuses duplicate routes', () => {
    const gateway = createGateway({ listen: '127.0.0.1:0', log: testLogger(), health: () => health([]) });
    assert.throws(() => gateway.addRoute({ method: 'GET', path: '/healthz', auth: 'none', handle: () => undefined }), /registered twice/);
    gateway.addUpgrade({ path: '/ws', auth: 'token', handle: () => undefined });
    assert.throws(() => gateway.addUpgrade({ path: '/ws', auth: 'none', handle: () => undefined }), /registered twice/);
  });

  it('authenticates upgrades before handing the socket over; unknown upgrade paths get 404', async () => {
    let handed = 0;
    const { port } = await start({ token }, (g) =>
      g.addUpgrade({
          path: '/ws/tools',
          auth: 'token',
          handle: (_req, socket) => {
            handed++;
            socket.end('HTTP/1.1 101 Switching Protocols\r\nUpgrade: test\r\nConnection: Upgrade\r\n\r\n');
          },
        }),
    );
    const upgrade = (path: string, auth?: string): Promise<string> =>
      new Promise((resolve, reject) => {
        const socket = connect(port, '127.0.0.1', () => {
          socket.write(`GET ${path} HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: test\r\n${auth ? `Authorization: ${auth}\r\n` : ''}\r\n`);
        });
        let text = '';
        socket.on('data', (chunk: Buffer) => (text += chunk.toString()));
        socket.on('end', () => resolve(text));
        socket.on('error', reject);
      });
    assert.match(await upgrade('/ws/tools'), /^HTTP\/1\.1 401/);
    assert.match(await upgrade('/ws/tools', 'Bearer nope'), /^HTTP\/1\.1 401/);
    assert.match(await upgrade('/ws/other', `Bearer ${token}`), /^HTTP\/1\.1 404/);
    assert.equal(handed, 0);
    assert.match(await upgrade('/ws/tools?client=1', `Bearer ${token}`), /^HTTP\/1\.1 101/);
    assert.equal(handed, 1);
  });

  it('reports a port in use at start, and stops cleanly', async () => {
    const { port, gateway } = await start();
    const second = createGateway({ listen: `127.0.0.1:${port}`, log: testLogger(), health: () => health([]) });
    await assert.rejects(second.start(), /EADDRINUSE/);
    await gateway.stop(100);
    await assert.rejects(fetch(`http://127.0.0.1:${port}/healthz`));
  });
});
