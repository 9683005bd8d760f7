import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ProviderError, type ChatMessage } from '../provider.ts';
import { anthropicError, startFakeAnthropic, type AnthropicBlock } from '../../test/fixtures/fake-anthropic.ts';
import { runProviderContract } from '../../test/contracts/provider.ts';
import { createAnthropicProvider } from './anthropic.ts';

const textOf = (content: string | AnthropicBlock[]): string =>
  typeof content === 'string'
    ? content
    : content
        .filter((block) => block.type === 'text')
        .map((block) => block.text)
        .join('');

runProviderContract('anthropic', async () => {
  const fake = await startFakeAnthropic();
  const make = (timeoutMs: number) => createAnthropicProvider({ baseUrl: fake.baseUrl, model: 'claude-test', apiKey: 'sk-ant-test', timeoutMs });
  return {
    provider: make(5000),
    withTimeout: make,
    script: (...steps) => fake.script(...steps),
    lastRequest: () => {
      const body = fake.requests.at(-1)!.body;
      return {
        system: body.system ?? '',
        messages: body.messages.map((m) => ({
          role: typeof m.content !== 'string' && m.content.some((block) => block.type === 'tool_result') ? 'tool' : m.role,
          content: textOf(m.content),
        })),
        tools: (body.tools ?? []).map((tool) => tool.name),
      };
    },
    close: () => fake.close(),
  };
});

describe('anthropic provider', () => {
  const signal = () => new AbortController().signal;

  it('sends the key, version, model, max_tokens and cleaned tool schemas', async () => {
    const fake = await startFakeAnthropic();
    try {
      const provider = createAnthropicProvider({ baseUrl: `${fake.baseUrl}/v1/`, model: 'claude-x', apiKey: 'sk-ant-secret', timeoutMs: 5000, temperature: 0.3 });
      assert.equal(provider.name, 'anthropic:claude-x');
      const parameters = { type: 'object', properties: { q: { type: 'string', minLength: 2 } }, required: ['q'], additionalProperties: false };
      const response = await provider.chat({ system: 'be brief', messages: [{ role: 'user', content: 'x' }], tools: [{ name: 'search', description: 'find', parameters }] }, signal());
      assert.equal(response.text, 'echo: x');
      assert.deepEqual(response.usage, { inputTokens: 10, outputTokens: 5 });
      const { body, headers } = fake.requests[0]!;
      assert.equal(headers['x-api-key'], 'sk-ant-secret');
      assert.equal(headers['anthropic-version'], '2023-06-01');
      assert.equal(headers.authorization, undefined);
      assert.equal(body.model, 'claude-x');
      assert.equal(body.max_tokens, 4096);
      assert.equal(body.temperature, 0.3);
      assert.equal(body.system, 'be brief');
      assert.deepEqual(body.tools, [{ name: 'search', description: 'find', input_schema: { type: 'object', properties: { q: { type: 'string' } }, required: ['q'], additionalProperties: false } }]);
      assert.throws(() => createAnthropicProvider({ model: 'm', timeoutMs: 1, maxTokens: 0 }), /maxTokens must be a positive integer, got 0/);
    } finally {
      await fake.close();
    }
  });

  it('merges turns so roles alternate, tool results first, and round-trips parallel tool calls', async () => {
    const fake = await startFakeAnthropic();
    try {
      const provider = createAnthropicProvider({ baseUrl: fake.baseUrl, model: 'm', apiKey: 'k', timeoutMs: 5000 });
      const history: ChatMessage[] = [
        { role: 'user', content: 'first' },
        { role: 'user', content: 'second' },
        { role: 'assistant', content: 'Let me look.', toolCalls: [{ id: 'toolu_a', name: 'read', arguments: '{"path":"a"}' }, { id: 'toolu_b', name: 'read', arguments: 'not json' }] },
        { role: 'tool', toolCallId: 'toolu_a', name: 'read', content: 'A' },
        { role: 'tool', toolCallId: 'toolu_b', name: 'read', content: '' },
        { role: 'user', content: 'and?' },
        { role: 'assistant', content: '' },
      ];
      await provider.chat({ system: '', messages: history, tools: [] }, signal());
      const { body } = fake.requests[0]!;
      assert.equal(body.system, undefined, 'an empty system prompt is left out');
      assert.deepEqual(body.messages, [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'first' },
            { type: 'text', text: 'second' },
          ],
        },
        {
          role: 'assistant',
          content: [
            { type: 'text', text: 'Let me look.' },
            { type: 'tool_use', id: 'toolu_a', name: 'read', input: { path: 'a' } },
            { type: 'tool_use', id: 'toolu_b', name: 'read', input: {} },
          ],
        },
        {
          role: 'user',
          content: [
            { type: 'tool_result', tool_use_id: 'toolu_a', content: 'A' },
            { type: 'tool_result', tool_use_id: 'toolu_b' },
            { type: 'text', text: 'and?' },
          ],
        },
      ]);
    } finally {
      await fake.close();
    }
  });

  it('classifies context overflow and errors sent inside a stream', async () => {
    const fake = await startFakeAnthropic();
    const provider = createAnthropicProvider({ baseUrl: fake.baseUrl, model: 'm', apiKey: 'k', timeoutMs: 5000 });
    const streamed = () => provider.chat({ system: 's', messages: [{ role: 'user', content: 'x' }], tools: [], onTextDelta: () => undefined }, signal());
    try {
      fake.script({ status: 400, body: JSON.stringify(anthropicError(400, 'prompt is too long: 210000 tokens > 200000 maximum')) });
      await assert.rejects(provider.chat({ system: 's', messages: [{ role: 'user', content: 'x' }], tools: [] }, signal()), (e: unknown) => e instanceof ProviderError && e.code === 'context_length' && !e.retryable);

      const overloaded = `event: message_start\ndata: {"type":"message_start","message":{"content":[],"usage":{"input_tokens":3,"output_tokens":1}}}\n\nevent: error\ndata: ${JSON.stringify(anthropicError(529, 'Overloaded'))}\n\n`;
      fake.script({ raw: overloaded });
      await assert.rejects(streamed(), (e: unknown) => e instanceof ProviderError && e.status === 529 && e.retryable && /Overloaded/.test(e.message));

      fake.script({ raw: 'event: message_start\ndata: {"type":"message_start","message":{"content":[]}}\n\nevent: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}\n\n' });
      await assert.rejects(streamed(), (e: unknown) => e instanceof ProviderError && e.retryable && /ended before the answer was complete/.test(e.message));
    } finally {
      await fake.close();
    }
  });

  it('reports streamed usage from message_start and message_delta', async () => {
    const fake = await startFakeAnthropic();
    try {
      const provider = createAnthropicProvider({ baseUrl: fake.baseUrl, model: 'm', apiKey: 'k', timeoutMs: 5000 });
      fake.script({ text: 'hi there' });
      const response = await provider.chat({ system: 's', messages: [{ role: 'user', content: 'x' }], tools: [], onTextDelta: () => undefined }, signal());
      assert.equal(fake.requests[0]!.body.stream, true);
      assert.deepEqual(response.usage, { inputTokens: 10, outputTokens: 5 });
    } finally {
      await fake.close();
    }
  });
});
