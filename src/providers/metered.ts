/**
 * The metered decorator: times every model call and counts failures by reason, around any
 * Provider. Wrap each endpoint (inside the reliable decorator) to see retries and fallbacks
 * per provider, or the whole composed provider to see what a turn waits for.
 */
import { ProviderError, type ChatRequest, type ChatResponse, type Provider } from '../provider.ts';

/** Why a model call failed, in a few values (a label must not take unbounded values). */
export type ProviderErrorReason = 'rate_limited' | 'auth' | 'server' | 'client' | 'network' | 'context_length' | 'tools_unsupported' | 'aborted';

/** Where the metered provider reports each call: the daemon's metrics (src/metrics.ts) implement it. */
export interface ProviderMeter {
  providerCall(provider: string, seconds: number, error?: ProviderErrorReason): void;
}

export interface MeteredProviderOptions {
  readonly meter: ProviderMeter;
  /** The `provider` label. @default the wrapped provider's name */
  readonly label?: string;
  /** Injectable for tests. @default performance.now */
  readonly now?: () => number;
}

/**
 * @example
 * createMeteredProvider(createOpenAIProvider(options), { meter: metrics, label: 'openai' })
 */
export function createMeteredProvider(inner: Provider, options: MeteredProviderOptions): Provider {
  const label = options.label ?? inner.name;
  if (label === '') throw new TypeError('createMeteredProvider: label must not be empty');
  const now = options.now ?? (() => performance.now());
  const { meter } = options;
  return {
    name: inner.name,
    async chat(request: ChatRequest, signal: AbortSignal): Promise<ChatResponse> {
      const started = now();
      try {
        const response = await inner.chat(request, signal);
        meter.providerCall(label, (now() - started) / 1000);
        return response;
      } catch (error) {
        meter.providerCall(label, (now() - started) / 1000, errorReason(error, signal));
        throw error;
      }
    },
  };
}

/** One of a few reasons, so the error counter's `reason` label stays bounded. */
export function errorReason(error: unknown, signal?: AbortSignal): ProviderErrorReason {
  if (signal?.aborted) return 'aborted';
  if (error instanceof ProviderError) {
    if (error.code === 'context_length') return 'context_length';
    if (error.code === 'tools_unsupported') return 'tools_unsupported';
    if (error.code === 'auth' || error.status === 401 || error.status === 403) return 'auth';
    if (error.status === 429) return 'rate_limited';
    if (error.status === undefined) return 'network';
    return error.status >= 500 ? 'server' : 'client';
  }
  if (error instanceof Error && (error.name === 'AbortError' || error.name === 'TimeoutError')) return 'aborted';
  return 'network';
}
