/**
 * Fault injection: a real daemon is SIGKILLed while a turn waits on a slow model, then
 * restarted. The accepted message must be answered exactly once, and a further restart
 * must send nothing again.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startFakeOpenAI, type FakeOpenAI } from './fixtures/fake-openai.ts';
import { startDaemon, tempConfig } from './support/cli.ts';

const count = (haystack: string, needle: string): number => haystack.split(needle).length - 1;

describe('crash recovery (SIGKILL)', () => {
  let model: FakeOpenAI;
  before(async () => {
    model = await startFakeOpenAI();
  });
  after(() => model.close());

  it('answers a message whose turn was cut by SIGKILL exactly once after restart', async () => {
    const config = tempConfig(model.baseUrl);
    const env = { TEST_MODEL_KEY: 'k' };
    try {
      // The first answer hangs: the daemon will be killed while it waits for it.
      model.script({ text: 'too late', delayMs: 60_000 });
      model.fallback = (request) => ({ text: `answer to: ${[...request.body.messages].reverse().find((m) => m.role === 'user')?.content}` });

      const first = startDaemon(['start', '--config', config.file], { env });
      await first.waitFor(/"msg":"ready"/);
      first.child.stdin.write('what is the meaning of life?\n');
      await model.waitForRequests(1);
      first.child.kill('SIGKILL');
      const killed = await first.exited;
      assert.equal(killed.signal, 'SIGKILL');
      assert.equal(first.stdout(), '', 'nothing was answered before the kill');

      const second = startDaemon(['start', '--config', config.file], { env });
      await second.waitFor(/answer to: what is the meaning of life\?\n/, 'stdout');
      await second.waitFor(/"msg":"ready"/);
      assert.match(second.stderr(), /"unanswered":1/, 'the restart found the accepted message');
      // Give a duplicate every chance to show up before stopping.
      await new Promise((resolve) => setTimeout(resolve, 500));
      second.child.kill('SIGTERM');
      const stopped = await second.exited;
      assert.equal(stopped.code, 0);
      assert.equal(count(second.stdout(), 'answer to: what is the meaning of life?'), 1);
      assert.equal(model.requests.length, 2, 'the model was asked once before the kill and once after');

      // A third start finds nothing left to do: no reply is sent twice.
      const third = startDaemon(['start', '--config', config.file], { env });
      await third.waitFor(/"msg":"ready"/);
      await new Promise((resolve) => setTimeout(resolve, 500));
      third.child.kill('SIGTERM');
      await third.exited;
      assert.equal(third.stdout(), '');
      assert.doesNotMatch(third.stderr(), /recovering work/);
      assert.equal(model.requests.length, 2);
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
