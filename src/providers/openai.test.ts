import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ProviderError } from '../provider.ts';
import { startFakeOpenAI } from '../../test/fixtures/fake-openai.ts';
import { runProviderContract } from '../../test/contracts/provider.ts';
import { createOpenAIProvider } from './openai.ts';

runProviderContract('openai', async () => {
  const fake = await startFakeOpenAI();
  const make = (timeoutMs: number) => createOpenAIProvider({ baseUrl: fake.baseUrl, model: 'test-model', apiKey: 'sk-test', timeoutMs });
  return {
    provider: make(5000),
    withTimeout: make,
    script: (...steps) => fake.script(...steps),
    lastRequest: () => {
      const body = fake.requests.at(-1)!.body;
      const [system, ...messages] = body.messages;
      return { system: system!.content ?? '', messages, tools: (body.tools ?? []).map((tool) => tool.function.name) };
    },
    close: () => fake.close(),
  };
});

describe('openai provider', () => {
  it('sends the key as a bearer token, the model, and no tools field when there are none', async () => {
    const fake = await startFakeOpenAI();
    try {
      const provider = createOpenAIProvider({ baseUrl: `${fake.baseUrl}/`, model: 'm1', apiKey: 'sk-secret', timeoutMs: 5000, temperature: 0.2 });
      await provider.chat({ system: 's', messages: [{ role: 'user', content: 'x' }], tools: [] }, new AbortController().signal);
      const request = fake.requests[0]!;
      assert.equal(request.headers.authorization, 'Bearer sk-secret');
      assert.equal(request.body.model, 'm1');
      assert.equal(request.body.tools, undefined);
      assert.equal((request.body as unknown as { temperature: number }).temperature, 0.2);
      const noKey = createOpenAIProvider({ baseUrl: fake.baseUrl, model: 'm1', timeoutMs: 5000 });
      await noKey.chat({ system: 's', messages: [{ role: 'user', content: 'x' }], tools: [] }, new AbortController().signal);
      assert.equal(fake.requests[1]!.headers.authorization, undefined);
    } finally {
      await fake.close();
    }
  });

  it('names the endpoint when it cannot be reached, and times out', async () => {
    const unreachable = createOpenAIProvider({ baseUrl: 'http://127.0.0.1:9/v1', model: 'm', timeoutMs: 2000 });
    await assert.rejects(
      unreachable.chat({ system: 's', messages: [{ role: 'user', content: 'x' }], tools: [] }, new AbortController().signal),
      (error: unknown) => error instanceof ProviderError && error.retryable && /127\.0\.0\.1:9\/v1\/chat\/completions unreachable/.test(error.message),
    );
    const fake = await startFakeOpenAI();
    try {
      fake.script({ text: 'slow', delayMs: 1000 });
      const impatient = createOpenAIProvider({ baseUrl: fake.baseUrl, model: 'm', timeoutMs: 100 });
      await assert.rejects(
        impatient.chat({ system: 's', messages: [{ role: 'user', content: 'x' }], tools: [] }, new AbortController().signal),
        /no answer within 100 ms/,
      );
    } finally {
      await fake.close();
    }
  });
});

describe('openai provider: failure codes', () => {
  const tool = { name: 'current_time', description: 'time', parameters: { type: 'object', properties: {} } };
  const codeFor = async (status: number, body: unknown, withTools = true): Promise<ProviderError> => {
    const fake = await startFakeOpenAI();
    try {
      fake.script({ status, body: typeof body === 'string' ? body : JSON.stringify(body) });
      const provider = createOpenAIProvider({ baseUrl: fake.baseUrl, model: 'm', timeoutMs: 5000 });
      const error = await provider.chat({ system: 's', messages: [{ role: 'user', content: 'x' }], tools: withTools ? [tool] : [] }, new AbortController().signal).catch((e: unknown) => e);
      assert.ok(error instanceof ProviderError);
      return error;
    } finally {
      await fake.close();
    }
  };

  it('detects a context overflow by error code or by message', async () => {
    const cases: Array<[number, unknown]> = [
      [400, { error: { message: 'too long', type: 'invalid_request_error', code: 'context_length_exceeded' } }],
      [400, { error: { message: "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens." } }],
      [400, { error: { message: 'the request exceeds the available context size, try increasing it' } }],
      [413, { error: 'Prompt has too many tokens' }],
    ];
    for (const [status, body] of cases) assert.equal((await codeFor(status, body)).code, 'context_length', JSON.stringify(body));
    assert.equal((await codeFor(429, { error: { message: 'Rate limit reached: too many tokens per minute' } })).code, undefined);
  });

  it('detects an endpoint that rejects native tools, only when tools were sent', async () => {
    const messages: Array<[number, unknown]> = [
      [400, { error: { message: 'registry.ollama.ai/library/gemma:2b does not support tools', type: 'api_error' } }],
      [404, { error: { message: 'No endpoints found that support tool use. Try disabling "current_time".', code: 404 } }],
      [400, { error: { message: '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set' } }],
      [400, { error: { message: 'deepseek-reasoner does not support Function Calling' } }],
      [422, { object: 'error', message: 'Function calling is not enabled for this model', type: 'invalid_request_error' }],
    ];
    for (const [status, body] of messages) assert.equal((await codeFor(status, body)).code, 'tools_unsupported', JSON.stringify(body));
    assert.equal((await codeFor(400, { error: { message: 'this model does not support tools' } }, false)).code, undefined);
    assert.equal((await codeFor(400, { error: { message: "Invalid 'tools[0].function.name': string does not match pattern" } })).code, undefined);
    assert.equal((await codeFor(500, { error: { message: 'tools not supported' } })).code, undefined);
  });

  it('reports 401 and 403 as auth, and quotes a nested or plain-text message', async () => {
    assert.equal((await codeFor(403, { error: { message: 'no access to model' } })).code, 'auth');
    const mistral = await codeFor(422, { object: 'error', message: { detail: [{ type: 'extra_forbidden', loc: ['body', 'x'] }] } });
    assert.match(mistral.message, /extra_forbidden/);
    assert.match((await codeFor(502, '<html>Bad gateway</html>')).message, /HTTP 502: an HTML page \("Bad gateway"\)/);
  });
});

