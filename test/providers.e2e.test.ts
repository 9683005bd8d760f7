/**
 * The daemon talking to each provider kind (scripted local peers speaking the real wire
 * formats), and surviving a flaky model through retries and a fallback endpoint.
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { startFakeAnthropic } from './fixtures/fake-anthropic.ts';
import { startFakeGemini } from './fixtures/fake-gemini.ts';
import { startFakeOpenAI } from './fixtures/fake-openai.ts';
import { runCli, tempConfig } from './support/cli.ts';

const env = { TEST_MODEL_KEY: 'k' };

function configFor(kind: string, baseUrl: string, extra = ''): ReturnType<typeof tempConfig> {
  const config = tempConfig(baseUrl);
  writeFileSync(
    config.file,
    `[provider]\nkind = "${kind}"\nbase_url = "${baseUrl}"\nmodel = "test-model"\napi_key = "\${TEST_MODEL_KEY}"\n${extra}[tools]\nenabled = ["current_time"]\n[channels.terminal]\nuser = "ada"\n`,
  );
  return config;
}

describe('providers through the daemon', () => {
  it('anthropic: a tool call and an answer over the Messages API', async () => {
    const fake = await startFakeAnthropic();
    const config = configFor('anthropic', fake.baseUrl);
    try {
      fake.script({ toolCalls: [{ name: 'current_time', arguments: {} }] }, { text: 'It is now.' });
      const result = await runCli(['chat', '--config', config.file], { input: 'time?\n', env });
      assert.equal(result.code, 0, result.stderr);
      assert.equal(result.stdout, 'It is now.\n');
      assert.equal(fake.requests.length, 2);
      assert.equal(fake.requests[0]!.headers['x-api-key'], 'k');
    } finally {
      config.cleanup();
      await fake.close();
    }
  });

  it('gemini: a tool call and an answer over generateContent', async () => {
    const fake = await startFakeGemini();
    const config = configFor('gemini', fake.baseUrl);
    try {
      fake.script({ toolCalls: [{ name: 'current_time', arguments: {} }] }, { text: 'Gemini says now.' });
      const result = await runCli(['chat', '--config', config.file], { input: 'time?\n', env });
      assert.equal(result.code, 0, result.stderr);
      assert.equal(result.stdout, 'Gemini says now.\n');
      assert.equal(fake.requests.length, 2);
    } finally {
      config.cleanup();
      await fake.close();
    }
  });

  it('retries a failing model, then falls back to another endpoint, and the user just gets an answer', async () => {
    const main = await startFakeOpenAI();
    const backup = await startFakeOpenAI();
    const config = configFor(
      'openai',
      main.baseUrl,
      `max_retries = 1\n[[provider.fallbacks]]\nkind = "openai"\nbase_url = "${backup.baseUrl}"\nmodel = "backup-model"\n`,
    );
    try {
      const down = { status: 503 };
      main.script(down, down);
      backup.fallback = () => ({ text: 'from the backup' });
      const result = await runCli(['chat', '--config', config.file], { input: 'hello\n', env });
      assert.equal(result.code, 0, result.stderr);
      assert.equal(result.stdout, 'from the backup\n');
      assert.equal(main.requests.length, 2, 'one try and one retry on the main endpoint');
      assert.equal(backup.requests[0]!.body.model, 'backup-model');
    } finally {
      config.cleanup();
      await main.close();
      await backup.close();
    }
  });

  it('falls back to XML tool calls by itself when the endpoint rejects native tools', async () => {
    const fake = await startFakeOpenAI();
    const config = configFor('openai', fake.baseUrl);
    try {
      let call = 0;
      fake.fallback = (request) => {
        if (request.body.tools) return { status: 400, body: '{"error":{"message":"tools is not supported by this model"}}' };
        call++;
        if (call === 1) return { text: 'Checking. <tool_call>{"name": "current_time", "arguments": {"timezone": "UTC"}}</tool_call>' };
        const result = request.body.messages.at(-1)!.content ?? '';
        return { text: `Per the clock: ${/\d\d:\d\d:\d\d/.exec(result)?.[0] ?? 'unknown'}` };
      };
      // --verbose: the switch is a warning, and chat shows warnings only when asked.
      const result = await runCli(['chat', '--verbose', '--config', config.file], { input: 'time?\nand now?\n', env });
      assert.equal(result.code, 0, result.stderr);
      const lines = result.stdout.trim().split('\n');
      assert.match(lines[0]!, /^Per the clock: \d\d:\d\d:\d\d$/);
      assert.doesNotMatch(result.stdout, /tool_call/);
      assert.match(result.stderr, /switching to XML tool calls/);
      assert.equal(fake.requests.filter((r) => r.body.tools).length, 1, 'native tools were tried once, then never again');
      assert.match(fake.requests[1]!.body.messages[0]!.content ?? '', /<tool_call>/, 'the tools are described in the system prompt');
    } finally {
      config.cleanup();
      await fake.close();
    }
  });

  it('rotates to the next API key when one is rate-limited', async () => {
    const fake = await startFakeOpenAI();
    const config = configFor('openai', fake.baseUrl, 'api_keys = ["second-key"]\n');
    try {
      fake.script({ status: 429, headers: { 'retry-after': '0' } });
      const result = await runCli(['chat', '--config', config.file], { input: 'hi\n', env });
      assert.equal(result.code, 0, result.stderr);
      assert.equal(result.stdout, 'echo: hi\n');
      assert.deepEqual(
        fake.requests.map((r) => r.headers.authorization),
        ['Bearer k', 'Bearer second-key'],
      );
    } finally {
      config.cleanup();
      await fake.close();
    }
  });
});
