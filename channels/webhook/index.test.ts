import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, request as httpRequest, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import pino from 'pino';
import { SendError } from '../../src/channel.ts';
import { createGateway } from '../../src/gateway/server.ts';
import { postCallback } from './callback.ts';
import { callbackProblem, parseWebhookRequest } from './request.ts';
import { ResultStore } from './results.ts';
import { checkSignatureHeader, sign, signLegacy, verify } from './signature.ts';
import { Waiters } from './waiters.ts';
import { sqliteFile, testChannelState } from '../../test/support/channel-state.ts';
import { channelState, type ChannelState } from '../../src/store/channel-state.ts';

const log = pino({ level: 'silent' });
const dirs: string[] = [];
const tempDir = (): string => {
  const dir = mkdtempSync(join(tmpdir(), 'sb-webhook-'));
  dirs.push(dir);
  return dir;
};
after(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

describe('signature', () => {
  const body = Buffer.from('{"a":1}');
  const request = { key: 'order-1', body };
  it('accepts its own signature, in either hex case', () => {
    assert.ok(verify('s3cret', request, sign('s3cret', request)));
    assert.ok(verify('s3cret', request, sign('s3cret', request).replace(/v1=(\w+)/, (_m, hex: string) => `v1=${hex.toUpperCase()}`)));
  });
  it('refuses a wrong secret, a changed body or key, a malformed or missing header (tampering)', () => {
    assert.equal(verify('s3cret', request, sign('other', request)), false);
    assert.equal(verify('s3cret', { ...request, body: Buffer.from('{"a":2}') }, sign('s3cret', request)), false);
    assert.equal(verify('s3cret', { ...request, key: 'order-2' }, sign('s3cret', request)), false);
    assert.equal(verify('s3cret', request, sign('s3cret', request).slice(0, -2)), false);
    assert.equal(verify('s3cret', request, sign('s3cret', request).replace('v1=', 'v0=')), false);
    assert.equal(verify('s3cret', request, sign('s3cret', request).replace(/^t=\d+/, `t=${Math.floor(Date.now() / 1000) - 1}`)), false, 'a changed time');
    assert.equal(verify('s3cret', request, undefined), false);
    assert.equal(verify('s3cret', request, [sign('s3cret', request)]), false);
  });
  it('refuses a time more than 300 s off, and the body-only form unless legacy', () => {
    const now = Date.now();
    const at = (seconds: number): string => sign('s3cret', { ...request, timestamp: Math.floor(now / 1000) + seconds });
    assert.equal(verify('s3cret', request, at(-299), { now }), true);
    assert.equal(verify('s3cret', request, at(-301), { now }), false);
    assert.equal(verify('s3cret', request, at(301), { now }), false);
    assert.match((checkSignatureHeader(at(-301), { now }) as { error: string }).error, /is 301 s in the past; at most 300 s/);
    assert.equal(verify('s3cret', request, signLegacy('s3cret', body)), false);
    assert.equal(verify('s3cret', request, signLegacy('s3cret', body), { legacy: true }), true);
    assert.equal(verify('s3cret', request, signLegacy('s3cret', '{}'), { legacy: true }), false);
  });
  it('compares in constant time: every digest compared has the same length, whatever the header', () => {
    // A short or long hex is refused by its form before any compare; a right-length wrong one
    // goes through secretsEqual (both sides hashed), so timing says nothing about the prefix.
    const right = sign('s3cret', request);
    assert.equal(verify('s3cret', request, right.replace(/.$/, (c) => (c === '0' ? '1' : '0'))), false);
    assert.equal(verify('s3cret', request, `${right}00`), false);
  });
  it('matches a reference HMAC (the documented string)', () => {
    // printf '%s' '1700000000.order-1.{"a":1}' | openssl dgst -sha256 -hmac key
    assert.equal(sign('key', { key: 'order-1', body: '{"a":1}', timestamp: 1_700_000_000 }), 't=1700000000,v1=2891dddcad9dfc777faef17a10bcb76f36fc7ad142da15dedf92b0c4461ed53b');
    // printf '%s' 'hello' | openssl dgst -sha256 -hmac key
    assert.equal(signLegacy('key', 'hello'), 'sha256=9307b3b915efb5171ff14d8cb55fbcc798c6c0ef1456d66ded1a6aa723a58b7b');
  });
});

describe('parseWebhookRequest', () => {
  const json = (value: unknown): Buffer => Buffer.from(JSON.stringify(value));
  const ok = { sender: 'crm', conversation: 'ticket-1', text: 'hi' };
  it('takes a good request', () => {
    const parsed = parseWebhookRequest({ 'idempotency-key': 'k1' }, json({ ...ok, callback_url: 'http://127.0.0.1:9/cb' }));
    assert.deepEqual(parsed, { ok: true, request: { id: 'k1', sender: 'crm', conversation: 'ticket-1', text: 'hi', callbackUrl: 'http://127.0.0.1:9/cb' } });
  });
  it('refuses a missing, long or odd Idempotency-Key', () => {
    for (const key of [undefined, '', 'x'.repeat(201), ' lead', 'tab\there', 'é']) {
      const parsed = parseWebhookRequest(key === undefined ? {} : { 'idempotency-key': key }, json(ok));
      assert.equal(parsed.ok, false, String(key));
    }
    assert.equal(parseWebhookRequest({ 'idempotency-key': 'x'.repeat(200) }, json(ok)).ok, true);
  });
  it('refuses bad JSON and missing or empty fields', () => {
    const h = { 'idempotency-key': 'k' };
    for (const body of [Buffer.from('{'), json([1]), json(null), json({ ...ok, text: '' }), json({ ...ok, sender: 3 }), json({ conversation: 'c', text: 't' }), json({ ...ok, conversation: 'c'.repeat(201) })]) {
      const parsed = parseWebhookRequest(h, body);
      assert.equal(parsed.ok, false);
      if (!parsed.ok) assert.equal(parsed.status, 400);
    }
  });
  it('allows only http(s) callbacks without credentials (loopback allowed)', () => {
    assert.equal(callbackProblem('https://example.com/cb'), undefined);
    assert.equal(callbackProblem('http://127.0.0.1:8080/cb'), undefined);
    assert.match(callbackProblem('file:///etc/passwd')!, /http or https/);
    assert.match(callbackProblem('gopher://x')!, /http or https/);
    assert.match(callbackProblem('http://user:pw@example.com/')!, /credentials/);
    assert.match(callbackProblem('not a url')!, /not a URL/);
  });
});

describe('ResultStore', () => {
  it('remembers requests and replies across a reopen', async () => {
    const state = testChannelState('hook');
    const store = new ResultStore({ state, log });
    await store.addRequest({ id: 'a', conversation: 'c', hash: 'h', callbackUrl: 'http://x/', at: Date.now() });
    assert.equal(await store.addReply('a', 'first reply'), true);
    assert.equal(await store.addReply('missing', 'x'), false);
    const again = new ResultStore({ state, log });
    await again.load();
    assert.deepEqual(await again.get('a'), { id: 'a', conversation: 'c', hash: 'h', callbackUrl: 'http://x/', at: (await again.get('a'))!.at, reply: 'first reply' });
  });
  it('forgets beyond maxEntries and maxAgeMs, and keeps the store bounded', async () => {
    let now = 1_000_000;
    const state = testChannelState('hook', () => now);
    const store = new ResultStore({ state, log, maxEntries: 50, maxAgeMs: 10_000, now: () => now });
    for (let i = 0; i < 500; i++) {
      await store.addRequest({ id: `k${i}`, conversation: 'c', at: now });
      await store.addReply(`k${i}`, 'r');
    }
    assert.equal((await store.stats()).size, 50);
    assert.equal(await store.get('k449'), undefined);
    assert.ok(await store.get('k450'));
    now += 20_000;
    await store.addRequest({ id: 'fresh', conversation: 'c', at: now });
    assert.equal((await store.stats()).size, 1);
    const reopened = new ResultStore({ state, log, maxEntries: 50, maxAgeMs: 10_000, now: () => now });
    await reopened.load();
    assert.deepEqual([(await reopened.get('fresh'))?.id, (await reopened.stats()).size], ['fresh', 1]);
  });
  it('forgets the oldest beyond maxBytes, keeping the newest record, and stays bounded over many requests', async () => {
    const state = testChannelState('hook');
    const store = new ResultStore({ state, log, maxBytes: 10_000 });
    const reply = 'x'.repeat(900);
    for (let i = 0; i < 1000; i++) {
      await store.addRequest({ id: `k${i}`, conversation: 'c', at: Date.now() });
      await store.addReply(`k${i}`, reply);
      assert.ok((await store.stats()).bytes <= 10_000 + 1000, `${(await store.stats()).bytes} bytes after ${i + 1} requests`);
    }
    const { size } = await store.stats();
    assert.ok(size >= 9 && size <= 11, `${size} kept`);
    assert.equal((await store.get('k999'))?.reply, reply);
    assert.equal(await store.get('k0'), undefined);
    const huge = 'y'.repeat(20_000);
    await store.addRequest({ id: 'huge', conversation: 'c', at: Date.now() });
    await store.addReply('huge', huge);
    await store.addUnsolicited('c', 'a reminder');
    assert.equal((await store.stats()).size, 1, 'the newest alone is kept once another came');
  });
  it('keeps unsolicited messages apart from request ids', async () => {
    const store = new ResultStore({ state: testChannelState('hook'), log });
    const id = await store.addUnsolicited('c', 'reminder');
    assert.match(id, /^ ~/);
    assert.equal((await store.get(id))?.unsolicited, true);
  });
  it('refuses bad limits', () => {
    assert.throws(() => new ResultStore({ state: testChannelState('hook'), log, maxEntries: 0 }), TypeError);
    assert.throws(() => new ResultStore({ state: testChannelState('hook'), log, maxBytes: 0 }), /maxBytes/);
  });
  it('imports results.jsonl of an earlier version once (torn and unknown lines skipped, last line winning), and renames it', async () => {
    const dir = tempDir();
    const now = Date.now();
    writeFileSync(
      join(dir, 'results.jsonl'),
      `{"nope":1}\n{"id":"z","conversation":"c","at":${now}}\n{"id":"y","conversation":"c","at":1}\n{"id":"z","conversation":"c","at":${now},"reply":"done"}\n{"id":"b","conv`,
    );
    const state = testChannelState('hook');
    const store = new ResultStore({ state, log, legacyDir: dir });
    await store.load();
    assert.equal((await store.get('z'))?.reply, 'done');
    assert.equal(await store.get('y'), undefined, 'expired long ago: not imported');
    assert.equal(existsSync(join(dir, 'results.jsonl')), false);
    assert.equal(existsSync(join(dir, 'results.jsonl.imported')), true);
  });
  it('a new owner on another node answers a replay from what the last owner stored', async () => {
    const path = join(tempDir(), 'switchboard.db');
    const [nodeA, nodeB] = [sqliteFile(path), sqliteFile(path)];
    try {
      const owner = new ResultStore({ state: channelState(nodeA, 'hook'), log });
      await owner.addRequest({ id: 'k1', conversation: 'c', hash: 'h', at: Date.now() });
      await owner.addReply('k1', 'the first answer');
      const next = new ResultStore({ state: channelState(nodeB, 'hook'), log });
      await next.load();
      assert.equal((await next.get('k1'))?.reply, 'the first answer');
    } finally {
      await Promise.all([nodeA.close(), nodeB.close()]);
    }
  });
});

describe('Waiters', () => {
  it('hands one reply to every waiter of an id, once', async () => {
    const waiters = new Waiters();
    const a = waiters.wait('x', 10_000);
    const b = waiters.wait('x', 10_000);
    assert.equal(waiters.deliver('x', 'hi'), 2);
    assert.deepEqual(await Promise.all([a.reply, b.reply]), ['hi', 'hi']);
    assert.equal(waiters.deliver('x', 'again'), 0);
    assert.equal(waiters.size, 0);
  });
  it('times out, cancels and releases without a reply', async () => {
    const waiters = new Waiters();
    assert.equal(await waiters.wait('t', 10).reply, undefined);
    const c = waiters.wait('c', 10_000);
    c.cancel();
    assert.equal(await c.reply, undefined);
    assert.equal(waiters.deliver('c', 'late'), 0);
    const r = waiters.wait('r', 10_000);
    waiters.releaseAll();
    assert.equal(await r.reply, undefined);
  });
});

describe('postCallback', () => {
  async function receiver(statuses: number[], headers: Record<string, string> = {}) {
    const got: Array<{ headers: IncomingMessage['headers']; body: string }> = [];
    const server = createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        got.push({ headers: req.headers, body });
        res.writeHead(statuses.shift() ?? 200, headers).end('ok');
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/cb?token=t`;
    return { got, url, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
  }
  const payload = { id: 'k1', conversation: 'c', reply: 'hello' };

  it('POSTs the signed JSON with the id as Idempotency-Key', async () => {
    const r = await receiver([204, 204]);
    await postCallback(r.url, payload, { secret: 's' });
    assert.deepEqual(JSON.parse(r.got[0]!.body), payload);
    assert.ok(verify('s', { key: 'k1', body: Buffer.from(r.got[0]!.body) }, r.got[0]!.headers['x-switchboard-signature']));
    await postCallback(r.url, payload, { secret: 's', legacySignature: true });
    assert.ok(verify('s', { key: 'k1', body: Buffer.from(r.got[1]!.body) }, r.got[1]!.headers['x-switchboard-signature'], { legacy: true }));
    assert.match(String(r.got[1]!.headers['x-switchboard-signature']), /^sha256=/, 'legacy_signature: the old form, for receivers not migrated');
    assert.equal(r.got[0]!.headers['idempotency-key'], 'k1');
    await r.close();
  });
  it('maps 4xx to permanent, 5xx / 429 / network to retryable, and never follows redirects', async () => {
    const r = await receiver([400, 500, 429, 302], { 'retry-after': '3', location: 'http://169.254.169.254/' });
    const fail = async (): Promise<SendError> => {
      try {
        await postCallback(r.url, payload, { secret: 's' });
      } catch (error) {
        assert.ok(error instanceof SendError);
        assert.doesNotMatch(error.message, /token=t/); // the query may hold a secret
        return error;
      }
      assert.fail('expected a SendError');
    };
    assert.equal((await fail()).permanent, true);
    assert.equal((await fail()).permanent, false);
    const limited = await fail();
    assert.deepEqual([limited.permanent, limited.retryAfterMs], [false, 3000]);
    assert.equal((await fail()).permanent, true);
    assert.equal(r.got.length, 4);
    await r.close();
    const network = await postCallback(r.url, payload, { secret: 's' }).catch((error: unknown) => error);
    assert.ok(network instanceof SendError && !network.permanent);
  });
});

/** The channel against a real gateway, with a fake runtime push. */
describe('createWebhookChannel', () => {
  const retention = { max_results: 10_000, result_retention_days: 7, max_results_mb: 16 };

  it('needs a gateway', async () => {
    const { createWebhookChannel } = await import('./index.ts');
    const ctx = { name: 'webhook', log, assistantName: 'Bot', attachments: { maxBytes: 0, save: () => Promise.reject(new Error('no')) }, state: testChannelState(), stateDir: tempDir() };
    assert.throws(() => createWebhookChannel({ secret: 's', reply_timeout_seconds: 1, allow: ['*'], legacy_signature: false, max_body_kb: 64, ...retention }, ctx), /\[channels\.webhook\] needs \[gateway\]/);
  });

  it('answers with the reply, refuses bad signatures before the runtime, replays, and times out to 202', async () => {
    const { createWebhookChannel } = await import('./index.ts');
    const gateway = createGateway({ listen: '127.0.0.1:0', log, health: () => ({ channels: [], queued: 0, inFlight: 0, pendingReplies: 0, counters: { received: 0, duplicates: 0, answered: 0, failed: 0, ignored: 0, sent: 0 } }) });
    const ctx = { name: 'hook', log, assistantName: 'Bot', attachments: { maxBytes: 0, save: () => Promise.reject(new Error('no')) }, state: testChannelState(), stateDir: tempDir(), gateway };
    const channel = createWebhookChannel({ secret: 'sec', reply_timeout_seconds: 0.3, allow: ['*'], legacy_signature: false, max_body_kb: 64, ...retention }, ctx);
    const { port } = await gateway.start();
    const pushed: Array<{ id: string; chat: string; account: string; sender: { id: string }; direct?: boolean }> = [];
    const seen = new Set<string>();
    let answer = true;
    const controller = new AbortController();
    let isReady!: () => void;
    const ready = new Promise<void>((resolve) => (isReady = resolve));
    const listening = channel.listen(
      async (message) => {
        pushed.push(message);
        if (seen.has(message.id)) return 'duplicate';
        seen.add(message.id);
        if (answer) setTimeout(() => void channel.send({ channel: 'hook', account: 'webhook', chat: message.chat, text: `re: ${message.text}`, replyTo: message.id }), 20);
        return 'accepted';
      },
      controller.signal,
      { ready: () => isReady(), alive: () => undefined, deaf: () => undefined },
    );
    // The route answers 503 "not running" until listen has loaded the store and taken `push`.
    await ready;
    const post = (body: string, headers: Record<string, string>): Promise<{ status: number; json: Record<string, unknown> }> =>
      new Promise((resolve, reject) => {
        const req = httpRequest({ host: '127.0.0.1', port, path: '/webhook', method: 'POST', headers: { 'content-type': 'application/json', ...headers } }, (res) => {
          let text = '';
          res.on('data', (c: Buffer) => (text += c.toString()));
          res.on('end', () => resolve({ status: res.statusCode!, json: JSON.parse(text) as Record<string, unknown> }));
        });
        req.on('error', reject);
        req.end(body);
      });
    const body = JSON.stringify({ sender: 'crm', conversation: 'T-1', text: 'hello' });

    assert.equal((await post(body, { 'idempotency-key': 'k1' })).status, 401);
    assert.equal((await post(body, { 'idempotency-key': 'k1', 'x-switchboard-signature': sign('wrong', { key: 'k1', body: body }) })).status, 401);
    assert.equal(pushed.length, 0);
    assert.equal((await post('{', { 'idempotency-key': 'k1', 'x-switchboard-signature': sign('sec', { key: 'k1', body: '{' }) })).status, 400);
    assert.equal((await post(body, { 'x-switchboard-signature': sign('sec', { key: '', body }) })).status, 400);

    const first = await post(body, { 'idempotency-key': 'k1', 'x-switchboard-signature': sign('sec', { key: 'k1', body: body }) });
    assert.deepEqual([first.status, first.json], [200, { id: 'k1', reply: 're: hello' }]);
    assert.deepEqual({ ...pushed[0], timestamp: 0, text: '' }, { channel: 'hook', account: 'webhook', chat: 'T-1', id: 'k1', sender: { id: 'crm' }, text: '', timestamp: 0, direct: true });
    const replay = await post(body, { 'idempotency-key': 'k1', 'x-switchboard-signature': sign('sec', { key: 'k1', body: body }) });
    assert.deepEqual([replay.status, replay.json], [200, { id: 'k1', reply: 're: hello' }]);
    assert.equal(pushed.length, 1, 'a finished key is answered without the runtime');
    const other = JSON.stringify({ sender: 'crm', conversation: 'T-1', text: 'something else' });
    assert.equal((await post(other, { 'idempotency-key': 'k1', 'x-switchboard-signature': sign('sec', { key: 'k1', body: other }) })).status, 422);

    answer = false;
    const slow = await post(other, { 'idempotency-key': 'k2', 'x-switchboard-signature': sign('sec', { key: 'k2', body: other }) });
    assert.deepEqual([slow.status, slow.json], [202, { status: 'accepted', id: 'k2' }]);
    // The reply comes later, with no one waiting and no callback: kept for a replay.
    await channel.send({ channel: 'hook', account: 'webhook', chat: 'T-1', text: 'late', replyTo: 'k2' });
    const late = await post(other, { 'idempotency-key': 'k2', 'x-switchboard-signature': sign('sec', { key: 'k2', body: other }) });
    assert.deepEqual([late.status, late.json], [200, { id: 'k2', reply: 'late' }]);
    // Nothing asked for this one: kept, no error.
    await channel.send({ channel: 'hook', account: 'webhook', chat: 'T-1', text: 'reminder' });

    controller.abort();
    await listening;
    assert.equal((await post(body.replace('hello', 'x'), { 'idempotency-key': 'k3', 'x-switchboard-signature': sign('sec', { key: 'k3', body: body.replace('hello', 'x') }) })).status, 503);
    await gateway.stop(100);
  });
  it('answers 503 + Retry-After, pushing nothing, when the result cannot be stored (a full disk)', async () => {
    const { createWebhookChannel } = await import('./index.ts');
    const gateway = createGateway({ listen: '127.0.0.1:0', log, health: () => ({ channels: [], queued: 0, inFlight: 0, pendingReplies: 0, counters: { received: 0, duplicates: 0, answered: 0, failed: 0, ignored: 0, sent: 0 } }) });
    const reported: string[] = [];
    const storage = {
      failed: (error: unknown, what: string) => {
        reported.push(`${(error as { code?: string }).code}: ${what}`);
        return error instanceof Error ? error : undefined;
      },
    };
    // The database's disk is full while `full` is set: every write fails as SQLite's would.
    let full = true;
    const real = testChannelState('hook');
    const state: ChannelState = {
      ...real,
      put: async (key, value, options) => {
        if (full) throw Object.assign(new Error('database or disk is full'), { code: 'SQLITE_FULL' });
        return real.put(key, value, options);
      },
    };
    const ctx = { name: 'hook', log, assistantName: 'Bot', attachments: { maxBytes: 0, save: () => Promise.reject(new Error('no')) }, state, stateDir: tempDir(), gateway, storage };
    const channel = createWebhookChannel({ secret: 'sec', reply_timeout_seconds: 0.3, allow: ['*'], legacy_signature: false, max_body_kb: 64, ...retention }, ctx);
    const { port } = await gateway.start();
    const pushed: string[] = [];
    const controller = new AbortController();
    let isReady!: () => void;
    const ready = new Promise<void>((resolve) => (isReady = resolve));
    const listening = channel.listen(
      async (message) => {
        pushed.push(message.id);
        setTimeout(() => void channel.send({ channel: 'hook', account: 'webhook', chat: message.chat, text: `re: ${message.text}`, replyTo: message.id }), 10);
        return 'accepted';
      },
      controller.signal,
      { ready: () => isReady(), alive: () => undefined, deaf: () => undefined },
    );
    // The route answers 503 "not running" until listen has loaded the store and taken `push`.
    await ready;
    const body = JSON.stringify({ sender: 'crm', conversation: 'T-1', text: 'hello' });
    const post = async (): Promise<Response> =>
      fetch(`http://127.0.0.1:${port}/webhook`, { method: 'POST', headers: { 'content-type': 'application/json', 'idempotency-key': 'k1', 'x-switchboard-signature': sign('sec', { key: 'k1', body: body }) }, body });
    const refused = await post();
    assert.equal(refused.status, 503);
    assert.equal(refused.headers.get('retry-after'), '10');
    assert.match(((await refused.json()) as { error: string }).error, /disk .* is full/);
    assert.deepEqual(pushed, [], 'nothing reached the runtime');
    assert.deepEqual(reported, ['SQLITE_FULL: record webhook request k1']);
    // Space again: the same request goes through.
    full = false;
    const accepted = await post();
    assert.deepEqual([accepted.status, await accepted.json()], [200, { id: 'k1', reply: 're: hello' }]);
    assert.deepEqual(pushed, ['k1']);
    controller.abort();
    await listening;
    await gateway.stop(100);
  });
});
