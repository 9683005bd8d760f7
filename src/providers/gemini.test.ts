import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ProviderError } from '../provider.ts';
import { geminiError, startFakeGemini, type GeminiRecordedRequest } from '../../test/fixtures/fake-gemini.ts';
import { runProviderContract } from '../../test/contracts/provider.ts';
import { createGeminiProvider } from './gemini.ts';

runProviderContract('gemini', async () => {
  const fake = await startFakeGemini();
  const make = (timeoutMs: number) => createGeminiProvider({ baseUrl: fake.baseUrl, model: 'gemini-test', apiKey: 'g-test', timeoutMs });
  return {
    provider: make(5000),
    withTimeout: make,
    script: (...steps) => fake.script(...steps),
    lastRequest: () => {
      const body = fake.requests.at(-1)!.body;
      return {
        system: (body.systemInstruction?.parts ?? []).map((part) => part.text).join(''),
        messages: body.contents.map((content) => ({
          role: content.role === 'model' ? 'assistant' : content.parts.some((part) => part.functionResponse) ? 'tool' : 'user',
          content: content.parts.map((part) => part.text ?? '').join(''),
        })),
        tools: (body.tools ?? []).flatMap((tool) => tool.functionDeclarations.map((declaration) => declaration.name)),
      };
    },
    close: () => fake.close(),
  };
});

