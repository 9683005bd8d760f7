/**
 * The model endpoint misbehaving under a real daemon (`switchboard start`, terminal channel):
 * it hangs, resets, stalls mid-body, answers broken JSON, an HTML page or JSON of another API.
 * Each time the person gets an apology within the provider's timeout (retries bounded), the log
 * says at error level what the endpoint did, naming the provider and what to check, and the next
 * message is answered as if nothing happened. The same while streaming into a Telegram draft
 * (the local Bot API peer), where the stream breaks off after some text was already shown.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startFakeOpenAI, type FakeOpenAI, type Step } from './fixtures/fake-openai.ts';
import { startDaemon, tempConfig, type Daemon } from './support/cli.ts';
import { startTelegramPeer, type TelegramPeer } from './peers/telegram.ts';
import type { Place } from './contracts/chat-channel.ts';
import { quiet, until } from './support/wait.ts';

const json = { 'content-type': 'application/json' };
const html = { 'content-type': 'text/html; charset=utf-8' };
const proxyPage = '<!DOCTYPE html><html><head><title>Sign in - Corporate Proxy</title></head><body><form>login</form></body></html>';
const unreachable = /^Sorry — I could not reach the model to answer that\. Please try again in a moment\.$/;
const unreadable = /^Sorry — the model service sent back something I could not read, so I have no answer\. Please try again in a moment\.$/;

interface Fault {
  readonly what: string;
  readonly step: Step;
  /** Requests the endpoint gets for the one message: the first try and the bounded retries. */
  readonly attempts: number;
  readonly apology: RegExp;
  /** What the error log line says. */
  readonly log: RegExp;
}

