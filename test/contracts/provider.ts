/**
 * The provider contract: every Provider implementation, wired to a scripted peer speaking
 * its wire protocol, must normalise answers, tool calls and failures the same way.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ProviderError, type Provider } from '../../src/provider.ts';
import type { Step } from '../fixtures/fake-openai.ts';

export interface ProviderHarness {
  readonly provider: Provider;
  /** Queues scripted answers on the peer. */
  script(...steps: Step[]): void;
  /** The last request the peer received, normalised: system prompt, messages and tool names. */
  lastRequest(): { system: string; messages: Array<{ role: string; content: string | null }>; tools: string[] };
  /** A provider for the same peer with another per-request timeout. */
  withTimeout(timeoutMs: number): Provider;
  close(): Promise<void>;
}

const ask = (onTextDelta?: (delta: string) => void) => ({
  system: 's',
  messages: [{ role: 'user' as const, content: 'x' }],
  tools: [],
  ...(onTextDelta ? { onTextDelta } : {}),
});

async function failure(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => assert.fail('expected a failure'),
    (error: unknown) => error,
  );
}

export function runProviderContract(name: string, make: () => Promise<ProviderHarness>): void {
  describe(`provider contract: ${name}`, () => {
    let harness: ProviderHarness;
    before(async () => {
      harness = await make();
    });
    after(() => harness.close());
    const signal = () => new AbortController().signal;

    it('returns the text answer and sends system prompt, history and tools', async () => {
      harness.script({ text: 'Hello there' });
      const response = await harness.provider.chat(
        {
          system: 'be nice',
          messages: [
            { role: 'user', content: 'hi' },
            { role: 'assistant', content: 'hey' },
            { role: 'user', content: 'how are you?' },
          ],
          tools: [{ name: 'current_time', description: 'time', parameters: { type: 'object', properties: {} } }],
        },
        signal(),
      );
      assert.equal(response.text, 'Hello there');
      assert.deepEqual(response.toolCalls, []);
      const request = harness.lastRequest();
      assert.equal(request.system, 'be nice');
      assert.deepEqual(
        request.messages.map((m) => [m.role, m.content]),
        [
          ['user', 'hi'],
          ['assistant', 'hey'],
          ['user', 'how are you?'],
        ],
      );
      assert.deepEqual(request.tools, ['current_time']);
    });

    it('returns tool calls with their raw JSON arguments and round-trips tool results', async () => {
      harness.script({ toolCalls: [{ name: 'current_time', arguments: { timezone: 'UTC' }, id: 'call_1' }] });
      const response = await harness.provider.chat({ system: 's', messages: [{ role: 'user', content: 'time?' }], tools: [] }, signal());
      assert.equal(response.toolCalls.length, 1);
      assert.equal(response.toolCalls[0]!.name, 'current_time');
      assert.equal(response.toolCalls[0]!.id, 'call_1');
      assert.deepEqual(JSON.parse(response.toolCalls[0]!.arguments), { timezone: 'UTC' });

      harness.script({ text: 'It is noon.' });
      const final = await harness.provider.chat(
        {
          system: 's',
          messages: [
            { role: 'user', content: 'time?' },
            { role: 'assistant', content: '', toolCalls: response.toolCalls },
            { role: 'tool', toolCallId: 'call_1', name: 'current_time', content: '12:00' },
          ],
          tools: [],
        },
        signal(),
      );
      assert.equal(final.text, 'It is noon.');
      assert.deepEqual(
        harness.lastRequest().messages.map((m) => m.role),
        ['user', 'assistant', 'tool'],
      );
    });

    it('reports a rate limit as a retryable ProviderError with Retry-After', async () => {
      harness.script({ status: 429, headers: { 'retry-after': '7' } });
      const error = await harness.provider.chat({ system: 's', messages: [{ role: 'user', content: 'x' }], tools: [] }, signal()).then(
        () => assert.fail('expected a failure'),
        (e: unknown) => e,
      );
      assert.ok(error instanceof ProviderError);
      assert.equal(error.status, 429);
      assert.equal(error.retryAfterMs, 7000);
      assert.equal(error.retryable, true);
    });

    it('reports a bad request as a non-retryable ProviderError with the endpoint message', async () => {
      harness.script({ status: 400, body: JSON.stringify({ error: { message: 'model not found' } }) });
      await assert.rejects(
        harness.provider.chat({ system: 's', messages: [{ role: 'user', content: 'x' }], tools: [] }, signal()),
        (error: unknown) => error instanceof ProviderError && error.status === 400 && !error.retryable && /model not found/.test(error.message),
      );
    });

    it('reports a server error as retryable', async () => {
      harness.script({ status: 503 });
      await assert.rejects(
        harness.provider.chat({ system: 's', messages: [{ role: 'user', content: 'x' }], tools: [] }, signal()),
        (error: unknown) => error instanceof ProviderError && error.status === 503 && error.retryable,
      );
    });

    it('streams the text in several deltas that add up to the answer', async () => {
      harness.script({ text: 'Hello from a streamed answer' });
      const deltas: string[] = [];
      const response = await harness.provider.chat(ask((delta) => deltas.push(delta)), signal());
      assert.ok(deltas.length > 1, `more than one delta, got ${JSON.stringify(deltas)}`);
      assert.equal(deltas.join(''), response.text);
      assert.equal(response.text, 'Hello from a streamed answer');
      assert.deepEqual(response.toolCalls, []);
    });

    it('streams a tool call, arguments assembled whole', async () => {
      harness.script({ text: 'Checking.', toolCalls: [{ name: 'current_time', arguments: { timezone: 'Europe/Paris', precise: true }, id: 'call_7' }] });
      const deltas: string[] = [];
      const response = await harness.provider.chat(ask((delta) => deltas.push(delta)), signal());
      assert.equal(deltas.join(''), 'Checking.');
      assert.equal(response.text, 'Checking.');
      assert.equal(response.toolCalls.length, 1);
      assert.equal(response.toolCalls[0]!.id, 'call_7');
      assert.equal(response.toolCalls[0]!.name, 'current_time');
      assert.deepEqual(JSON.parse(response.toolCalls[0]!.arguments), { timezone: 'Europe/Paris', precise: true });
    });

    it('reports a failure the same way when streaming', async () => {
      harness.script({ status: 429, headers: { 'retry-after': '3' } });
      const error = await failure(harness.provider.chat(ask(() => undefined), signal()));
      assert.ok(error instanceof ProviderError);
      assert.equal(error.status, 429);
      assert.equal(error.retryAfterMs, 3000);
    });

    it('reports a rejected key as code auth, not retryable', async () => {
      harness.script({ status: 401 });
      const error = await failure(harness.provider.chat(ask(), signal()));
      assert.ok(error instanceof ProviderError);
      assert.equal(error.status, 401);
      assert.equal(error.code, 'auth');
      assert.equal(error.retryable, false);
    });

    it('gives up after its timeout with a retryable error, before and during a stream', async () => {
      const impatient = harness.withTimeout(200);
      harness.script({ text: 'too slow', delayMs: 2000 });
      let started = Date.now();
      const early = await failure(impatient.chat(ask(), signal()));
      assert.ok(early instanceof ProviderError && early.retryable && early.status === undefined, String(early));
      assert.match(early.message, /no answer within 200 ms/);
      assert.ok(Date.now() - started < 1500);

      harness.script({ text: 'a stream that stalls after its first pieces', deltaDelayMs: 2000 });
      started = Date.now();
      const late = await failure(impatient.chat(ask(() => undefined), signal()));
      assert.ok(late instanceof ProviderError && late.retryable, String(late));
      assert.ok(Date.now() - started < 1500);
    });

    it('stops a stream when the signal aborts', async () => {
      harness.script({ text: 'one two three four', deltas: ['one ', 'two ', 'three ', 'four'], deltaDelayMs: 300 });
      const abort = new AbortController();
      const deltas: string[] = [];
      const started = Date.now();
      const error = await failure(
        harness.provider.chat(
          ask((delta) => {
            deltas.push(delta);
            abort.abort(new Error('cancelled by test'));
          }),
          abort.signal,
        ),
      );
      assert.ok(!(error instanceof ProviderError), 'an abort is not a provider failure');
      assert.deepEqual(deltas, ['one ']);
      assert.ok(Date.now() - started < 1500);
    });

    describe('a misbehaving endpoint', () => {
      const json = { 'content-type': 'application/json' };
      const html = { 'content-type': 'text/html; charset=utf-8' };
      const page = '<!DOCTYPE html><html><head><title>Sign in - Corporate Proxy</title></head><body><form>login</form></body></html>';
      /** Each fails with a ProviderError whose message matches, retryable or not, streamed and not. */
      const cases: Array<{ what: string; step: Step; message: RegExp; retryable: boolean; streamOnly?: boolean; timeout?: boolean }> = [
        { what: 'hangs (accepts, never answers)', step: { fault: 'hang' }, message: /no answer within 300 ms \(the provider's timeout_seconds\)/, retryable: true, timeout: true },
        { what: 'resets the connection', step: { fault: 'reset' }, message: /unreachable: .*ECONNRESET.*connection was dropped/, retryable: true },
        { what: 'sends headers then stalls mid-body', step: { fault: 'stall', text: 'half an answer', events: 0 }, message: /stalled and was not complete within 300 ms/, retryable: true, timeout: true },
        { what: 'stalls mid-stream', step: { fault: 'stall', text: 'a streamed answer that stops half way' }, message: /stalled and was not complete within 300 ms/, retryable: true, timeout: true, streamOnly: true },
        { what: 'resets mid-body', step: { fault: 'cut', text: 'half an answer' }, message: /failed while answering: .*(ECONNRESET|terminated|other side closed)/, retryable: true },
        { what: 'answers 200 with broken JSON', step: { raw: '{"choices": [{"message": {"content": "hi"', headers: json }, message: /answered HTTP 200 with broken JSON/, retryable: false },
        { what: 'answers 200 with an HTML page', step: { raw: page, headers: html }, message: /answered HTTP 200 with an HTML page \("Sign in - Corporate Proxy"\) instead of JSON; check that base_url/, retryable: false },
        { what: 'answers 200 with JSON null', step: { raw: 'null', headers: json }, message: /answered HTTP 200 without a JSON object/, retryable: false },
        { what: 'answers 200 with JSON of another API', step: { raw: '{"result": "ok", "items": [1, 2]}', headers: json }, message: /answered HTTP 200 without .*check that provider kind and base_url/, retryable: false },
        { what: 'answers 502 with an HTML page', step: { status: 502, body: page.replace('Sign in - Corporate Proxy', '502 Bad Gateway'), headers: html }, message: /HTTP 502: an HTML page \("502 Bad Gateway"\)$/, retryable: true },
        { what: 'streams garbage', step: { raw: 'data: {"oops": tru\n\n' }, message: /streamed broken JSON/, retryable: false, streamOnly: true },
        { what: 'streams JSON null', step: { raw: 'data: null\n\n' }, message: /without a JSON object in a streamed event/, retryable: false, streamOnly: true },
      ];
      for (const { what, step, message, retryable, streamOnly, timeout } of cases) {
        for (const streamed of streamOnly ? [true] : [false, true]) {
          it(`fails clearly when it ${what}${streamed ? ' (streaming)' : ''}`, async () => {
            const provider = harness.withTimeout(300);
            harness.script(step);
            const started = performance.now();
            const error = await failure(provider.chat(ask(streamed ? () => undefined : undefined), signal()));
            assert.ok(error instanceof ProviderError, `a ProviderError, not ${String(error)}`);
            assert.match(error.message, message);
            assert.equal(error.retryable, retryable, error.message);
            if (timeout) assert.ok(performance.now() - started < 2000, 'within its timeout');
            // The next request is answered normally.
            harness.script({ text: 'fine again' });
            assert.equal((await provider.chat(ask(streamed ? () => undefined : undefined), signal())).text, 'fine again');
          });
        }
      }
    });

    it('stops waiting when the signal aborts', async () => {
      harness.script({ text: 'late', delayMs: 2000 });
      const abort = new AbortController();
      setTimeout(() => abort.abort(new Error('cancelled by test')), 50);
      const started = Date.now();
      await assert.rejects(harness.provider.chat({ system: 's', messages: [{ role: 'user', content: 'x' }], tools: [] }, abort.signal));
      assert.ok(Date.now() - started < 1500);
    });
  });
}
