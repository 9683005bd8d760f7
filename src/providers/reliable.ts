/**
 * The reliable decorator: retries with backoff and `Retry-After`, API-key rotation, fallback
 * models and fallback providers, around any Provider. The wrapped providers stay simple: they
 * make one call and throw a ProviderError saying what went wrong; every retry decision is here.
 */
import type { Logger } from 'pino';
import { ProviderError, type ChatRequest, type ChatResponse, type Provider } from '../provider.ts';
import { backoffDelay, sleep as defaultSleep } from '../backoff.ts';

/** One provider to try: the main one (first candidate) or a `[[provider.fallbacks]]` entry. */
export interface ReliableCandidate {
  /** For logs and the final error, e.g. "openai" or "groq". */
  readonly label: string;
  /** Builds the provider for one key (`undefined` when `apiKeys` is empty). Called once per key, lazily. */
  readonly make: (apiKey: string | undefined) => Provider;
  /** Keys rotated round-robin on 429 and skipped on auth errors. Empty = the endpoint needs no key. */
  readonly apiKeys: readonly string[];
  /**
   * First = primary model, rest = fallback models, sent as `request.model`.
   * Empty = one attempt with the made provider's own configured model.
   */
  readonly models: readonly string[];
}

export interface ReliableProviderOptions {
  /** Tried in order; at least one. */
  readonly candidates: readonly ReliableCandidate[];
  /** Retries per model after the first try, on retryable errors (429, 5xx, network); a call that timed out is retried once at most. @default 2 */
  readonly maxRetries?: number;
  /** Backoff before the first retry, doubling after each. @default 500 */
  readonly initialBackoffMs?: number;
  /** Backoff cap. @default 10000 */
  readonly maxBackoffMs?: number;
  /** A `Retry-After` longer than this is not waited for: the next key / model / candidate is tried instead. @default 30000 */
  readonly maxRetryAfterMs?: number;
  readonly log: Logger;
  /** Injectable for tests. @default sleep from src/backoff.ts */
  readonly sleep?: (ms: number, signal: AbortSignal) => Promise<void>;
  /** Injectable for tests (backoff jitter). @default Math.random */
  readonly random?: () => number;
}

interface Failure {
  readonly label: string;
  readonly model: string;
  readonly error: unknown;
}

interface CandidateState {
  readonly candidate: ReliableCandidate;
  /** Providers made so far, by key slot. */
  readonly made: Map<number, Provider>;
  /** Slot the next call starts with; moves on 429 and auth errors so load spreads across calls. */
  cursor: number;
}

/** Errors the agent itself handles (compact the history, switch to XML tools): never retried or failed over. */
const forCaller = new Set(['context_length', 'tools_unsupported']);

/**
 * Wraps `candidates` in one Provider. Per model: retryable failures are retried with backoff
 * (at least `Retry-After`), a 429 first rotates to the candidate's next key, an auth error
 * skips to the next key, any other 4xx gives up on the model. Then the candidate's next model,
 * then the next candidate. `request.model` replaces the first candidate's primary model only.
 *
 * @example
 * createReliableProvider({ log, candidates: [
 *   { label: 'openai', apiKeys: [k1, k2], models: ['gpt-4o', 'gpt-4o-mini'], make: (apiKey) => createOpenAIProvider({ ...opts, apiKey }) },
 *   { label: 'ollama', apiKeys: [], models: ['llama3.1'], make: () => createOpenAIProvider(local) },
 * ] })
 */
