import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { pino } from 'pino';
import { ProviderError, type ChatRequest, type ChatResponse, type Provider } from '../provider.ts';
import { sleep as realSleep } from '../backoff.ts';
import { startFakeOpenAI } from '../../test/fixtures/fake-openai.ts';
import { testLogger } from '../../test/support/log.ts';
import { createOpenAIProvider } from './openai.ts';
import { createReliableProvider, type ReliableCandidate, type ReliableProviderOptions } from './reliable.ts';

/** One scripted answer: a response text, an error to throw, or a function of the request. */
type Step = string | Error | ((request: ChatRequest, signal: AbortSignal) => Promise<ChatResponse>);

interface Call {
  readonly label: string;
  readonly key: string | undefined;
  readonly model: string | undefined;
}

/** A candidate whose providers (one per key) answer from one shared script and record every call. */
function scripted(label: string, options: { keys?: string[]; models?: string[]; calls: Call[]; steps: Step[] }): ReliableCandidate & { made: Array<string | undefined> } {
  const made: Array<string | undefined> = [];
  return {
    label,
    apiKeys: options.keys ?? [],
    models: options.models ?? ['m'],
    made,
    make: (key): Provider => {
      made.push(key);
      return {
        name: `${label}:${key}`,
        async chat(request, signal) {
          options.calls.push({ label, key, model: request.model });
          const step = options.steps.shift() ?? 'default answer';
          if (typeof step === 'function') return step(request, signal);
          if (step instanceof Error) throw step;
          request.onTextDelta?.(step);
          return { text: step, toolCalls: [] };
        },
      };
    },
  };
}

const http = (status: number, extra: { retryAfterMs?: number; code?: 'auth' | 'context_length' | 'tools_unsupported' } = {}) =>
  new ProviderError(`HTTP ${status}`, { status, ...extra });
const network = () => new ProviderError('model endpoint unreachable: ECONNREFUSED');

const request: ChatRequest = { system: 's', messages: [{ role: 'user', content: 'hi' }], tools: [] };
const signal = () => new AbortController().signal;

function reliable(candidates: ReliableCandidate[], extra: Partial<ReliableProviderOptions> = {}) {
  const sleeps: number[] = [];
  const provider = createReliableProvider({
    candidates,
    log: testLogger(),
    random: () => 0.5, // no jitter: delays are exactly initial × 2^n
    sleep: async (ms) => void sleeps.push(ms),
    ...extra,
  });
  return { provider, sleeps };
}