// timeout_seconds = 1, max_retries = 2 (the default): a hang is retried once, a fast failure twice.
const faults: Fault[] = [
  { what: 'hangs without answering', step: { fault: 'hang' }, attempts: 2, apology: unreachable, log: /no answer within 1000 ms \(the provider's timeout_seconds\)/ },
  { what: 'resets the connection', step: { fault: 'reset' }, attempts: 3, apology: unreachable, log: /unreachable: .*ECONNRESET; the connection was dropped/ },
  { what: 'sends headers, then stalls mid-body', step: { fault: 'stall', text: 'half an answer' }, attempts: 2, apology: unreachable, log: /stalled and was not complete within 1000 ms/ },
  { what: 'resets mid-body', step: { fault: 'cut', text: 'half an answer' }, attempts: 3, apology: unreachable, log: /failed while answering/ },
  { what: 'answers 200 with broken JSON', step: { raw: '{"choices": [{"message": {"content": "hi"', headers: json }, attempts: 1, apology: unreadable, log: /answered HTTP 200 with broken JSON/ },
  {
    what: 'answers 200 with an HTML page',
    step: { raw: proxyPage, headers: html },
    attempts: 1,
    apology: unreadable,
    log: /answered HTTP 200 with an HTML page \("Sign in - Corporate Proxy"\) instead of JSON; check that base_url is the model API/,
  },
  { what: 'answers 200 with JSON of the wrong shape', step: { raw: '{"result": "ok"}', headers: json }, attempts: 1, apology: unreadable, log: /without choices\[0\]\.message .*check that provider kind and base_url/ },
  { what: 'answers 200 with JSON null', step: { raw: 'null', headers: json }, attempts: 1, apology: unreadable, log: /without a JSON object/ },
  {
    what: 'answers 200 with a message whose fields are the wrong types',
    step: { raw: '{"choices": [{"message": {"content": 42, "tool_calls": {"a": 1}}}]}', headers: json },
    attempts: 1,
    apology: unreadable,
    log: /without text in choices\[0\]\.message\.content/,
  },
  { what: 'answers 502 with an HTML error page', step: { status: 502, body: proxyPage.replace('Sign in - Corporate Proxy', '502 Bad Gateway'), headers: html }, attempts: 3, apology: unreachable, log: /HTTP 502: an HTML page \("502 Bad Gateway"\)/ },
];

describe('a misbehaving model endpoint (end to end)', () => {
  let model: FakeOpenAI;
  let daemon: Daemon;
  let config: ReturnType<typeof tempConfig>;

  before(async () => {
    model = await startFakeOpenAI();
    config = tempConfig(model.baseUrl, 'timeout_seconds = 1\n[log]\nformat = "json"\n[channels.terminal]\nuser = "ada"\n');
    daemon = startDaemon(['start', '--config', config.file], { env: { TEST_MODEL_KEY: 'k' } });
    await daemon.waitFor(/"msg":"ready"/);
  });
  after(async () => {
    daemon.child.kill('SIGTERM');
    await daemon.exited;
    config.cleanup();
    await model.close();
  });

  /** Sends one line and resolves with the one reply line printed for it. */
  async function ask(text: string): Promise<string> {
    const from = daemon.stdout().length;
    daemon.child.stdin.write(`${text}\n`);
    await daemon.waitFor(new RegExp(`^[\\s\\S]{${from}}[^\\n]*\\n`), 'stdout', 20_000);
    return daemon.stdout().slice(from).split('\n')[0]!;
  }

  faults.forEach((fault, index) => {
    it(`apologises when the endpoint ${fault.what}, logs what it did, and answers the next message`, async () => {
      model.script(...Array.from({ length: fault.attempts }, () => fault.step));
      const requests = model.requests.length;
      const logFrom = daemon.stderr().length;
      const started = performance.now();
      const reply = await ask(`question ${index}`);
      const took = performance.now() - started;
      assert.match(reply, fault.apology);
      assert.equal(model.requests.length - requests, fault.attempts, 'retries are bounded');
      // 1 s per timed-out try plus ≤ 0.6 s backoff per retry, and some slack for the daemon.
      assert.ok(took < fault.attempts * 1000 + 6000, `answered in ${Math.round(took)} ms`);

      await daemon.waitFor(/"msg":"turn failed; telling the user"/, 'stderr', 5000);
      const lines = daemon.stderr().slice(logFrom).split('\n').filter((line) => line.startsWith('{'));
      const failed = lines.map((line) => JSON.parse(line) as { level: number; msg: string; error?: string }).find((entry) => entry.msg === 'turn failed; telling the user');
      assert.ok(failed, 'the failure is logged');
      assert.equal(failed.level, 50, 'at error level');
      assert.match(failed.error ?? '', fault.log);
      assert.match(failed.error ?? '', /openai\/test-model/, 'naming the provider and model');
      assert.doesNotMatch(failed.error ?? '', /<html|<!DOCTYPE/i, 'no raw HTML in the log');

      assert.equal(await ask(`hello after ${index}`), `echo: hello after ${index}`);
    });
  });
});

describe('a model stream that breaks off (end to end, streaming into a Telegram draft)', () => {
  let model: FakeOpenAI;
  let peer: TelegramPeer;
  let daemon: Daemon;
  let config: ReturnType<typeof tempConfig>;
  const dm: Place = { kind: 'dm', user: 'alice' };
  const texts = (): string[] => peer.botMessages(dm).map((message) => message.text);

  before(async () => {
    model = await startFakeOpenAI();
    peer = await startTelegramPeer();
    config = tempConfig(
      model.baseUrl,
      `timeout_seconds = 1\n[log]\nformat = "json"\n${peer.configSection()}allow = ${JSON.stringify([peer.users.alice])}\nstream = true\n`,
    );
    daemon = startDaemon(['start', '--config', config.file], { env: { TEST_MODEL_KEY: 'k' } });
    await daemon.waitFor(/"msg":"ready"/, 'stdout', 20_000);
  });
  after(async () => {
    daemon.child.kill('SIGTERM');
    await daemon.exited;
    config.cleanup();
    await peer.close();
    await model.close();
  });

  const text = 'This answer starts to stream and then the endpoint misbehaves half way through it.';
  const streamFaults: Array<{ what: string; step: Step; log: RegExp; apology: RegExp }> = [
    { what: 'stalls mid-stream', step: { fault: 'stall', text }, log: /stalled and was not complete within 1000 ms/, apology: unreachable },
    { what: 'resets mid-stream', step: { fault: 'cut', text }, log: /failed while answering/, apology: unreachable },
    { what: 'streams garbage mid-stream', step: { raw: `data: ${JSON.stringify({ choices: [{ index: 0, delta: { content: 'This answer starts' } }] })}\n\ndata: {"choices": [tru\n\n` }, log: /streamed broken JSON/, apology: unreadable },
    { what: 'ends the stream early', step: { raw: `data: ${JSON.stringify({ choices: [{ index: 0, delta: { content: 'This answer starts' } }] })}\n\n` }, log: /the stream ended before the answer was complete/, apology: unreachable },
  ];

  streamFaults.forEach((fault, index) => {
    it(`apologises when the endpoint ${fault.what}, and the next message streams normally`, async () => {
      peer.reset();
      const logFrom = daemon.stdout().length;
      const requests = model.requests.length;
      model.script(fault.step);
      const started = performance.now();
      await peer.post('alice', dm, `stream question ${index}`);
      await daemon.waitFor(/"msg":"turn failed; telling the user"/, 'stdout', 15_000);
      await until(() => texts().some((shown) => fault.apology.test(shown)), 'the apology', 15_000, () => JSON.stringify(texts()));
      assert.ok(performance.now() - started < 8000, 'within the timeout');
      await quiet(300);
      assert.equal(texts().length, 1, `the half-streamed draft became the apology, no second message: ${JSON.stringify(texts())}`);
      assert.equal(model.requests.length - requests, 1, 'text was already shown: no silent retry that would show it twice');
      const failed = daemon
        .stdout()
        .slice(logFrom)
        .split('\n')
        .filter((line) => line.startsWith('{'))
        .map((line) => JSON.parse(line) as { level: number; msg: string; error?: string })
        .find((entry) => entry.msg === 'turn failed; telling the user');
      assert.equal(failed?.level, 50);
      assert.match(failed?.error ?? '', fault.log);
      assert.match(failed?.error ?? '', /openai\/test-model/);

      peer.reset();
      const next = 'Streaming again, in several pieces, all the way to the end.';
      model.script({ text: next, deltas: next.match(/.{1,10}/g)!, deltaDelayMs: 50 });
      await peer.post('alice', dm, `stream hello ${index}`);
      await until(() => texts().includes(next), 'the next streamed answer', 15_000, () => JSON.stringify(texts()));
      await quiet(300);
    });
  });
});
