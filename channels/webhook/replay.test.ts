/**
 * Replays of captured webhook requests (issue 23, point 4) and ids PostgreSQL cannot store
 * (point 9). Signatures are computed here with node:crypto, not with signature.ts, so the test
 * says what a sender sends whatever that module does.
 */
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import pino from 'pino';
import { createGateway } from '../../src/gateway/server.ts';
import { testChannelState } from '../../test/support/channel-state.ts';
import { createWebhookChannel } from './index.ts';
import { parseWebhookRequest } from './request.ts';

const secret = 'replay-secret';
const log = pino({ level: 'silent' });
const dirs: string[] = [];
after(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

const hmac = (payload: string): string => createHmac('sha256', secret).update(payload).digest('hex');
/** The documented form: t=<unix>,v1=<hex HMAC of "<t>.<key>.<body>">. */
const v1 = (key: string, body: string, t = Math.floor(Date.now() / 1000)): string => `t=${t},v1=${hmac(`${t}.${key}.${body}`)}`;
const legacy = (body: string): string => `sha256=${hmac(body)}`;

/** A webhook channel on a gateway, answering every message at once; `turns` counts what reached the runtime. */
async function start(config: Record<string, unknown> = {}, logger = log): Promise<{ post: (key: string, body: string, signature: string) => Promise<{ status: number; error?: string }>; turns: string[]; stop: () => Promise<void> }> {
  const dir = mkdtempSync(join(tmpdir(), 'sb-replay-'));
  dirs.push(dir);
  const gateway = createGateway({ listen: '127.0.0.1:0', log: logger, health: () => ({ channels: [], queued: 0, inFlight: 0, pendingReplies: 0, counters: { received: 0, duplicates: 0, answered: 0, failed: 0, ignored: 0, sent: 0 } }) });
  const ctx = { name: 'hook', log: logger, assistantName: 'Bot', attachments: { maxBytes: 0, save: () => Promise.reject(new Error('no')) }, state: testChannelState(), stateDir: dir, gateway };
  const channel = createWebhookChannel({ secret, reply_timeout_seconds: 2, allow: ['*'], max_results: 10_000, result_retention_days: 7, max_results_mb: 16, legacy_signature: false, max_body_kb: 64, ...config } as never, ctx);
  const { port } = await gateway.start();
  const turns: string[] = [];
  const controller = new AbortController();
  let markReady = (): void => undefined;
  const ready = new Promise<void>((resolve) => (markReady = resolve));
  const listening = channel.listen(
    async (message) => {
      if (turns.includes(message.id)) return 'duplicate';
      turns.push(message.id);
      setTimeout(() => void channel.send({ channel: 'hook', account: 'webhook', chat: message.chat, text: `re: ${message.text}`, replyTo: message.id }), 5);
      return 'accepted';
    },
    controller.signal,
    { ready: () => markReady(), alive: () => undefined, deaf: () => undefined },
  );
  // The route exists once listen says ready (it reads the channel's state first): a post before would be refused.
  await ready;
  return {
    turns,
    post: async (key, body, signature) => {
      const response = await fetch(`http://127.0.0.1:${port}/webhook`, { method: 'POST', headers: { 'content-type': 'application/json', 'idempotency-key': key, 'x-switchboard-signature': signature }, body });
      const json = (await response.json()) as { error?: string };
      return { status: response.status, ...(json.error === undefined ? {} : { error: json.error }) };
    },
    stop: async () => {
      controller.abort();
      await listening;
      await gateway.stop(100);
    },
  };
}

const body = JSON.stringify({ sender: 'crm', conversation: 'T-1', text: 'refund order 7' });

describe('webhook replays', () => {
  it('a captured request sent again under a new Idempotency-Key runs no new turn (the key is signed)', async () => {
    const hook = await start();
    try {
      // The body-only form an attacker could reuse: refused by default, naming the fix.
      const old = await hook.post('k-1', body, legacy(body));
      assert.equal(old.status, 401);
      assert.match(old.error ?? '', /body-only signature.*legacy_signature = true/);
      const signature = v1('k-1', body);
      assert.equal((await hook.post('k-1', body, signature)).status, 200);
      assert.equal((await hook.post('k-2', body, signature)).status, 401, 'same signature, new key');
      assert.equal((await hook.post('k-1', body, signature)).status, 200, 'same key: answered from the first result');
      assert.deepEqual(hook.turns, ['k-1']);
    } finally {
      await hook.stop();
    }
  });

  it('refuses a signature more than 5 minutes old or ahead with a 401 that names the clock', async () => {
    const hook = await start();
    try {
      const now = Math.floor(Date.now() / 1000);
      const stale = await hook.post('k-old', body, v1('k-old', body, now - 301));
      assert.equal(stale.status, 401);
      assert.match(stale.error ?? '', /timestamp t=\d+ is 30\d s in the past; at most 300 s/);
      const ahead = await hook.post('k-new', body, v1('k-new', body, now + 400));
      assert.equal(ahead.status, 401);
      assert.match(ahead.error ?? '', /in the future/);
      assert.equal((await hook.post('k-edge', body, v1('k-edge', body, now - 250))).status, 200, 'within the window');
      assert.deepEqual(hook.turns, ['k-edge']);
    } finally {
      await hook.stop();
    }
  });

  it('accepts the body-only form only with legacy_signature = true', async () => {
    const hook = await start({ legacy_signature: true });
    try {
      assert.equal((await hook.post('k-1', body, legacy(body))).status, 200);
      assert.equal((await hook.post('k-2', body, v1('k-2', body))).status, 200, 'the new form works too');
      assert.equal((await hook.post('k-3', body, legacy('{"other":1}'))).status, 401);
      assert.deepEqual(hook.turns, ['k-1', 'k-2']);
    } finally {
      await hook.stop();
    }
  });
});

describe('webhook logs', () => {
  it('never carry the secret or a signature, at debug level, for good, stale, forged and legacy requests', async () => {
    let text = '';
    const logger = pino({ level: 'debug' }, { write: (line: string) => void (text += line) });
    const hook = await start({ legacy_signature: true }, logger);
    const signatures = [v1('k-1', body), v1('k-2', body, Math.floor(Date.now() / 1000) - 900), `t=${Math.floor(Date.now() / 1000)},v1=${'ab'.repeat(32)}`, legacy(body), 'garbage'];
    try {
      for (const [i, signature] of signatures.entries()) await hook.post(`k-${i + 1}`, body, signature);
    } finally {
      await hook.stop();
    }
    assert.match(text, /legacy_signature = true/, 'the start-up warning is there');
    assert.match(text, /rejected/, 'the refusals are logged');
    assert.ok(!text.includes(secret), 'the secret');
    for (const signature of signatures.slice(0, 4)) assert.ok(!text.includes(/[0-9a-f]{64}/.exec(signature)![0]), `the digest of ${signature.slice(0, 20)}…`);
  });
});

describe('webhook ids', () => {
  it('parseWebhookRequest refuses a control character in conversation, sender or callback_url, and a NUL in text, naming the field', () => {
    const cases: Array<[string, Record<string, string>]> = [
      ['conversation', { conversation: 'T-\u00001' }],
      ['sender', { sender: 'crm\u0000' }],
      ['conversation', { conversation: 'a\r\nb' }],
      ['sender', { sender: 'x\u001b[31m' }],
      ['callback_url', { callback_url: 'http://127.0.0.1:9/cb\u0000' }],
      ['text', { text: 'a\u0000b' }],
    ];
    for (const [field, change] of cases) {
      const parsed = parseWebhookRequest({ 'idempotency-key': 'k1' }, Buffer.from(JSON.stringify({ sender: 'crm', conversation: 'T-1', text: 'hi', ...change })));
      assert.equal(parsed.ok, false, JSON.stringify(change));
      assert.ok(!parsed.ok && parsed.status === 400 && parsed.error.startsWith(`"${field}" contains a`), JSON.stringify(parsed));
    }
    assert.equal(parseWebhookRequest({ 'idempotency-key': 'k1' }, Buffer.from(JSON.stringify({ sender: 'crm', conversation: 'T-1', text: 'line one\nline two\ttab' }))).ok, true, 'text may hold line breaks and tabs');
  });

  it('refuses control characters in conversation and sender (a NUL fails every PostgreSQL insert) with a 400 naming the field', async () => {
    const hook = await start();
    try {
      for (const [field, value] of [['conversation', 'T-\u00001'], ['sender', 'crm\u0000'], ['conversation', 'a\nb'], ['sender', 'x\u007f'], ['conversation', 'c\u2028d']] as const) {
        const hostile = JSON.stringify({ sender: 'crm', conversation: 'T-1', text: 'hi', [field]: value });
        const key = `k-${field}-${value.codePointAt(value.length - 2)}`;
        const answer = await hook.post(key, hostile, v1(key, hostile));
        assert.equal(answer.status, 400, JSON.stringify(value));
        assert.match(answer.error ?? '', new RegExp(`"${field}" contains a control character`));
      }
      const nul = JSON.stringify({ sender: 'crm', conversation: 'T-1', text: 'a\u0000b' });
      const answer = await hook.post('k-text', nul, v1('k-text', nul));
      assert.equal(answer.status, 400);
      assert.match(answer.error ?? '', /"text" contains a NUL/);
      assert.deepEqual(hook.turns, []);
    } finally {
      await hook.stop();
    }
  });
});