export function createReliableProvider(options: ReliableProviderOptions): Provider {
  const maxRetries = nonNegative('maxRetries', options.maxRetries ?? 2, true);
  const backoff = { initialMs: nonNegative('initialBackoffMs', options.initialBackoffMs ?? 500), maxMs: nonNegative('maxBackoffMs', options.maxBackoffMs ?? 10_000) };
  const maxRetryAfterMs = nonNegative('maxRetryAfterMs', options.maxRetryAfterMs ?? 30_000);
  const wait = options.sleep ?? defaultSleep;
  const random = options.random ?? Math.random;
  const log = options.log;
  if (options.candidates.length === 0) throw new TypeError('createReliableProvider: candidates must not be empty');
  for (const candidate of options.candidates) validate(candidate);
  const states: CandidateState[] = options.candidates.map((candidate) => ({ candidate, made: new Map(), cursor: 0 }));
  const allKeys = options.candidates.flatMap((candidate) => candidate.apiKeys);

  const providerFor = (state: CandidateState, slot: number): Provider => {
    let provider = state.made.get(slot);
    if (!provider) {
      provider = state.candidate.make(state.candidate.apiKeys[slot]);
      state.made.set(slot, provider);
    }
    return provider;
  };

  /**
   * Tries one model of one candidate; resolves with the response, or undefined to move on.
   * `last`: no model or candidate comes after this one (its failure is the caller's to report).
   */
  async function tryModel(state: CandidateState, model: string | undefined, request: ChatRequest, signal: AbortSignal, failures: Failure[], last: boolean): Promise<ChatResponse | undefined> {
    const { label, apiKeys } = state.candidate;
    const slots = Math.max(1, apiKeys.length);
    const authFailed = new Set<number>();
    let limited = new Set<number>();
    let slot = state.cursor % slots;
    let retries = 0;
    let timeouts = 0;
    for (let attempt = 1; ; attempt++) {
      signal.throwIfAborted();
      let emitted = false;
      const { model: _requested, onTextDelta, ...rest } = request;
      const attemptRequest: ChatRequest = {
        ...rest,
        ...(model === undefined ? {} : { model }),
        ...(onTextDelta
          ? {
              onTextDelta: (delta: string) => {
                emitted = true;
                onTextDelta(delta);
              },
            }
          : {}),
      };
      try {
        return await providerFor(state, slot).chat(attemptRequest, signal);
      } catch (error) {
        // Aborted: stop. Text already shown: a silent retry would show it twice — fail, saying which provider it was.
        if (signal.aborted) throw error;
        if (emitted) throw summarise([{ label, model: model ?? '(default)', error }], allKeys);
        const failure = error instanceof ProviderError ? error : undefined;
        if (failure?.code !== undefined && forCaller.has(failure.code)) throw error;
        failures.push({ label, model: model ?? '(default)', error });
        const context = { provider: label, model: model ?? '(default)', attempt, status: failure?.status, code: failure?.code, keySlot: apiKeys.length > 1 ? slot + 1 : undefined };
        const reason = redact(error instanceof Error ? error.message : String(error), allKeys);
        // The last one is not logged here: the caller gets the summary error and reports it once.
        const moveOn = (why: string): undefined =>
          last
            ? void log.debug({ ...context, error: reason }, `model call failed (${why}); no other model or provider to try`)
            : void log.warn({ ...context, error: reason }, `model call failed (${why}); trying the next model or provider`);

        if (!failure) return moveOn('not a provider error');
        if (failure.code === 'auth' || failure.status === 401 || failure.status === 403) {
          authFailed.add(slot);
          const next = nextSlot(slot, slots, authFailed);
          if (next === undefined) return moveOn('no key accepted');
          log.warn({ ...context, error: reason }, 'model call failed (auth); trying the next key');
          slot = state.cursor = next;
          continue;
        }
        if (!failure.retryable) return moveOn('not retryable');
        if (failure.status === 429) {
          limited.add(slot);
          const next = nextSlot(slot, slots, new Set([...authFailed, ...limited]));
          if (next !== undefined) {
            log.warn({ ...context, error: reason }, 'model call rate-limited; trying the next key');
            slot = state.cursor = next;
            continue;
          }
          limited = new Set(); // every usable key is limited: back off, then start a new round
        }
        if (failure.retryAfterMs !== undefined && failure.retryAfterMs > maxRetryAfterMs) return moveOn(`Retry-After ${failure.retryAfterMs} ms is too long`);
        if (retries >= maxRetries) return moveOn(`${retries} retries used`);
        // A hang costs a whole timeout per try: it is retried once, not maxRetries times, so at the
        // defaults (2 × 120 s) a hanging endpoint fails the turn with its own error, inside the
        // 300 s turn timeout, and the next model or provider still gets its turn.
        if (timedOut(failure) && timeouts++ >= 1) return moveOn('timed out twice');
        const delayMs = Math.max(backoffDelay(retries, backoff, random), failure.retryAfterMs ?? 0);
        retries++;
        log.warn({ ...context, delayMs, error: reason }, `model call failed; retry ${retries} of ${maxRetries} in ${delayMs} ms`);
        await wait(delayMs, signal);
        if (failure.status === 429) slot = state.cursor = nextSlot(slot, slots, authFailed) ?? slot;
      }
    }
  }

  const primary = options.candidates[0]!;
  const fallbacks = options.candidates.length - 1;
  return {
    name: `${primary.label}:${primary.models[0] ?? 'default'}${fallbacks > 0 ? ` (+${fallbacks} fallback${fallbacks > 1 ? 's' : ''})` : ''}`,
    async chat(request: ChatRequest, signal: AbortSignal): Promise<ChatResponse> {
      const failures: Failure[] = [];
      for (const [index, state] of states.entries()) {
        const models = modelsToTry(state.candidate, index === 0 ? request.model : undefined);
        for (const [position, model] of models.entries()) {
          const last = index === states.length - 1 && position === models.length - 1;
          const response = await tryModel(state, model, request, signal, failures, last);
          if (response) return response;
        }
      }
      throw summarise(failures, allKeys);
    },
  };
}

