import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { testLogger } from '../test/support/log.ts';
import { createGateway, type Gateway } from '../src/gateway/server.ts';
import type { RuntimeHealth } from '../src/runtime/runtime.ts';
import { readFileSync } from 'node:fs';
import { count, formatStatus, runStatus, statusUrl, type StatusDeps } from './status-cli.ts';
import { freePort } from '../test/support/net.ts';

const token = 'status-test-token-0123456789';
const now = Date.now();
const health: RuntimeHealth = {
  channels: [
    { name: 'telegram', state: 'running', restarts: 0, since: now - 3_600_000, lastInboundAt: now - 120_000 },
    { name: 'irc', state: 'backoff', restarts: 3, since: now - 10_000, lastError: 'connect ECONNREFUSED 127.0.0.1:6667', lastErrorAt: now - 12_000, notes: ['nick taken; using switchboard_'] },
  ],
  queued: 2,
  inFlight: 1,
  pendingReplies: 0,
  counters: { received: 120, duplicates: 2, answered: 118, failed: 1, ignored: 4, sent: 119 },
};

async function run(args: string[], gateway: StatusDeps['gateway']): Promise<{ code: number; out: string; err: string }> {
  const out = new PassThrough();
  const err = new PassThrough();
  let o = '';
  let e = '';
  out.on('data', (chunk: Buffer) => (o += chunk.toString()));
  err.on('data', (chunk: Buffer) => (e += chunk.toString()));
  const code = await runStatus(args, { gateway, out, err, timeoutMs: 5000 });
  return { code, out: o, err: e };
}


describe('switchboard status', () => {
  let gateway: Gateway;
  let listen: string;
  before(async () => {
    gateway = createGateway({ listen: '127.0.0.1:0', token, log: testLogger(), health: () => health, version: '0.1.0', startedAt: now - 7_200_000 });
    const { port } = await gateway.start();
    listen = `127.0.0.1:${port}`;
  });
  after(() => gateway.stop(100));

  it('prints a readable summary from the running daemon', async () => {
    const { code, out, err } = await run([], { listen, token });
    assert.equal(err, '');
    assert.equal(code, 0);
    assert.match(out, /^Switchboard 0\.1\.0 · pid \d+ · up 2h 0m/);
    assert.match(out, /✓ telegram\s+running\s+for 1h 0m\s+· restarts 0 · last inbound 2m ago/);
    assert.match(out, /✗ irc\s+backoff .*restarts 3 · last inbound never/);
    assert.match(out, /last error 1[0-9]s ago: connect ECONNREFUSED/);
    assert.match(out, /note: nick taken/);
    assert.match(out, /Work: 2 queued · 1 in flight · 0 replies waiting/);
    assert.match(out, /Since start: 120 received · 118 answered · 1 failed · 4 ignored · 2 duplicates · 119 sent/);
  });

  it('counts in words that agree with the number, and the sample in docs/operating.md is what it prints', () => {
    assert.deepEqual([count(1, 'turn'), count(2, 'turn'), count(0, 'reply', 'replies'), count(1, 'reply', 'replies')], ['1 turn', '2 turns', '0 replies', '1 reply']);
    const at = Date.parse('2026-11-26T12:00:00.000Z');
    const iso = (ago: number): string => new Date(at - ago).toISOString();
    const report = {
      version: '0.1.0', pid: 4121, startedAt: iso(7_200_000), uptimeSeconds: 7200,
      channels: [
        { name: 'telegram', state: 'running', since: iso(3_600_000), restarts: 0, lastInboundAt: iso(120_000) },
        { name: 'irc', state: 'backoff', since: iso(10_000), restarts: 3, lastError: 'connect ECONNREFUSED 127.0.0.1:6667', lastErrorAt: iso(12_000) },
      ],
      queued: 2, inFlight: 1, pendingReplies: 1,
      totals: { received: 120, duplicates: 1, answered: 118, failed: 1, ignored: 4, sent: 119 },
      cluster: { node: 'a', nodes: [{ node: 'a', alive: true, channels: ['telegram'], inFlight: 1, turns: 1, seenAt: at, version: '0.1.0' }] },
    };
    const printed = formatStatus(report, at);
    assert.match(printed, /· 1 turn · 0\.1\.0\n/);
    assert.match(printed, /· 1 reply waiting to be sent\n/);
    assert.match(printed, /· 1 duplicate ·/);
    const page = readFileSync(new URL('../docs/operating.md', import.meta.url), 'utf8');
    const sample = /`switchboard status \[--json\]` reads[\s\S]*?```\n([\s\S]*?)```/.exec(page)![1]!;
    assert.equal(sample, formatStatus({ ...report, cluster: undefined, pendingReplies: 0, totals: { ...report.totals, duplicates: 2 } }, at));
  });

  it('prints the JSON with --json', async () => {
    const { code, out } = await run(['--json'], { listen, token });
    assert.equal(code, 0);
    const report = JSON.parse(out) as { channels: Array<{ name: string; restarts: number; lastError?: string }>; totals: { answered: number }; uptimeSeconds: number };
    assert.deepEqual(report.channels.map((c) => [c.name, c.restarts]), [['telegram', 0], ['irc', 3]]);
    assert.equal(report.totals.answered, 118);
    assert.ok(report.uptimeSeconds >= 7200);
  });

  it('fails clearly on a wrong or unset token', async () => {
    const wrong = await run([], { listen, token: 'not-the-token-at-all' });
    assert.equal(wrong.code, 1);
    assert.match(wrong.err, /refused the token \(401\)/);
    const unset = await run([], { listen, token: '${SWITCHBOARD_TOKEN}' });
    assert.equal(unset.code, 1);
    assert.match(unset.err, /export SWITCHBOARD_TOKEN/);
  });

  it('fails clearly when the daemon is not running or the gateway is not configured', async () => {
    const down = await run([], { listen: `127.0.0.1:${await freePort()}` });
    assert.equal(down.code, 1);
    assert.match(down.err, /cannot reach the daemon at http:\/\/127\.0\.0\.1:\d+\/api\/status \(ECONNREFUSED\)\. Is it running\?/);
    const none = await run([], undefined);
    assert.equal(none.code, 78);
    assert.match(none.err, /gateway is not configured.*\n\s+\[gateway\]\n\s+listen = "127\.0\.0\.1:8787"/);
  });

  it('exits 2 on usage errors and asks a wildcard bind on loopback', async () => {
    assert.equal((await run(['--frob'], { listen })).code, 2);
    assert.equal((await run(['extra'], { listen })).code, 2);
    assert.equal(statusUrl('0.0.0.0:8787'), 'http://127.0.0.1:8787/api/status');
    assert.equal(statusUrl('[::]:8787'), 'http://[::1]:8787/api/status');
    assert.equal(statusUrl('[::1]:9'), 'http://[::1]:9/api/status');
  });
});
