import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ProviderError } from '../provider.ts';
import { startFakeOpenAI } from '../../test/fixtures/fake-openai.ts';
import { runProviderContract } from '../../test/contracts/provider.ts';
import { createOpenAIProvider } from './openai.ts';

runProviderContract('openai', async () => {
  const fake = await startFakeOpenAI();
  const provider = createOpenAIProvider({ baseUrl: fake.baseUrl, model: 'test-model', apiKey: 'sk-test', timeoutMs: 5000 });
  return {
    provider,
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
