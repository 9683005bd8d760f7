/**
 * The generic webhook channel through a real daemon: signed requests answered with the reply,
 * unsigned ones refused before the model, replayed Idempotency-Keys answered from the first
 * result (also after a restart), a slow reply going to the signed callback, and history.
 */
import assert from 'node:assert/strict';
import { createServer as createHttpServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { sign, signLegacy, verify } from '../channels/webhook/signature.ts';
import { startFakeOpenAI, type FakeOpenAI } from './fixtures/fake-openai.ts';
import { startDaemon, tempConfig, type Daemon } from './support/cli.ts';
import { quiet, until } from './support/wait.ts';
import { freePort } from './support/net.ts';

const secret = 'webhook-e2e-secret';
const env = { TEST_MODEL_KEY: 'sk-wh', WEBHOOK_SECRET: secret };


interface Callback {
  readonly headers: IncomingMessage['headers'];
  readonly body: string;
}

describe('webhook channel (end to end)', () => {
  let model: FakeOpenAI;
  let daemon: Daemon;
  let config: ReturnType<typeof tempConfig>;
  let base: string;
  const callbacks: Callback[] = [];
  const receiver = createHttpServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString('utf8')));
    req.on('end', () => {
      callbacks.push({ headers: req.headers, body });
      res.writeHead(204).end();
    });
  });
  let callbackUrl: string;

  const start = async (): Promise<void> => {
    daemon = startDaemon(['start', '--config', config.file], { env });
    await daemon.waitFor(/"msg":"ready"/, 'stdout', 20_000);
  };
  const stop = async (): Promise<void> => {
    daemon.child.kill('SIGTERM');
    await daemon.exited;
  };

  /** POSTs a message; `signature` overrides the right one (null = none). */
  async function post(key: string, fields: Record<string, string>, signature?: string | null): Promise<{ status: number; json: Record<string, unknown> }> {
    const body = JSON.stringify(fields);
    const headers: Record<string, string> = { 'content-type': 'application/json', 'idempotency-key': key };
    if (signature !== null) headers['x-switchboard-signature'] = signature ?? sign(secret, { key, body });
    const response = await fetch(`${base}/webhook`, { method: 'POST', headers, body });
    return { status: response.status, json: (await response.json()) as Record<string, unknown> };
  }

  before(async () => {
    model = await startFakeOpenAI();
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    callbackUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook-replies`;
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    config = tempConfig(model.baseUrl, `[log]\nformat = "json"\n[gateway]\nlisten = "127.0.0.1:${port}"\n[channels.webhook]\nsecret = "\${WEBHOOK_SECRET}"\nreply_timeout_seconds = 3\n`);
    await start();
  });
  after(async () => {
    await stop();
    config.cleanup();
    await new Promise<void>((resolve) => receiver.close(() => resolve()));
    await model.close();
  });

  it('answers a signed request with the reply', async () => {
    const answer = await post('msg-1', { sender: 'crm', conversation: 'ticket-7', text: 'hello there' });
    assert.deepEqual(answer, { status: 200, json: { id: 'msg-1', reply: 'echo: hello there' } });
    assert.equal(model.requests.length, 1);
  });

  it('refuses a bad or missing signature with 401, never calling the model', async () => {
    const before = model.requests.length;
    const fields = { sender: 'crm', conversation: 'ticket-7', text: 'let me in' };
    const wrong = await post('msg-bad', fields, sign('not-the-secret', { key: 'msg-bad', body: JSON.stringify(fields) }));
    // A captured request sent again under another key (or the old body-only form) runs nothing either.
    const rekeyed = await post('msg-bad-2', fields, sign(secret, { key: 'msg-bad', body: JSON.stringify(fields) }));
    const bodyOnly = await post('msg-bad-3', fields, signLegacy(secret, JSON.stringify(fields)));
    assert.equal(rekeyed.status, 401);
    assert.equal(bodyOnly.status, 401);
    assert.match(String(bodyOnly.json.error), /legacy_signature/);
    const missing = await post('msg-bad', fields, null);
    assert.equal(wrong.status, 401);
    assert.equal(missing.status, 401);
    assert.match(String(wrong.json.error), /X-Switchboard-Signature/);
    const malformed = await post('', fields);
    assert.equal(malformed.status, 400);
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.equal(model.requests.length, before);
  });

  it('carries the conversation history into the next message', async () => {
    const answer = await post('msg-2', { sender: 'crm', conversation: 'ticket-7', text: 'second message' });
    assert.deepEqual(answer.json, { id: 'msg-2', reply: 'echo: second message' });
    const messages = model.requests.at(-1)!.body.messages.map((m) => `${m.role}: ${m.content ?? ''}`);
    const first = messages.indexOf('user: hello there');
    assert.ok(first >= 0, messages.join('\n'));
    assert.equal(messages[first + 1], 'assistant: echo: hello there');
    assert.equal(messages.at(-1), 'user: second message');
  });

  it('answers a replayed Idempotency-Key from the first result without running it again', async () => {
    const before = model.requests.length;
    const replay = await post('msg-1', { sender: 'crm', conversation: 'ticket-7', text: 'hello there' });
    assert.deepEqual(replay, { status: 200, json: { id: 'msg-1', reply: 'echo: hello there' } });
    assert.equal(model.requests.length, before);
  });

  it('answers 202 when the reply is slow, then POSTs the signed reply to the callback', async () => {
    model.script({ text: 'took a while', delayMs: 5000 });
    const before = model.requests.length;
    const fields = { sender: 'crm', conversation: 'ticket-9', text: 'slow one', callback_url: callbackUrl };
    const answer = await post('msg-slow', fields);
    assert.deepEqual(answer, { status: 202, json: { status: 'accepted', id: 'msg-slow' } });
    // A replay while it still runs waits for the same result (or 202 again): never a second turn.
    const replay = await post('msg-slow', fields);
    if (replay.status === 200) assert.deepEqual(replay.json, { id: 'msg-slow', reply: 'took a while' });
    else assert.deepEqual(replay, { status: 202, json: { status: 'accepted', id: 'msg-slow' } });
    await until(() => callbacks.length >= 1, 'the callback', 15_000);
    const [callback] = callbacks;
    assert.equal(callback!.headers['idempotency-key'], 'msg-slow');
    assert.ok(verify(secret, { key: 'msg-slow', body: Buffer.from(callback!.body) }, callback!.headers['x-switchboard-signature']), 'the callback is signed (t.key.body)');
    assert.deepEqual(JSON.parse(callback!.body), { id: 'msg-slow', conversation: 'ticket-9', reply: 'took a while' });
    assert.equal(model.requests.length, before + 1);
    const later = await post('msg-slow', fields);
    assert.deepEqual(later.json, { id: 'msg-slow', reply: 'took a while' });
    await quiet();
    assert.equal(callbacks.length, 1, 'the 202 promised one callback, and only one came');
  });

  it('still answers a replay from the first result after a restart', async () => {
    await stop();
    await start();
    const before = model.requests.length;
    const replay = await post('msg-1', { sender: 'crm', conversation: 'ticket-7', text: 'hello there' });
    assert.deepEqual(replay, { status: 200, json: { id: 'msg-1', reply: 'echo: hello there' } });
    assert.equal(model.requests.length, before);
  });
});
