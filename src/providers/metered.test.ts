import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ProviderError, type Provider } from '../provider.ts';
import type { ProviderErrorReason } from './metered.ts';
import { createMeteredProvider, errorReason } from './metered.ts';

const request = { system: '', messages: [{ role: 'user' as const, content: 'hi' }], tools: [] };

function recorder() {
  const calls: Array<[string, number, ProviderErrorReason | undefined]> = [];
  return { calls, meter: { providerCall: (provider: string, seconds: number, error?: ProviderErrorReason) => void calls.push([provider, seconds, error]) } };
}

describe('metered provider', () => {
  it('times successful calls under the label and passes the response through', async () => {
    const inner: Provider = { name: 'openai:gpt', chat: async () => ({ text: 'hello', toolCalls: [] }) };
    const { calls, meter } = recorder();
    let clock = 1000;
    const provider = createMeteredProvider(inner, { meter, now: () => (clock += 250) });
    assert.equal(provider.name, 'openai:gpt');
    assert.deepEqual(await provider.chat(request, new AbortController().signal), { text: 'hello', toolCalls: [] });
    assert.deepEqual(calls, [['openai:gpt', 0.25, undefined]]);
  });

  it('counts failures by reason and rethrows them unchanged', async () => {
    const error = new ProviderError('slow down', { status: 429 });
    const inner: Provider = { name: 'x', chat: async () => Promise.reject(error) };
    const { calls, meter } = recorder();
    const provider = createMeteredProvider(inner, { meter, label: 'groq' });
    await assert.rejects(provider.chat(request, new AbortController().signal), (thrown) => thrown === error);
    assert.equal(calls[0]![0], 'groq');
    assert.equal(calls[0]![2], 'rate_limited');
  });

  it('classifies errors into a few reasons', () => {
    const aborted = new AbortController();
    aborted.abort();
    const cases: Array<[unknown, ProviderErrorReason, AbortSignal?]> = [
      [new ProviderError('x', { status: 401 }), 'auth'],
      [new ProviderError('x', { code: 'auth', status: 400 }), 'auth'],
      [new ProviderError('x', { status: 503 }), 'server'],
      [new ProviderError('x', { status: 400 }), 'client'],
      [new ProviderError('x'), 'network'],
      [new ProviderError('x', { status: 400, code: 'context_length' }), 'context_length'],
      [new ProviderError('x', { status: 400, code: 'tools_unsupported' }), 'tools_unsupported'],
      [new TypeError('fetch failed'), 'network'],
      [new ProviderError('x', { status: 500 }), 'aborted', aborted.signal],
      [Object.assign(new Error('t'), { name: 'TimeoutError' }), 'aborted'],
    ];
    for (const [error, reason, signal] of cases) assert.equal(errorReason(error, signal), reason, String(error));
  });
});
