/**
 * Fault injection: a real daemon is SIGKILLed while a turn waits on a slow model, then
 * restarted. The accepted message must be answered exactly once, and a further restart
 * must send nothing again — except on the terminal, which never answers late (the person who
 * was there is told instead, see channels/terminal).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sign } from '../channels/webhook/signature.ts';
import { startFakeOpenAI, type FakeOpenAI } from './fixtures/fake-openai.ts';
import { startDaemon, tempConfig } from './support/cli.ts';
import { startCallbackReceiver } from './support/callbacks.ts';
import { freePort } from './support/net.ts';
import { quiet, until } from './support/wait.ts';

const secret = 'crash-test-secret';

describe('crash recovery (SIGKILL)', () => {
  let model: FakeOpenAI;
  before(async () => {
    model = await startFakeOpenAI();
  });
  after(() => model.close());

  it('answers a message whose turn was cut by SIGKILL exactly once after restart', async () => {
    // The webhook channel: its caller is a program that waits for the reply at its callback_url.
    const port = await freePort();
    const config = tempConfig(model.baseUrl, `[gateway]\nlisten = "127.0.0.1:${port}"\n[channels.webhook]\nsecret = "\${WEBHOOK_SECRET}"\nreply_timeout_seconds = 1\n`);
    const env = { TEST_MODEL_KEY: 'k', WEBHOOK_SECRET: secret };
    const receiver = await startCallbackReceiver();
    const { bodies: callbacks, url: callbackUrl } = receiver;
    const before = model.requests.length;
    try {
      // The first answer hangs: the daemon will be killed while it waits for it.
      model.script({ text: 'too late', delayMs: 60_000 });
      model.fallback = (request) => ({ text: `answer to: ${[...request.body.messages].reverse().find((m) => m.role === 'user')?.content}` });

      const first = startDaemon(['start', '--config', config.file], { env });
      await first.waitFor(/"msg":"ready"/, 'stdout');
      const body = JSON.stringify({ sender: 'crm', conversation: 'c1', text: 'what is the meaning of life?', callback_url: callbackUrl });
      const request = fetch(`http://127.0.0.1:${port}/webhook`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'idempotency-key': 'life-1', 'x-switchboard-signature': sign(secret, { key: 'life-1', body }) },
        body,
      }).catch(() => undefined);
      await model.waitForRequests(before + 1);
      first.child.kill('SIGKILL');
      const killed = await first.exited;
      assert.equal(killed.signal, 'SIGKILL');
      await request;
      assert.deepEqual(callbacks, [], 'nothing was answered before the kill');

      const second = startDaemon(['start', '--config', config.file], { env });
      await second.waitFor(/"msg":"ready"/, 'stdout');
      await until(() => callbacks.length > 0, 'the reply at the callback_url', 15_000, () => second.stdout());
      assert.match(second.stdout(), /"unanswered":1/, 'the restart found the accepted message');
      // Give a duplicate every chance to show up before stopping.
      await quiet(500);
      second.child.kill('SIGTERM');
      const stopped = await second.exited;
      assert.equal(stopped.code, 0);
      assert.deepEqual(
        callbacks.map((callback) => (JSON.parse(callback) as { reply: string }).reply),
        ['answer to: what is the meaning of life?'],
      );
      assert.equal(model.requests.length, before + 2, 'the model was asked once before the kill and once after');

      // A third start finds nothing left to do: no reply is sent twice.
      const third = startDaemon(['start', '--config', config.file], { env });
      await third.waitFor(/"msg":"ready"/, 'stdout');
      await quiet(500);
      third.child.kill('SIGTERM');
      await third.exited;
      assert.doesNotMatch(third.stdout(), /recovering work/);
      assert.equal(callbacks.length, 1);
      assert.equal(model.requests.length, before + 2);
    } finally {
      await receiver.close();
      config.cleanup();
    }
  });

  it('the terminal does not answer late: a turn cut by SIGKILL is set aside at restart, not run again', async () => {
    const config = tempConfig(model.baseUrl);
    const env = { TEST_MODEL_KEY: 'k' };
    try {
      const before = model.requests.length;
      model.script({ text: 'too late', delayMs: 60_000 });
      const first = startDaemon(['start', '--config', config.file], { env });
      await first.waitFor(/"msg":"ready"/);
      first.child.stdin.write('what is the meaning of life?\n');
      await model.waitForRequests(before + 1);
      first.child.kill('SIGKILL');
      await first.exited;

      const second = startDaemon(['start', '--config', config.file], { env });
      await second.waitFor(/"msg":"ready"/);
      assert.match(second.stderr(), /"channel":"terminal","messages":1,"msg":"not running again what an earlier run left unanswered/);
      second.child.stdin.write('and now?\n');
      await second.waitFor(/and now\?\n/, 'stdout');
      second.child.kill('SIGTERM');
      await second.exited;
      assert.doesNotMatch(second.stdout(), /meaning of life|too late/);
      assert.equal(model.requests.length, before + 2, 'only the new message went to the model');
    } finally {
      config.cleanup();
    }
  });

  it('exits at once on a second signal while a turn is still running', async () => {
    const config = tempConfig(model.baseUrl, '[runtime]\nshutdown_grace_seconds = 30\n[channels.terminal]\n');
    const env = { TEST_MODEL_KEY: 'k' };
    try {
      const before = model.requests.length;
      model.script({ text: 'slow', delayMs: 60_000 });
      const daemon = startDaemon(['start', '--config', config.file], { env });
      await daemon.waitFor(/"msg":"ready"/);
      daemon.child.stdin.write('hang on\n');
      await model.waitForRequests(before + 1);
      daemon.child.kill('SIGTERM');
      await daemon.waitFor(/"msg":"shutting down"/);
      const started = Date.now();
      daemon.child.kill('SIGTERM');
      const exit = await daemon.exited;
      assert.equal(exit.code, 130);
      assert.ok(Date.now() - started < 5000);
      assert.match(daemon.stderr(), /second signal/);
    } finally {
      config.cleanup();
    }
  });
});
