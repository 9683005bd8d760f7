import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import pino from 'pino';
import type { ChannelHealth } from '../src/runtime/supervisor.ts';
import { announceReady } from './ready.ts';

/** A runtime whose channels' health the test sets, and the JSON lines logged. */
function harness(channels: ChannelHealth[]) {
  const lines: Array<Record<string, unknown>> = [];
  const log = pino({ level: 'info' }, new Writable({ write: (chunk: Buffer, _encoding, done) => (lines.push(JSON.parse(chunk.toString('utf8')) as Record<string, unknown>), done()) }));
  let resolveReady!: () => void;
  const runtime = { ready: new Promise<void>((resolve) => (resolveReady = resolve)), health: () => ({ channels }) };
  return { lines, log, runtime, resolveReady, ready: () => lines.filter((line) => line.msg === 'ready') };
}

const channel = (name: string, state: ChannelHealth['state'], lastError?: string): ChannelHealth => ({ name, state, restarts: lastError ? 1 : 0, since: 0, ...(lastError ? { lastError } : {}) });
const wait = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

test('every channel running: one ready line at info', async () => {
  const h = harness([channel('telegram', 'running')]);
  announceReady({ runtime: h.runtime, log: h.log, signal: new AbortController().signal, fields: () => ({ channels: ['telegram'] }), pollMs: 5 });
  h.resolveReady();
  await wait(30);
  assert.equal(h.ready().length, 1);
  assert.equal(h.ready()[0]!.level, 30);
  assert.deepEqual(h.ready()[0]!.channels, ['telegram']);
  assert.equal(h.ready()[0]!.notRunning, undefined);
});

test('a channel that keeps failing: ready at warn once it has failed, naming it; "all channels running" when it is back', async () => {
  const channels = [channel('telegram', 'running'), channel('irc', 'starting')];
  const h = harness(channels);
  announceReady({ runtime: h.runtime, log: h.log, signal: new AbortController().signal, fields: () => ({ channels: ['telegram', 'irc'] }), pollMs: 5 });
  await wait(30);
  assert.equal(h.ready().length, 0, 'irc has not had its first attempt yet');
  channels[1] = channel('irc', 'backoff', 'connect ECONNREFUSED 127.0.0.1:6667');
  await wait(30);
  assert.equal(h.ready().length, 1);
  const line = h.ready()[0]!;
  assert.equal(line.level, 40);
  assert.deepEqual(line.notRunning, [{ name: 'irc', state: 'backoff', lastError: 'connect ECONNREFUSED 127.0.0.1:6667' }]);
  h.resolveReady();
  await wait(10);
  assert.equal(h.lines.at(-1)!.msg, 'all channels running');
  assert.equal(h.ready().length, 1, 'ready is logged once');
});

test('a first connection that hangs: ready after the settle time, naming it', async () => {
  const h = harness([channel('matrix', 'starting')]);
  announceReady({ runtime: h.runtime, log: h.log, signal: new AbortController().signal, fields: () => ({}), settleMs: 40, pollMs: 5 });
  await wait(15);
  assert.equal(h.ready().length, 0);
  await wait(60);
  assert.deepEqual(h.ready()[0]!.notRunning, [{ name: 'matrix', state: 'starting' }]);
});

test('stopped during start: nothing is logged', async () => {
  const h = harness([channel('irc', 'starting')]);
  const stopping = new AbortController();
  announceReady({ runtime: h.runtime, log: h.log, signal: stopping.signal, fields: () => ({}), settleMs: 20, pollMs: 5 });
  stopping.abort();
  await wait(50);
  h.resolveReady();
  await wait(5);
  assert.equal(h.lines.length, 0);
});

test('onReady runs once, after the ready line, whether ready is logged at info or at warn', async () => {
  for (const channels of [[channel('telegram', 'running')], [channel('irc', 'backoff', 'connect ECONNREFUSED 127.0.0.1:6667')]]) {
    const h = harness(channels);
    const seen: number[] = [];
    announceReady({ runtime: h.runtime, log: h.log, signal: new AbortController().signal, fields: () => ({}), pollMs: 5, onReady: () => seen.push(h.ready().length) });
    h.resolveReady();
    await wait(30);
    assert.deepEqual(seen, [1], 'called once, with the ready line already logged');
  }
});

test('stopped during start: onReady is not called', async () => {
  const h = harness([channel('irc', 'starting')]);
  const stopping = new AbortController();
  let called = false;
  announceReady({ runtime: h.runtime, log: h.log, signal: stopping.signal, fields: () => ({}), pollMs: 5, onReady: () => (called = true) });
  stopping.abort();
  h.resolveReady();
  await wait(30);
  assert.equal(called, false);
});
