/**
 * End to end: the real `switchboard chat` process, the durable pipeline, and a scripted
 * OpenAI-compatible model on 127.0.0.1.
 */
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { after, before, beforeEach, describe, it } from 'node:test';
import { startFakeOpenAI, type FakeOpenAI } from './fixtures/fake-openai.ts';
import { runCli, startDaemon, tempConfig } from './support/cli.ts';
import { freePort } from './support/net.ts';

describe('switchboard chat (end to end)', () => {
  let model: FakeOpenAI;
  let config: ReturnType<typeof tempConfig>;
  const env = { TEST_MODEL_KEY: 'sk-e2e' };

  before(async () => {
    model = await startFakeOpenAI();
  });
  after(() => model.close());
  beforeEach(() => {
    config = tempConfig(model.baseUrl);
    model.requests.length = 0;
  });

  it('answers piped lines in order, exits when done, and sends the first turn as history with the second', async () => {
    try {
      const result = await runCli(['chat', '--config', config.file], { input: 'hi\nand you?\n', env });
      assert.equal(result.code, 0, result.stderr);
      assert.equal(result.stdout, 'echo: hi\necho: and you?\n');
      assert.equal(model.requests.length, 2);
      const [first, second] = model.requests;
      assert.equal(first!.headers.authorization, 'Bearer sk-e2e');
      assert.equal(first!.body.model, 'test-model');
      assert.match(first!.body.messages[0]!.content ?? '', /You are Testbot/);
      assert.deepEqual(
        second!.body.messages.slice(1).map((m) => [m.role, m.content]),
        [
          ['user', 'hi'],
          ['assistant', 'echo: hi'],
          ['user', 'and you?'],
        ],
      );
    } finally {
      config.cleanup();
    }
  });

  it('remembers the conversation across separate chat sessions', async () => {
    try {
      await runCli(['chat', '--config', config.file], { input: 'my name is Ada\n', env });
      const result = await runCli(['chat', '--config', config.file], { input: 'what is my name?\n', env });
      assert.equal(result.code, 0, result.stderr);
      const last = model.requests.at(-1)!;
      assert.deepEqual(
        last.body.messages.slice(1).map((m) => m.content),
        ['my name is Ada', 'echo: my name is Ada', 'what is my name?'],
      );
    } finally {
      config.cleanup();
    }
  });

  it('answers chat commands (/help, /model, /status, /new, !cmd) in the terminal without the model', async () => {
    try {
      const result = await runCli(['chat', '--config', config.file], { input: 'my name is Ada\n/help\n!model\n/status\n/new\nwho am I?\n', env });
      assert.equal(result.code, 0, result.stderr);
      const out = result.stdout;
      assert.match(out, /^echo: my name is Ada\nCommands:\n\/new — /);
      assert.match(out, /\nModel: test-model\.\n/);
      assert.match(out, /\nUp \S+ and running · channels: terminal running/);
      assert.match(out, /\nStarted a fresh conversation[^\n]*\necho: who am I\?\n$/);
      assert.equal(model.requests.length, 2, 'only the two plain messages reached the model');
      assert.deepEqual(
        model.requests[1]!.body.messages.slice(1).map((m) => m.content),
        ['who am I?'],
        '/new set the earlier turn aside',
      );
    } finally {
      config.cleanup();
    }
  });

  it('the quick start: with the shipped example, chat answers at once and start runs with the browser chat', async () => {
    const example = readFileSync(new URL('../switchboard.example.toml', import.meta.url), 'utf8');
    const port = await freePort();
    assert.match(example, /^listen = "127\.0\.0\.1:8787"$/m, 'the example turns the gateway (and its console) on');
    writeFileSync(config.file, example.replace(/^base_url = "https:\/\/api\.openai\.com\/v1"$/m, `base_url = "${model.baseUrl}"`).replace(/^listen = "127\.0\.0\.1:8787"$/m, `listen = "127.0.0.1:${port}"`));
    try {
      const chat = await runCli(['chat', '--config', config.file], { input: 'hi\n', env: { OPENAI_API_KEY: 'sk-example' } });
      assert.equal(chat.code, 0, chat.stderr);
      assert.equal(chat.stdout, 'echo: hi\n');
      assert.equal(model.requests.at(-1)!.headers.authorization, 'Bearer sk-example');
      // No channel table is enabled, but the console's browser chat is a channel: start runs.
      const start = startDaemon(['start', '--config', config.file], { env: { OPENAI_API_KEY: 'sk-example' } });
      try {
        await start.waitFor(/"channels":\["web"\][^\n]*"msg":"ready"/, 'stdout', 20_000);
        assert.equal((await fetch(`http://127.0.0.1:${port}/readyz`)).status, 200);
      } finally {
        start.child.kill('SIGTERM');
      }
      assert.equal((await start.exited).code, 0);
    } finally {
      config.cleanup();
    }
  });

  it('needs only the secrets chat uses: no gateway token, bot token or database URL; a missing model key still stops it', async () => {
    // Issue 25: with [gateway] token = "${SWITCHBOARD_TOKEN}" chat demanded SWITCHBOARD_TOKEN.
    const extra = '[gateway]\nlisten = "0.0.0.0:8787"\ntoken = "${SWITCHBOARD_TOKEN}"\n[channels.telegram]\ntoken = "${TELEGRAM_BOT_TOKEN}"\n[channels.terminal]\nuser = "tester"\n';
    const withGateway = tempConfig(model.baseUrl, extra);
    try {
      const result = await runCli(['chat', '--config', withGateway.file], { input: 'hi\n', env });
      assert.equal(result.code, 0, result.stderr);
      assert.equal(result.stdout, 'echo: hi\n');
      const noKey = await runCli(['chat', '--config', withGateway.file], { input: 'hi\n', env: { TEST_MODEL_KEY: undefined } });
      assert.equal(noKey.code, 78);
      assert.match(noKey.stderr, /provider\.api_key: environment variable TEST_MODEL_KEY is not set/);
      assert.doesNotMatch(noKey.stderr, /SWITCHBOARD_TOKEN|TELEGRAM_BOT_TOKEN/);
      const start = await runCli(['start', '--config', withGateway.file], { env });
      assert.equal(start.code, 78, 'start still needs them');
      assert.match(start.stderr, /SWITCHBOARD_TOKEN/);
    } finally {
      withGateway.cleanup();
      config.cleanup();
    }
  });

  it('runs a tool call the model asks for and prints only the final answer', async () => {
    try {
      model.script({ toolCalls: [{ name: 'current_time', arguments: { timezone: 'UTC' } }] }, { text: '<think>use the result</think>It is late.' });
      const result = await runCli(['chat', '--config', config.file], { input: 'what time is it?\n', env });
      assert.equal(result.code, 0, result.stderr);
      assert.equal(result.stdout, 'It is late.\n');
      assert.equal(model.requests.length, 2);
      assert.ok(model.requests[0]!.body.tools!.some((t) => t.function.name === 'current_time'));
      const toolMessage = model.requests[1]!.body.messages.find((m) => m.role === 'tool');
      assert.ok(toolMessage, 'the tool result went back to the model');
      assert.match(toolMessage.content ?? '', /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \(UTC\)$/);
    } finally {
      config.cleanup();
    }
  });

  it('tells the user when the model fails, logs one line with the cause once, and exits 75', async () => {
    try {
      // the first try and both retries (max_retries = 2) fail
      const failure = { status: 500, body: '{"error":{"message":"upstream exploded"}}' };
      model.script(failure, failure, failure);
      const result = await runCli(['chat', '--config', config.file], { input: 'hello\nagain\n', env });
      assert.equal(result.code, 75, 'a message went unanswered');
      assert.equal(result.stdout, 'Sorry — I could not reach the model to answer that. Please try again in a moment.\necho: again\n');
      const lines = result.stderr.trim().split('\n');
      assert.equal(lines.length, 1, `one log line per failure, no retry warnings:\n${result.stderr}`);
      const entry = JSON.parse(lines[0]!) as Record<string, unknown>;
      assert.equal(entry.msg, 'turn failed; telling the user');
      assert.match(String(entry.error), /^model endpoint answered HTTP 500: upstream exploded \(openai\/test-model, 3 attempts\)$/);
      assert.equal(result.stderr.split('upstream exploded').length, 2, 'the cause appears once');
      assert.equal(entry.err, undefined, 'no stack trace for a model that cannot answer');
      assert.doesNotMatch(result.stderr, /trying the next model or provider/);
      assert.doesNotMatch(result.stderr, /sk-e2e/, 'the key never reaches the logs');
    } finally {
      config.cleanup();
    }
  });

  it('shows warnings and progress with --verbose, and exits 0 when every message was answered', async () => {
    try {
      model.script({ status: 500 });
      const result = await runCli(['chat', '--verbose', '--config', config.file], { input: 'hello\n', env });
      assert.equal(result.code, 0, result.stderr);
      assert.equal(result.stdout, 'echo: hello\n');
      assert.match(result.stderr, /"level":40,.*"msg":"model call failed; retry 1 of 2 in \d+ ms"/);
      assert.match(result.stderr, /"msg":"turn done"/);
      assert.doesNotMatch(result.stderr, /"level":20/, 'info, not debug');
    } finally {
      config.cleanup();
    }
  });

  it('keeps logs off stdout and redacts secrets at debug level', async () => {
    try {
      const result = await runCli(['chat', '--config', config.file], { input: 'x\n', env: { ...env, SWITCHBOARD_LOG_LEVEL: 'debug' } });
      assert.equal(result.code, 0, result.stderr);
      assert.equal(result.stdout, 'echo: x\n');
      assert.match(result.stderr, /"msg":"turn done"/);
      assert.doesNotMatch(result.stderr, /sk-e2e/);
    } finally {
      config.cleanup();
    }
  });
});
