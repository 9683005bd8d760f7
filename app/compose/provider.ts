/**
 * Turns `[provider]` and `[[routes]]` into one Provider: each endpoint wrapped for retries,
 * key rotation and fallbacks, under a router for `hint:<name>` models. Anthropic and Gemini
 * code is imported only when configured. With `media`, each endpoint also gets photos (its
 * own `vision` setting and image limits); the image library itself loads on the first photo.
 */
import type { Logger } from 'pino';
import type { Config, EndpointConfig, RouteConfig } from '../../src/config/schema.ts';
import type { Provider } from '../../src/provider.ts';
import { createOpenAIProvider } from '../../src/providers/openai.ts';
import { createReliableProvider, type ReliableCandidate } from '../../src/providers/reliable.ts';
import { createRouterProvider } from '../../src/providers/router.ts';
import { IMAGE_LIMITS } from '../../src/media/image.ts';
import { createVisionMemory, createVisionProvider } from '../../src/media/vision.ts';
import type { WorkspaceImages } from '../../src/media/workspace-images.ts';

/** Photos for the model: where they are read from, and how many recent ones it sees. */
export interface ProviderMedia {
  readonly images: WorkspaceImages;
  readonly maxImages: number;
}

type Maker = (apiKey: string | undefined) => Provider;

/** A factory for one endpoint's provider, loading its module first. */
async function endpointMaker(endpoint: Pick<EndpointConfig, 'kind' | 'base_url' | 'model' | 'timeout_seconds' | 'temperature' | 'max_tokens' | 'tool_schema'>): Promise<Maker> {
  const common = {
    model: endpoint.model,
    timeoutMs: endpoint.timeout_seconds * 1000,
    ...(endpoint.temperature === undefined ? {} : { temperature: endpoint.temperature }),
    ...(endpoint.max_tokens === undefined ? {} : { maxTokens: endpoint.max_tokens }),
    ...(endpoint.base_url === undefined ? {} : { baseUrl: endpoint.base_url }),
  };
  const withKey = (apiKey: string | undefined) => (apiKey === undefined ? {} : { apiKey });
  switch (endpoint.kind) {
    case 'openai':
      return (apiKey) =>
        createOpenAIProvider({
          baseUrl: 'https://api.openai.com/v1',
          ...common,
          ...withKey(apiKey),
          schemaDialect: endpoint.tool_schema === 'conservative' ? 'conservative' : 'openai',
        });
    case 'anthropic': {
      const { createAnthropicProvider } = await import('../../src/providers/anthropic.ts');
      return (apiKey) => createAnthropicProvider({ ...common, ...withKey(apiKey) });
    }
    case 'gemini': {
      const { createGeminiProvider } = await import('../../src/providers/gemini.ts');
      return (apiKey) => createGeminiProvider({ ...common, ...withKey(apiKey) });
    }
  }
}

const keysOf = (endpoint: { api_key?: string | undefined; api_keys?: readonly string[] }): string[] => [
  ...new Set([...(endpoint.api_key === undefined ? [] : [endpoint.api_key]), ...(endpoint.api_keys ?? [])]),
];

async function candidate(label: string, endpoint: EndpointConfig, log: Logger, media: ProviderMedia | undefined): Promise<ReliableCandidate> {
  const make = await endpointMaker(endpoint);
  // One memory of refusing models per endpoint, shared by its keys.
  const memory = createVisionMemory();
  const withVision: Maker = media
    ? (apiKey) =>
        createVisionProvider(make(apiKey), {
          vision: endpoint.vision,
          model: endpoint.model,
          limits: IMAGE_LIMITS[endpoint.kind],
          images: media.images,
          maxImages: media.maxImages,
          memory,
          log,
        })
    : make;
  return { label, make: withVision, apiKeys: keysOf(endpoint), models: [endpoint.model, ...endpoint.fallback_models] };
}

export async function buildProvider(config: Config, log: Logger, media?: ProviderMedia): Promise<Provider> {
  const { provider } = config;
  const reliability = {
    maxRetries: provider.max_retries,
    maxRetryAfterMs: provider.retry_max_wait_seconds * 1000,
    log: log.child({ component: 'provider' }),
  };
  const main = createReliableProvider({
    ...reliability,
    candidates: [
      await candidate(provider.kind, provider, reliability.log, media),
      ...(await Promise.all(provider.fallbacks.map((fallback, index) => candidate(`fallback${index + 1}:${fallback.kind}`, fallback, reliability.log, media)))),
    ],
  });
  if (config.routes.length === 0) return main;
  const routes = new Map<string, { provider: Provider; model?: string }>();
  for (const route of config.routes) routes.set(route.hint, await routeTarget(route, main, reliability, media));
  return createRouterProvider({ fallback: main, routes });
}

/** A route without `kind` uses the main endpoint with its own model; with `kind`, an endpoint of its own. */
async function routeTarget(route: RouteConfig, main: Provider, reliability: { maxRetries: number; maxRetryAfterMs: number; log: Logger }, media: ProviderMedia | undefined) {
  if (route.kind === undefined) return { provider: main, model: route.model };
  const endpoint: EndpointConfig = {
    kind: route.kind,
    base_url: route.base_url,
    model: route.model,
    api_key: route.api_key,
    api_keys: [],
    timeout_seconds: route.timeout_seconds,
    temperature: undefined,
    max_tokens: undefined,
    tool_schema: 'auto',
    fallback_models: [],
    vision: route.vision,
  };
  return { provider: createReliableProvider({ ...reliability, candidates: [await candidate(`route:${route.hint}`, endpoint, reliability.log, media)] }), model: route.model };
}
