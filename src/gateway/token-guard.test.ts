/**
 * One limit for every way of presenting the gateway token (issue 23, point 7): wrong bearer
 * tokens on the gateway's own routes (/metrics, /api/status, the tool socket) counted and
 * logged like wrong console sign-ins, and the right token refused during a lockout — the
 * gateway's routes and the console's sign-in sharing one guard, as the daemon wires them.
 */
import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import { after, describe, it } from 'node:test';
import { pino } from 'pino';
import { createConsole } from '../console/server.ts';
import type { RuntimeHealth } from '../runtime/runtime.ts';
import { fakeConsoleDeps } from '../../test/support/console-deps.ts';
import { createGateway, type Gateway } from './server.ts';
import { createTokenGuard } from '../http/token-guard.ts';

const token = 'test-token-0123456789abcdef';
const health = (): RuntimeHealth => ({ channels: [], queued: 0, inFlight: 0, pendingReplies: 0, counters: { received: 0, duplicates: 0, answered: 0, failed: 0, ignored: 0, sent: 0 } });
const started: Gateway[] = [];
after(async () => {
  for (const gateway of started) await gateway.stop(100);
});

async function start(): Promise<{ base: string; port: number; logged: () => Array<Record<string, unknown>> }> {
  const lines: string[] = [];
  const log = pino({ level: 'info' }, { write: (line: string) => void lines.push(line) });
  const tokenGuard = createTokenGuard({ token: () => token, log });
  const gateway = createGateway({ listen: '127.0.0.1:0', token, tokenGuard, log, health, metrics: () => 'up 1\n' });
  gateway.addUpgrade({ path: '/ws/tools', auth: 'token', handle: (_q, socket) => socket.end('HTTP/1.1 101 Switching Protocols\r\n\r\n') });
  gateway.setFallback(createConsole(fakeConsoleDeps(token, { log, tokenGuard })));
  started.push(gateway);
  const { port } = await gateway.start();
  return { base: `http://127.0.0.1:${port}`, port, logged: () => lines.map((line) => JSON.parse(line) as Record<string, unknown>) };
}

const bearer = (value: string): Record<string, string> => ({ authorization: `Bearer ${value}` });

/** The status line of an upgrade request to /ws/tools. */
function upgrade(port: number, value: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port, path: '/ws/tools', headers: { ...bearer(value), connection: 'Upgrade', upgrade: 'websocket' } });
    req.on('upgrade', (response, socket) => {
      socket.destroy();
      resolve(response.statusCode ?? 0);
    });
    req.on('response', (response) => {
      response.resume();
      resolve(response.statusCode ?? 0);
    });
    req.on('error', reject);
    req.end();
  });
}

describe('one token limit for the gateway and the console', () => {
  it('counts and logs wrong bearer tokens on /metrics and the tool socket, and refuses even the right one during the lockout', async () => {
    const site = await start();
    const statuses: number[] = [];
    for (let n = 0; n < 4; n++) statuses.push((await fetch(`${site.base}/metrics`, { headers: bearer(`guess-${n}`) })).status);
    statuses.push(await upgrade(site.port, 'guess-4'));
    assert.deepEqual(statuses, [401, 401, 401, 401, 401]);
    const locked = await fetch(`${site.base}/metrics`, { headers: bearer(token) });
    assert.equal(locked.status, 429, 'the right token waits out the lockout too');
    assert.ok(Number(locked.headers.get('retry-after')) > 0);
    assert.equal(await upgrade(site.port, token), 429);
    const wrong = site.logged().filter((line) => line.msg === 'wrong token presented');
    assert.equal(wrong.length, 5, 'each wrong token logged once');
    assert.deepEqual([...new Set(wrong.map((line) => line.via))], ['bearer']);
    assert.ok(!JSON.stringify(site.logged()).includes('guess-'), 'a guessed token is never logged');
  });

  it('a lockout earned on the gateway holds at the console sign-in, and one earned there holds on the gateway', async () => {
    const site = await start();
    for (let n = 0; n < 5; n++) await fetch(`${site.base}/api/status`, { headers: bearer(`guess-${n}`) });
    const signIn = await fetch(`${site.base}/api/console/session`, { method: 'POST', headers: { 'content-type': 'application/json', origin: site.base }, body: JSON.stringify({ token, name: 'ada' }) });
    assert.equal(signIn.status, 429);

    const other = await start();
    for (let n = 0; n < 5; n++) {
      const response = await fetch(`${other.base}/api/console/session`, { method: 'POST', headers: { 'content-type': 'application/json', origin: other.base }, body: JSON.stringify({ token: `guess-${n}`, name: 'ada' }) });
      assert.equal(response.status, 401);
    }
    assert.equal((await fetch(`${other.base}/api/status`, { headers: bearer(token) })).status, 429);
  });
});
