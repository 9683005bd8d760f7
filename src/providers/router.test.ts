import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ProviderError, type ChatRequest, type Provider } from '../provider.ts';
import { createRouterProvider } from './router.ts';

function recording(name: string): Provider & { requests: ChatRequest[] } {
  const requests: ChatRequest[] = [];
  return {
    name,
    requests,
    async chat(request) {
      requests.push(request);
      return { text: `from ${name}`, toolCalls: [] };
    },
  };
}

const request: ChatRequest = { system: 's', messages: [{ role: 'user', content: 'hi' }], tools: [] };
const signal = () => new AbortController().signal;

describe('router provider', () => {
  const main = recording('openai:gpt-4o');
  const fast = recording('groq:llama');
  const local = recording('ollama:qwen');
  const router = createRouterProvider({
    fallback: main,
    routes: new Map([
      ['fast', { provider: fast, model: 'llama-3.1-8b-instant' }],
      ['local', { provider: local }],
    ]),
  });

  it('is named after the default provider', () => {
    assert.equal(router.name, 'openai:gpt-4o');
  });

  it('sends a hint to its route with the route model', async () => {
    const response = await router.chat({ ...request, model: 'hint:fast' }, signal());
    assert.equal(response.text, 'from groq:llama');
    assert.equal(fast.requests.at(-1)!.model, 'llama-3.1-8b-instant');
    assert.equal(fast.requests.at(-1)!.system, 's');
  });

  it("drops the hint when the route has no model, so the provider's own is used", async () => {
    await router.chat({ ...request, model: 'hint:local' }, signal());
    const sent = local.requests.at(-1)!;
    assert.equal(sent.model, undefined);
    assert.equal('model' in sent, false);
  });

  it('passes anything else to the default unchanged', async () => {
    const plain = { ...request, model: 'gpt-4o-mini' };
    await router.chat(plain, signal());
    await router.chat(request, signal());
    assert.equal(main.requests[0], plain);
    assert.equal(main.requests[1], request);
  });

  it('rejects an unknown hint with a non-retryable error naming the known hints', async () => {
    await assert.rejects(router.chat({ ...request, model: 'hint:smart' }, signal()), (error: unknown) => {
      assert.ok(error instanceof ProviderError);
      assert.equal(error.status, 400);
      assert.equal(error.retryable, false);
      assert.match(error.message, /"smart".*hint:fast, hint:local/);
      return true;
    });
  });

  it('passes the signal through', async () => {
    let seen: AbortSignal | undefined;
    const probe: Provider = { name: 'probe', chat: async (_request, s) => ((seen = s), { text: '', toolCalls: [] }) };
    const controller = new AbortController();
    await createRouterProvider({ fallback: main, routes: new Map([['p', { provider: probe }]]) }).chat({ ...request, model: 'hint:p' }, controller.signal);
    assert.equal(seen, controller.signal);
  });

  it('validates hint names eagerly', () => {
    assert.throws(() => createRouterProvider({ fallback: main, routes: new Map([['hint:fast', { provider: fast }]]) }), /bare word/);
    assert.throws(() => createRouterProvider({ fallback: main, routes: new Map([['', { provider: fast }]]) }), /bare word/);
  });
});