describe('openai provider: tools and streams', () => {
  const signal = () => new AbortController().signal;
  const nested = {
    type: 'object',
    properties: { path: { type: 'string', pattern: '^/', minLength: 1 }, mode: { anyOf: [{ type: 'string', enum: ['r', 'w'] }, { type: 'null' }] } },
    required: ['path'],
    additionalProperties: false,
  };

  it('sends tool schemas as written, or cleaned with schemaDialect conservative', async () => {
    const fake = await startFakeOpenAI();
    try {
      const request = { system: 's', messages: [{ role: 'user' as const, content: 'x' }], tools: [{ name: 'open', description: 'open a file', parameters: nested }] };
      await createOpenAIProvider({ baseUrl: fake.baseUrl, model: 'm', timeoutMs: 5000 }).chat(request, signal());
      assert.deepEqual(fake.requests[0]!.body.tools![0]!.function.parameters, nested);
      await createOpenAIProvider({ baseUrl: fake.baseUrl, model: 'm', timeoutMs: 5000, schemaDialect: 'conservative' }).chat(request, signal());
      assert.deepEqual(fake.requests[1]!.body.tools![0]!.function.parameters, {
        type: 'object',
        properties: { path: { type: 'string' }, mode: { type: 'string', enum: ['r', 'w'] } },
        required: ['path'],
      });
      assert.equal(fake.requests[1]!.body.stream, undefined, 'no stream without onTextDelta');
    } finally {
      await fake.close();
    }
  });

  it('assembles tool calls from pieces, and reports usage when the server sends it', async () => {
    const fake = await startFakeOpenAI();
    const chunk = (delta: unknown, finish: string | null = null) => `data: ${JSON.stringify({ choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
    try {
      fake.script({
        raw:
          chunk({ role: 'assistant', content: null }) +
          chunk({ tool_calls: [{ index: 0, id: 'a', type: 'function', function: { name: 'first', arguments: '{"x":' } }] }) +
          chunk({ tool_calls: [{ index: 1, id: 'b', type: 'function', function: { name: 'second', arguments: '' } }] }) +
          chunk({ tool_calls: [{ index: 0, function: { arguments: '1}' } }] }) +
          chunk({}, 'tool_calls') +
          `data: ${JSON.stringify({ choices: [], usage: { prompt_tokens: 7, completion_tokens: 3 } })}\n\ndata: [DONE]\n\n`,
      });
      const deltas: string[] = [];
      const response = await createOpenAIProvider({ baseUrl: fake.baseUrl, model: 'm', timeoutMs: 5000 }).chat(
        { system: 's', messages: [{ role: 'user', content: 'x' }], tools: [], onTextDelta: (d) => deltas.push(d) },
        signal(),
      );
      assert.equal(fake.requests[0]!.body.stream, true);
      assert.deepEqual(deltas, []);
      assert.deepEqual(response.toolCalls, [
        { id: 'a', name: 'first', arguments: '{"x":1}' },
        { id: 'b', name: 'second', arguments: '{}' },
      ]);
      assert.deepEqual(response.usage, { inputTokens: 7, outputTokens: 3 });
    } finally {
      await fake.close();
    }
  });

  it('fails a stream that breaks off, or carries an error, and accepts a server that does not stream', async () => {
    const fake = await startFakeOpenAI();
    const provider = createOpenAIProvider({ baseUrl: fake.baseUrl, model: 'm', timeoutMs: 5000 });
    const streamed = (deltas: string[]) => provider.chat({ system: 's', messages: [{ role: 'user', content: 'x' }], tools: [], onTextDelta: (d) => deltas.push(d) }, signal());
    try {
      fake.script({ raw: `data: ${JSON.stringify({ choices: [{ index: 0, delta: { content: 'half an ans' } }] })}\n\n` });
      await assert.rejects(streamed([]), (e: unknown) => e instanceof ProviderError && e.retryable && /ended before the answer was complete/.test(e.message));

      fake.script({ raw: `data: ${JSON.stringify({ error: { message: 'upstream overloaded', code: 502 } })}\n\n` });
      await assert.rejects(streamed([]), (e: unknown) => e instanceof ProviderError && e.status === 502 && e.retryable && /upstream overloaded/.test(e.message));

      const whole = { choices: [{ message: { role: 'assistant', content: 'all at once' } }] };
      fake.script({ raw: JSON.stringify(whole), headers: { 'content-type': 'application/json' } });
      const deltas: string[] = [];
      assert.equal((await streamed(deltas)).text, 'all at once');
      assert.deepEqual(deltas, ['all at once']);
    } finally {
      await fake.close();
    }
  });
});