/** Whether the call ran out of its own timeout (a hang or a stall), as opposed to failing fast. */
function timedOut(error: ProviderError): boolean {
  return error.cause instanceof Error && error.cause.name === 'TimeoutError';
}

/** The candidate's models, with `override` (the request's model) in place of the primary. */
function modelsToTry(candidate: ReliableCandidate, override: string | undefined): Array<string | undefined> {
  const models: Array<string | undefined> = candidate.models.length > 0 ? [...candidate.models] : [undefined];
  if (override === undefined) return models;
  return [override, ...models.slice(1).filter((model) => model !== override)];
}

/** The slot after `from` (round-robin) that is not excluded, or undefined. */
function nextSlot(from: number, slots: number, excluded: ReadonlySet<number>): number | undefined {
  for (let step = 1; step <= slots; step++) {
    const slot = (from + step) % slots;
    if (!excluded.has(slot)) return slot;
  }
  return undefined;
}

/**
 * One error listing every attempt, consecutive repeats folded (or, when one model failed the same
 * way every time, that error and the count); it keeps the last error's status and code.
 */
function summarise(failures: readonly Failure[], keys: readonly string[]): ProviderError {
  const lines: Array<{ text: string; count: number }> = [];
  for (const failure of failures) {
    const text = `${failure.label}/${failure.model} ${describeFailure(failure.error)}`;
    const previous = lines.at(-1);
    if (previous?.text === text) previous.count++;
    else lines.push({ text, count: 1 });
  }
  const last = failures.at(-1)?.error;
  const lastError = last instanceof ProviderError ? last : undefined;
  const attempts = lines.map((line) => (line.count > 1 ? `${line.text} ×${line.count}` : line.text)).join('; ');
  const lastMessage = redact(last instanceof Error ? last.message : String(last), keys);
  // One model failing the same way each time: its error says it all.
  const only = lines.length === 1 ? failures[0] : undefined;
  const message = only
    ? `${lastMessage} (${only.label}/${only.model}, ${failures.length} attempt${failures.length > 1 ? 's' : ''})`
    : `every model attempt failed (${failures.length}): ${attempts}. Last error: ${lastMessage}`;
  return new ProviderError(message, {
    status: lastError?.status,
    retryAfterMs: lastError?.retryAfterMs,
    code: lastError?.code,
    cause: last,
  });
}

function describeFailure(error: unknown): string {
  if (!(error instanceof ProviderError)) return 'error';
  const what = error.status === undefined ? 'network' : `HTTP ${error.status}`;
  return error.code ? `${what} (${error.code})` : what;
}

/** Endpoints sometimes echo the key in an error message; logs and errors never carry it. */
function redact(text: string, keys: readonly string[]): string {
  return keys.reduce((out, key) => (key.length >= 4 ? out.split(key).join('[redacted]') : out), text);
}

function nonNegative(name: string, value: number, integer = false): number {
  if (!Number.isFinite(value) || value < 0 || (integer && !Number.isInteger(value))) {
    throw new TypeError(`createReliableProvider: ${name} must be a non-negative ${integer ? 'integer' : 'number'}, got ${String(value)}`);
  }
  return value;
}

function validate(candidate: ReliableCandidate): void {
  if (!candidate.label) throw new TypeError(`createReliableProvider: every candidate needs a label, got ${JSON.stringify(candidate.label)}`);
  if (candidate.apiKeys.some((key) => typeof key !== 'string' || key === '')) throw new TypeError(`createReliableProvider: candidate "${candidate.label}" has an empty API key`);
  if (candidate.models.some((model) => typeof model !== 'string' || model === '')) {
    throw new TypeError(`createReliableProvider: candidate "${candidate.label}" has an empty model name in ${JSON.stringify(candidate.models)}`);
  }
}
