/**
 * The router decorator: a request whose model is `hint:<name>` (e.g. `hint:fast`, `hint:code`)
 * goes to the provider and model configured for that hint; every other request goes to the
 * default provider untouched.
 */
import { ProviderError, type ChatRequest, type ChatResponse, type Provider } from '../provider.ts';

const prefix = 'hint:';

export interface Route {
  readonly provider: Provider;
  /** Sent as `request.model`. Omitted = the route provider's own model. */
  readonly model?: string;
}

export interface RouterProviderOptions {
  /** Serves every request that carries no `hint:`. */
  readonly fallback: Provider;
  /** Hint name (without `hint:`) → route. */
  readonly routes: ReadonlyMap<string, Route>;
}

/**
 * @example
 * createRouterProvider({ fallback: main, routes: new Map([['fast', { provider: groq, model: 'llama-3.1-8b-instant' }]]) })
 *   .chat({ ...request, model: 'hint:fast' }, signal) // → groq with llama-3.1-8b-instant
 */
export function createRouterProvider(options: RouterProviderOptions): Provider {
  const { fallback, routes } = options;
  for (const [hint, route] of routes) {
    if (hint.trim() === '' || hint !== hint.trim() || hint.startsWith(prefix)) {
      throw new TypeError(`createRouterProvider: a hint name is a bare word like "fast", got ${JSON.stringify(hint)}`);
    }
    if (route.model === '') throw new TypeError(`createRouterProvider: route "${hint}" has an empty model; omit it to use the provider's own`);
  }
  return {
    name: fallback.name,
    chat(request: ChatRequest, signal: AbortSignal): Promise<ChatResponse> {
      if (!request.model?.startsWith(prefix)) return fallback.chat(request, signal);
      const hint = request.model.slice(prefix.length).trim();
      const route = routes.get(hint);
      if (!route) {
        const known = [...routes.keys()].map((name) => `${prefix}${name}`).join(', ') || 'none configured';
        // A status makes it non-retryable: asking again will not make the hint exist.
        return Promise.reject(new ProviderError(`unknown model hint "${hint}"; known hints: ${known}`, { status: 400 }));
      }
      const { model: _hint, ...rest } = request;
      return route.provider.chat(route.model === undefined ? rest : { ...rest, model: route.model }, signal);
    },
  };
}