describe('reliable provider', () => {
  it('retries retryable failures with growing delays, then answers', async () => {
    const calls: Call[] = [];
    const { provider, sleeps } = reliable([scripted('main', { calls, steps: [http(500), network(), http(503), 'ok'] })], { maxRetries: 3 });
    const response = await provider.chat(request, signal());
    assert.equal(response.text, 'ok');
    assert.equal(calls.length, 4);
    assert.deepEqual(sleeps, [500, 1000, 2000]);
  });

  it('retries a call that timed out once, not maxRetries times, then moves on to the fallback', async () => {
    const timeout = () => new ProviderError('model endpoint unreachable: no answer within 120000 ms', { cause: new DOMException('timed out', 'TimeoutError') });
    const calls: Call[] = [];
    const { provider, sleeps } = reliable(
      [scripted('main', { calls, steps: [timeout(), timeout(), 'never'] }), scripted('backup', { calls, models: ['b'], steps: ['from backup'] })],
      { maxRetries: 5 },
    );
    assert.equal((await provider.chat(request, signal())).text, 'from backup');
    assert.deepEqual(calls.map((call) => call.label), ['main', 'main', 'backup']);
    assert.deepEqual(sleeps, [500]);
    // Fast failures still get every retry.
    const calls2: Call[] = [];
    const fast = reliable([scripted('main', { calls: calls2, steps: [timeout(), network(), network(), 'ok'] })], { maxRetries: 3 });
    assert.equal((await fast.provider.chat(request, signal())).text, 'ok');
    assert.equal(calls2.length, 4);
  });

  it('caps the backoff and gives up after maxRetries', async () => {
    const calls: Call[] = [];
    const { provider, sleeps } = reliable([scripted('main', { calls, steps: [http(502), http(502), http(502), http(502), 'never'] })], {
      maxRetries: 3,
      initialBackoffMs: 400,
      maxBackoffMs: 1000,
    });
    await assert.rejects(provider.chat(request, signal()), (error: unknown) => error instanceof ProviderError && error.status === 502);
    assert.equal(calls.length, 4);
    assert.deepEqual(sleeps, [400, 800, 1000]);
  });

  it('waits at least Retry-After, but moves on when it is longer than maxRetryAfterMs', async () => {
    const calls: Call[] = [];
    const { provider, sleeps } = reliable([scripted('main', { calls, steps: [http(503, { retryAfterMs: 3000 }), 'ok'] })]);
    assert.equal((await provider.chat(request, signal())).text, 'ok');
    assert.deepEqual(sleeps, [3000]);

    const calls2: Call[] = [];
    const capped = reliable(
      [scripted('main', { calls: calls2, steps: [http(429, { retryAfterMs: 120_000 })] }), scripted('backup', { calls: calls2, models: ['b'], steps: ['from backup'] })],
      { maxRetryAfterMs: 60_000 },
    );
    assert.equal((await capped.provider.chat(request, signal())).text, 'from backup');
    assert.deepEqual(capped.sleeps, []);
    assert.deepEqual(calls2.map((call) => call.label), ['main', 'backup']);
  });

  it('does not retry other 4xx', async () => {
    const calls: Call[] = [];
    const { provider, sleeps } = reliable([scripted('main', { keys: ['k1', 'k2'], calls, steps: [http(400), 'never'] })]);
    await assert.rejects(provider.chat(request, signal()), (error: unknown) => error instanceof ProviderError && error.status === 400 && !error.retryable);
    assert.equal(calls.length, 1);
    assert.deepEqual(sleeps, []);
  });

  it('rotates keys on 429 without waiting, and the next call starts on the key that worked', async () => {
    const calls: Call[] = [];
    const candidate = scripted('main', { keys: ['k1', 'k2', 'k3'], calls, steps: [http(429), 'a', 'b', http(429), 'c', 'd'] });
    const { provider, sleeps } = reliable([candidate]);
    for (let i = 0; i < 4; i++) await provider.chat(request, signal());
    assert.deepEqual(
      calls.map((call) => call.key),
      ['k1', 'k2', 'k2', 'k2', 'k3', 'k3'],
    );
    assert.deepEqual(sleeps, []);
    assert.deepEqual(candidate.made, ['k1', 'k2', 'k3'], 'one provider made per key, reused across calls');
  });

  it('backs off once every key is rate-limited, then carries on round-robin', async () => {
    const calls: Call[] = [];
    const { provider, sleeps } = reliable([scripted('main', { keys: ['k1', 'k2'], calls, steps: [http(429), http(429, { retryAfterMs: 1500 }), 'ok'] })]);
    assert.equal((await provider.chat(request, signal())).text, 'ok');
    assert.deepEqual(
      calls.map((call) => call.key),
      ['k1', 'k2', 'k1'],
    );
    assert.deepEqual(sleeps, [1500]);
  });

  it('skips to the next key on an auth error, without retrying it', async () => {
    const calls: Call[] = [];
    const { provider, sleeps } = reliable([scripted('main', { keys: ['bad', 'good'], calls, steps: [http(401, { code: 'auth' }), 'ok'] })]);
    assert.equal((await provider.chat(request, signal())).text, 'ok');
    assert.deepEqual(
      calls.map((call) => call.key),
      ['bad', 'good'],
    );
    assert.deepEqual(sleeps, []);
  });

  it('tries the fallback model, then the fallback provider; request.model replaces only the first primary', async () => {
    const calls: Call[] = [];
    const { provider } = reliable(
      [
        scripted('main', { models: ['m1', 'm2'], calls, steps: [http(404), http(403, { code: 'auth' })] }),
        scripted('backup', { models: ['b1'], calls, steps: ['from backup'] }),
      ],
      { maxRetries: 0 },
    );
    const response = await provider.chat({ ...request, model: 'custom' }, signal());
    assert.equal(response.text, 'from backup');
    assert.deepEqual(
      calls.map((call) => `${call.label}/${call.model}`),
      ['main/custom', 'main/m2', 'backup/b1'],
    );
    assert.equal(provider.name, 'main:m1 (+1 fallback)');
  });

  it("with no models configured, sends no model so the made provider's own is used", async () => {
    const calls: Call[] = [];
    const { provider } = reliable([scripted('local', { models: [], calls, steps: ['ok'] })]);
    await provider.chat(request, signal());
    assert.deepEqual(calls, [{ label: 'local', key: undefined, model: undefined }]);
    assert.equal(provider.name, 'local:default');
  });

  for (const code of ['context_length', 'tools_unsupported'] as const) {
    it(`rethrows ${code} at once, with no retry or failover`, async () => {
      const calls: Call[] = [];
      const failure = http(400, { code });
      const { provider } = reliable([
        scripted('main', { keys: ['k1', 'k2'], models: ['m1', 'm2'], calls, steps: [failure] }),
        scripted('backup', { calls, steps: ['never'] }),
      ]);
      await assert.rejects(provider.chat(request, signal()), (error: unknown) => error === failure);
      assert.equal(calls.length, 1);
    });
  }

  it('stops at once when the signal aborts, during a call or a backoff', async () => {
    const calls: Call[] = [];
    const controller = new AbortController();
    const aborting: Step = async () => {
      controller.abort(new Error('user cancelled'));
      throw network();
    };
    const { provider } = reliable([scripted('main', { calls, steps: [aborting, 'never'] }), scripted('backup', { calls, steps: ['never'] })]);
    await assert.rejects(provider.chat(request, controller.signal), /unreachable/);
    assert.equal(calls.length, 1);

    const calls2: Call[] = [];
    const controller2 = new AbortController();
    const duringSleep = createReliableProvider({
      candidates: [scripted('main', { calls: calls2, steps: [http(503), 'never'] })],
      log: testLogger(),
      sleep: (ms, sleepSignal) => {
        controller2.abort(new Error('shutting down'));
        return realSleep(ms, sleepSignal);
      },
    });
    await assert.rejects(duringSleep.chat(request, controller2.signal), /shutting down/);
    assert.equal(calls2.length, 1);
    await assert.rejects(duringSleep.chat(request, controller2.signal), /shutting down/);
    assert.equal(calls2.length, 1, 'an already aborted signal makes no call');
  });

  it('passes text deltas through, and does not retry silently once text was shown', async () => {
    const calls: Call[] = [];
    const deltas: string[] = [];
    const halfway: Step = async (req) => {
      req.onTextDelta?.('Hel');
      throw network();
    };
    const { provider } = reliable([scripted('main', { calls, steps: [http(503), 'Hello', halfway, 'never'] })]);
    const response = await provider.chat({ ...request, onTextDelta: (delta) => deltas.push(delta) }, signal());
    assert.equal(response.text, 'Hello');
    assert.deepEqual(deltas, ['Hello'], 'the failed attempt emitted nothing, so it was retried');
    await assert.rejects(provider.chat({ ...request, onTextDelta: (delta) => deltas.push(delta) }, signal()), /unreachable/);
    assert.equal(calls.length, 3);
    assert.deepEqual(deltas, ['Hello', 'Hel']);
  });

  it('throws one error summarising every attempt, with the last status, and never logs a key', async () => {
    const lines: string[] = [];
    const calls: Call[] = [];
    const provider = createReliableProvider({
      candidates: [
        scripted('main', { keys: ['sk-main-secret'], models: ['m1'], calls, steps: [http(503), http(503), http(503)] }),
        scripted('backup', { models: ['b1'], calls, steps: [new ProviderError('HTTP 429: key sk-main-secret is over quota', { status: 429, retryAfterMs: 99_000 })] }),
      ],
      log: pino({ level: 'warn' }, { write: (line: string) => void lines.push(line) }),
      sleep: async () => {},
    });
    await assert.rejects(provider.chat(request, signal()), (error: unknown) => {
      assert.ok(error instanceof ProviderError);
      assert.equal(error.status, 429);
      assert.match(error.message, /main\/m1 HTTP 503 ×3; backup\/b1 HTTP 429/);
      assert.doesNotMatch(error.message, /sk-main-secret/);
      return true;
    });
    assert.equal(lines.length, 3, 'two retries and the one failover logged; the last failure is the caller to report');
    assert.match(lines[2]!, /trying the next model or provider/);
    for (const line of lines) {
      const entry = JSON.parse(line) as Record<string, unknown>;
      assert.equal(entry.level, 40);
      assert.ok(entry.provider && entry.model && entry.attempt, line);
    }
    assert.doesNotMatch(lines.join('\n'), /sk-main-secret/);
  });

  it('with nothing to fall back to, logs its retries but never "trying the next model or provider"', async () => {
    const lines: string[] = [];
    const calls: Call[] = [];
    const provider = createReliableProvider({
      candidates: [scripted('only', { models: ['m1'], calls, steps: [network(), network(), network()] })],
      log: pino({ level: 'warn' }, { write: (line: string) => void lines.push(line) }),
      sleep: async () => {},
      random: () => 0.5,
    });
    await assert.rejects(provider.chat(request, signal()), { name: 'ProviderError', message: 'model endpoint unreachable: ECONNREFUSED (only/m1, 3 attempts)' });
    assert.equal(calls.length, 3);
    assert.deepEqual(
      lines.map((line) => (JSON.parse(line) as { msg: string }).msg),
      ['model call failed; retry 1 of 2 in 500 ms', 'model call failed; retry 2 of 2 in 1000 ms'],
    );
  });

  it('validates its options eagerly', () => {
    const calls: Call[] = [];
    assert.throws(() => createReliableProvider({ candidates: [], log: testLogger() }), /candidates must not be empty/);
    assert.throws(() => createReliableProvider({ candidates: [scripted('x', { calls, steps: [] })], maxRetries: -1, log: testLogger() }), /maxRetries .* got -1/);
    assert.throws(() => createReliableProvider({ candidates: [scripted('x', { calls, steps: [], models: [''] })], log: testLogger() }), /empty model name/);
  });

  it('over HTTP: a 429 moves the next request to the second key', async () => {
    const fake = await startFakeOpenAI();
    try {
      fake.script({ status: 429, headers: { 'retry-after': '0' } }, { text: 'hello' });
      const provider = createReliableProvider({
        candidates: [{ label: 'openai', apiKeys: ['sk-one', 'sk-two'], models: ['test-model'], make: (apiKey) => createOpenAIProvider({ baseUrl: fake.baseUrl, model: 'test-model', apiKey, timeoutMs: 5000 }) }],
        log: testLogger(),
      });
      const response = await provider.chat(request, signal());
      assert.equal(response.text, 'hello');
      assert.equal(fake.requests.length, 2);
      assert.equal(fake.requests[0]!.headers.authorization, 'Bearer sk-one');
      assert.equal(fake.requests[1]!.headers.authorization, 'Bearer sk-two');
      assert.equal(fake.requests[1]!.body.model, 'test-model');
    } finally {
      await fake.close();
    }
  });
});
