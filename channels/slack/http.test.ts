import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { pino } from 'pino';
import { createBoltApp } from './app.ts';
import { eventsReceiver, fromTheFuture, serveEvents } from './http.ts';

const secret = 'shh';
const identity = { userId: 'U0BOT', botId: 'B0BOT', teamId: 'T1', names: ['testbot'] };

/** The Bolt App and HTTP receiver of the channel, with `onMessage` standing in for intake + push. */
function server(onMessage: (event: unknown) => Promise<void>): { url: () => string; alive: () => number; close: () => Promise<void> } {
  const lines: string[] = [];
  const log = pino({ level: 'info' }, { write: (line: string) => void lines.push(line) });
  const receiver = eventsReceiver(secret, log);
  createBoltApp({ botToken: 'xoxb-t', apiUrl: 'http://127.0.0.1:9/api/', receiver, log, identity: () => identity, onMessage });
  const abort = new AbortController();
  let alive = 0;
  const served = serveEvents(receiver, { listen: '127.0.0.1:0', log }, abort.signal, { ready: () => undefined, alive: () => void alive++, deaf: () => undefined });
  return {
    url: () => /"url":"([^"]+)"/.exec(lines.find((line) => line.includes('slack events listener')) ?? '')?.[1] ?? '',
    alive: () => alive,
    close: async () => {
      abort.abort();
      await served;
    },
  };
}

const nowSeconds = (): number => Math.floor(Date.now() / 1000);
const sign = (ts: string, raw: string, key = secret): string => `v0=${createHmac('sha256', key).update(`v0:${ts}:${raw}`).digest('hex')}`;
let counter = 0;
const eventBody = (text = 'hi'): string =>
  JSON.stringify({ type: 'event_callback', team_id: 'T1', api_app_id: 'A1', event_id: `Ev${++counter}`, event: { type: 'message', channel: 'D1', channel_type: 'im', user: 'U0ALICE', text, ts: `1700000000.00000${counter}` } });

async function post(url: string, raw: string, headers: Record<string, string | undefined> = {}): Promise<{ status: number; body: string }> {
  const ts = 'ts' in headers ? headers.ts : String(nowSeconds());
  const all: Record<string, string> = { 'content-type': headers.type ?? 'application/json' };
  if (ts !== undefined) all['x-slack-request-timestamp'] = ts;
  const signature = 'signature' in headers ? headers.signature : sign(ts ?? '', raw);
  if (signature !== undefined) all['x-slack-signature'] = signature;
  const response = await fetch(url, { method: 'POST', headers: all, body: raw, signal: AbortSignal.timeout(10_000) });
  return { status: response.status, body: await response.text() };
}

describe('slack HTTP events (Bolt HTTPReceiver, processBeforeResponse)', () => {
  const seen: unknown[] = [];
  let gate: Promise<void> | undefined;
  let refuse = false;
  let s: ReturnType<typeof server>;
  const consoleCalls: unknown[][] = [];
  const saved = { ...console };

  before(async () => {
    // Bolt falls back to console loggers wherever it is not given ours: nothing may reach the console.
    // eslint-disable-next-line no-console -- watching the console, not writing to it
    for (const method of ['log', 'info', 'warn', 'error', 'debug', 'trace'] as const) console[method] = (...args: unknown[]) => void consoleCalls.push(args);
    s = server(async (event) => {
      seen.push(event);
      await gate;
      if (refuse) throw new Error('Switchboard is shutting down; the message was not accepted');
    });
    while (s.url() === '') await new Promise((resolve) => setTimeout(resolve, 10));
  });
  after(async () => {
    await s.close();
    Object.assign(console, saved);
    assert.deepEqual(consoleCalls, [], 'nothing was written to the console');
  });

  it('answers 200 only once the listener resolved (the event is journaled)', async () => {
    let release!: () => void;
    gate = new Promise((resolve) => (release = resolve));
    let answered = false;
    const response = post(s.url(), eventBody('slow')).then((r) => ((answered = true), r));
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.equal(seen.length, 1, 'the listener has the event');
    assert.equal(answered, false, 'no answer while push is pending (Bolt acked the event before its listener ran)');
    release();
    assert.equal((await response).status, 200);
    gate = undefined;
  });

  it('answers 503 when the message could not be stored, so Slack retries', async () => {
    refuse = true;
    try {
      assert.equal((await post(s.url(), eventBody('refused'))).status, 503);
    } finally {
      refuse = false;
    }
  });

  it('takes a request signed with Bolt\'s check, refuses a wrong key, a changed body, a timestamp 5 minutes off either way, and junk', async () => {
    const before = seen.length;
    const raw = eventBody();
    const now = nowSeconds();
    assert.equal((await post(s.url(), raw)).status, 200);
    assert.equal((await post(s.url(), raw, { ts: String(now - 240), signature: sign(String(now - 240), raw) })).status, 200, '4 minutes old');
    assert.equal((await post(s.url(), raw, { signature: sign(String(now), raw, 'other') })).status, 401, 'wrong key');
    assert.equal((await post(s.url(), raw, { signature: sign(String(now), eventBody('changed')) })).status, 401, 'changed body');
    assert.equal((await post(s.url(), raw, { ts: String(now - 400), signature: sign(String(now - 400), raw) })).status, 401, 'older than 5 minutes');
    assert.equal((await post(s.url(), raw, { ts: String(now + 400), signature: sign(String(now + 400), raw) })).status, 401, 'from the future');
    assert.equal((await post(s.url(), raw, { ts: undefined })).status, 401, 'no timestamp');
    assert.equal((await post(s.url(), raw, { signature: undefined })).status, 401, 'no signature');
    assert.equal((await post(s.url(), raw, { signature: 'v0=short' })).status, 401);
    assert.equal((await post(s.url(), raw, { ts: 'nope', signature: sign('nope', raw) })).status, 401);
    assert.equal(seen.length, before + 2, 'only the two signed, recent requests reached the listener');
  });

  it('echoes url_verification; ignores slash commands; 404 / 405 / 400 for the rest', async () => {
    const before = seen.length;
    const challenge = await post(s.url(), JSON.stringify({ token: 'x', challenge: 'c-1', type: 'url_verification' }));
    assert.equal(challenge.status, 200);
    assert.deepEqual(JSON.parse(challenge.body), { challenge: 'c-1' });
    const started = performance.now();
    const command = await post(s.url(), 'command=%2Fnew&text=hi&team_id=T1&user_id=U0ALICE&channel_id=C1', { type: 'application/x-www-form-urlencoded' });
    assert.equal(command.status, 200);
    assert.ok(performance.now() - started < 2000, 'acknowledged at once, not left to Bolt\'s 3 s "unhandled request" timer');
    assert.equal((await post(s.url(), 'not json')).status, 400);
    assert.equal((await fetch(s.url())).status, 405);
    assert.equal((await fetch(s.url().replace('/slack/events', '/elsewhere'), { method: 'POST' })).status, 404);
    assert.equal(seen.length, before, 'none of these reached the listener');
    assert.ok(s.alive() > 0, 'signed requests count as life');
  });

  it('knows a timestamp from the future', () => {
    const now = 1_700_000_000_000;
    assert.equal(fromTheFuture('1700000000', now), false);
    assert.equal(fromTheFuture('1700000290', now), false);
    assert.equal(fromTheFuture('1700000400', now), true);
    assert.equal(fromTheFuture('1699990000', now), false, 'stale is Bolt\'s to refuse');
    assert.equal(fromTheFuture(undefined, now), false);
    assert.equal(fromTheFuture('nope', now), false);
  });
});