describe('gemini provider', () => {
  const signal = () => new AbortController().signal;
  const parameters = {
    $schema: 'http://json-schema.org/draft-07/schema#',
    type: 'object',
    properties: {
      path: { type: 'string', minLength: 1, description: 'File path.' },
      lines: { anyOf: [{ type: 'integer', exclusiveMinimum: 0 }, { type: 'null' }], default: null },
      tags: { type: 'array' },
    },
    required: ['path'],
    additionalProperties: false,
  };

  it('sends the key in a header, the system instruction, generation config and cleaned schemas', async () => {
    const fake = await startFakeGemini();
    try {
      const provider = createGeminiProvider({ baseUrl: `${fake.baseUrl}/`, model: 'gemini-2.5-flash', apiKey: 'g-secret', timeoutMs: 5000, temperature: 0.1, maxTokens: 256 });
      assert.equal(provider.name, 'gemini:gemini-2.5-flash');
      const tools = [
        { name: 'read', description: 'read a file', parameters },
        { name: 'now', description: 'the time', parameters: { type: 'object', properties: {} } },
      ];
      const response = await provider.chat({ system: 'be brief', messages: [{ role: 'user', content: 'x' }], tools }, signal());
      assert.equal(response.text, 'echo: x');
      assert.deepEqual(response.usage, { inputTokens: 10, outputTokens: 5 });
      const { body, headers, model } = fake.requests[0]!;
      assert.equal(model, 'gemini-2.5-flash');
      assert.equal(headers['x-goog-api-key'], 'g-secret');
      assert.deepEqual(body.systemInstruction, { parts: [{ text: 'be brief' }] });
      assert.deepEqual(body.generationConfig, { temperature: 0.1, maxOutputTokens: 256 });
      assert.deepEqual(body.tools, [
        {
          functionDeclarations: [
            {
              name: 'read',
              description: 'read a file',
              parameters: {
                type: 'object',
                properties: { path: { type: 'string', description: 'File path.' }, lines: { type: 'integer', nullable: true }, tags: { type: 'array', items: { type: 'string' } } },
                required: ['path'],
              },
            },
            { name: 'now', description: 'the time' },
          ],
        },
      ]);
    } finally {
      await fake.close();
    }
  });

  it('sends tool calls as functionCall parts and results as functionResponse parts, merging turns', async () => {
    const fake = await startFakeGemini();
    try {
      const provider = createGeminiProvider({ baseUrl: fake.baseUrl, model: 'gemini-2.0-flash', apiKey: 'k', timeoutMs: 5000 });
      fake.script({ toolCalls: [{ name: 'read', arguments: { path: 'a' } }, { name: 'read', arguments: { path: 'b' } }] });
      const first = await provider.chat({ system: '', messages: [{ role: 'user', content: 'read a and b' }], tools: [] }, signal());
      assert.equal(fake.requests[0]!.body.systemInstruction, undefined, 'an empty system prompt is left out');
      assert.equal(first.toolCalls.length, 2);
      assert.notEqual(first.toolCalls[0]!.id, first.toolCalls[1]!.id, 'generated ids are distinct');
      assert.match(first.toolCalls[0]!.id, /^call_\d+$/);
      assert.deepEqual(JSON.parse(first.toolCalls[1]!.arguments), { path: 'b' });

      await provider.chat(
        {
          system: 's',
          messages: [
            { role: 'user', content: 'read a and b' },
            { role: 'assistant', content: '', toolCalls: first.toolCalls },
            { role: 'tool', toolCallId: first.toolCalls[0]!.id, name: 'read', content: 'A' },
            { role: 'tool', toolCallId: first.toolCalls[1]!.id, name: 'read', content: 'B' },
          ],
          tools: [],
        },
        signal(),
      );
      const contents: GeminiRecordedRequest['body']['contents'] = fake.requests[1]!.body.contents;
      assert.deepEqual(contents, [
        { role: 'user', parts: [{ text: 'read a and b' }] },
        { role: 'model', parts: [{ functionCall: { name: 'read', args: { path: 'a' } } }, { functionCall: { name: 'read', args: { path: 'b' } } }] },
        { role: 'user', parts: [{ functionResponse: { name: 'read', response: { content: 'A' } } }, { functionResponse: { name: 'read', response: { content: 'B' } } }] },
      ]);
    } finally {
      await fake.close();
    }
  });

  it('sends a Gemini 3 signature back with its call, and a stand-in for calls it never signed', async () => {
    const fake = await startFakeGemini({ thoughtSignatures: true });
    try {
      const provider = createGeminiProvider({ baseUrl: fake.baseUrl, model: 'gemini-3-pro-preview', apiKey: 'k', timeoutMs: 5000 });
      fake.script({ toolCalls: [{ name: 'now', arguments: {} }] }, { text: 'noon' }, { text: 'ok' });
      const first = await provider.chat({ system: 's', messages: [{ role: 'user', content: 'time?' }], tools: [] }, signal());
      const history = [
        { role: 'user' as const, content: 'time?' },
        { role: 'assistant' as const, content: '', toolCalls: first.toolCalls },
        { role: 'tool' as const, toolCallId: first.toolCalls[0]!.id, name: 'now', content: '12:00' },
      ];
      assert.equal((await provider.chat({ system: 's', messages: history, tools: [] }, signal())).text, 'noon');
      assert.equal(fake.requests[1]!.body.contents[1]!.parts[0]!.thoughtSignature, 'sig-1');

      const restarted = createGeminiProvider({ baseUrl: fake.baseUrl, model: 'gemini-3-pro-preview', apiKey: 'k', timeoutMs: 5000 });
      assert.equal((await restarted.chat({ system: 's', messages: history, tools: [] }, signal())).text, 'ok');
      assert.equal(fake.requests[2]!.body.contents[1]!.parts[0]!.thoughtSignature, 'skip_thought_signature_validator');
    } finally {
      await fake.close();
    }
  });

  it('classifies a bad key, context overflow and rate limits with their retry delay', async () => {
    const fake = await startFakeGemini();
    const ask = (apiKey = 'k') => createGeminiProvider({ baseUrl: fake.baseUrl, model: 'g', apiKey, timeoutMs: 5000 }).chat({ system: 's', messages: [{ role: 'user', content: 'x' }], tools: [] }, signal());
    try {
      fake.script({ text: 'never sent' });
      await assert.rejects(ask('bad-key'), (e: unknown) => e instanceof ProviderError && e.status === 400 && e.code === 'auth' && !e.retryable);

      fake.script({ status: 400, body: JSON.stringify(geminiError(400, 'The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).')) });
      await assert.rejects(ask(), (e: unknown) => e instanceof ProviderError && e.code === 'context_length');

      const quota = geminiError(429, 'You exceeded your current quota.', [{ '@type': 'type.googleapis.com/google.rpc.RetryInfo', retryDelay: '13s' }]);
      fake.script({ status: 429, body: JSON.stringify(quota) });
      await assert.rejects(ask(), (e: unknown) => e instanceof ProviderError && e.retryable && e.retryAfterMs === 13_000);
    } finally {
      await fake.close();
    }
  });

  it('keeps thoughts out of the text, and fails on a blocked prompt or an empty safety stop', async () => {
    const fake = await startFakeGemini();
    const provider = createGeminiProvider({ baseUrl: fake.baseUrl, model: 'g', apiKey: 'k', timeoutMs: 5000 });
    const streamed = (deltas: string[]) => provider.chat({ system: 's', messages: [{ role: 'user', content: 'x' }], tools: [], onTextDelta: (d) => deltas.push(d) }, signal());
    const chunk = (value: unknown) => `data: ${JSON.stringify(value)}\r\n\r\n`;
    try {
      fake.script({
        raw:
          chunk({ candidates: [{ content: { role: 'model', parts: [{ text: 'pondering…', thought: true }] } }] }) +
          chunk({ candidates: [{ content: { role: 'model', parts: [{ text: 'The answer.' }] }, finishReason: 'STOP' }], usageMetadata: { promptTokenCount: 4, candidatesTokenCount: 2, thoughtsTokenCount: 3 } }),
      });
      const deltas: string[] = [];
      const response = await streamed(deltas);
      assert.equal(fake.requests[0]!.stream, true);
      assert.deepEqual(deltas, ['The answer.']);
      assert.deepEqual(response, { text: 'The answer.', toolCalls: [], usage: { inputTokens: 4, outputTokens: 5 } });

      fake.script({ raw: chunk({ promptFeedback: { blockReason: 'SAFETY' } }) });
      await assert.rejects(streamed([]), (e: unknown) => e instanceof ProviderError && !e.retryable && /refused the prompt: SAFETY/.test(e.message));

      fake.script({ raw: JSON.stringify({ candidates: [{ content: { parts: [] }, finishReason: 'RECITATION' }] }), headers: { 'content-type': 'application/json' } });
      await assert.rejects(provider.chat({ system: 's', messages: [{ role: 'user', content: 'x' }], tools: [] }, signal()), /stopped without an answer: RECITATION/);

      fake.script({ raw: chunk({ candidates: [{ content: { parts: [{ text: 'cut' }] } }] }) });
      await assert.rejects(streamed([]), (e: unknown) => e instanceof ProviderError && e.retryable && /ended before/.test(e.message));
    } finally {
      await fake.close();
    }
  });
});
