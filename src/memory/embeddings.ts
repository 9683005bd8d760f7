/**
 * An EmbeddingProvider over any OpenAI-compatible `/embeddings` endpoint (OpenAI, Ollama,
 * LM Studio, vLLM, llama.cpp server…): texts go out in batches, vectors come back in order.
 */
import type { EmbeddingProvider } from '../memory.ts';
import { ProviderError } from '../provider.ts';
import { endpointMessage, parseJson } from '../endpoint/http.ts';
import { createEndpointClient, type EndpointClient, type EndpointResponse } from '../endpoint/client.ts';

export interface OpenAIEmbeddingsOptions {
  /** Up to and including the version, e.g. `https://api.openai.com/v1` or `http://127.0.0.1:11434/v1`. */
  readonly baseUrl: string;
  /** e.g. `text-embedding-3-small`, `nomic-embed-text`. */
  readonly model: string;
  /** Sent as `Authorization: Bearer …` when set (local servers need none). */
  readonly apiKey?: string;
  /** Per request (one batch), including reading the answer. @default 30000 */
  readonly timeoutMs?: number;
  /** Texts per request. @default 64 */
  readonly batchSize?: number;
  /** Asks for vectors of this length (models that support shortening, e.g. text-embedding-3-*). Unset: the model's own. */
  readonly dimensions?: number;
  /** The HTTP client (its connection pool); absent = the embedder makes its own. */
  readonly client?: EndpointClient;
}

/**
 * Embeds through `POST {baseUrl}/embeddings`. Failures reject with a ProviderError naming the
 * endpoint (its `status` and `retryable` tell a caller whether to try again later).
 *
 * The name is `openai:<model>`, or `openai:<model>@<dimensions>` when `dimensions` is set:
 * the name keys the embedding cache, and vectors shortened to another length must never be
 * mixed with the old ones.
 *
 * @example createOpenAIEmbeddings({ baseUrl: 'http://127.0.0.1:11434/v1', model: 'nomic-embed-text' })
 */
export function createOpenAIEmbeddings(options: OpenAIEmbeddingsOptions): EmbeddingProvider {
  const { model, apiKey, dimensions } = options;
  const timeoutMs = options.timeoutMs ?? 30_000;
  const batchSize = options.batchSize ?? 64;
  if (typeof model !== 'string' || model.trim() === '') throw new TypeError(`embeddings: model must be a non-empty string, got ${JSON.stringify(model)}`);
  if (!(timeoutMs > 0)) throw new TypeError(`embeddings: timeoutMs must be a positive number, got ${String(timeoutMs)}`);
  if (!Number.isInteger(batchSize) || batchSize < 1) throw new TypeError(`embeddings: batchSize must be a positive integer, got ${String(batchSize)}`);
  if (dimensions !== undefined && (!Number.isInteger(dimensions) || dimensions < 1)) {
    throw new TypeError(`embeddings: dimensions must be a positive integer, got ${String(dimensions)}`);
  }
  const url = endpointUrl(options.baseUrl);
  const client = options.client ?? createEndpointClient();
  const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json' };
  if (apiKey) headers.authorization = `Bearer ${apiKey}`;

  async function embedBatch(input: readonly string[], signal: AbortSignal | undefined): Promise<Float32Array[]> {
    const deadline = AbortSignal.timeout(timeoutMs);
    const combined = signal ? AbortSignal.any([signal, deadline]) : deadline;
    const body = JSON.stringify({ model, input, ...(dimensions === undefined ? {} : { dimensions }) });
    const send = (): Promise<EndpointResponse> => client.post(url, { headers, body, signal: combined });
    let text: string;
    let status: number;
    try {
      // A kept-alive connection the server has since closed fails before any answer; embedding
      // is idempotent, so one fresh connection is worth a try before calling the service down.
      const response = await send().catch((error: unknown) => (staleConnection(error) && !combined.aborted ? send() : Promise.reject(error)));
      status = response.status;
      text = await response.text();
    } catch (error) {
      if (signal?.aborted) throw error; // the caller's own cancellation is not a service failure
      const reason = deadline.aborted ? `gave no answer within ${timeoutMs} ms` : `unreachable: ${describe(error)}`;
      throw new ProviderError(`embedding endpoint ${url} ${reason}`, { cause: error });
    }
    const parsed = parseJson(text);
    if (status < 200 || status > 299) {
      const message = endpointMessage(parsed) ?? (text.slice(0, 300) || '(empty body)');
      throw new ProviderError(`embedding endpoint ${url} answered HTTP ${status}: ${message}`, {
        status,
        ...(status === 401 || status === 403 ? { code: 'auth' as const } : {}),
      });
    }
    return vectorsOf(parsed, input.length, (problem) => new ProviderError(`embedding endpoint ${url} answered ${problem}`, { status }));
  }

  return {
    name: dimensions === undefined ? `openai:${model}` : `openai:${model}@${dimensions}`,
    async embed(texts, signal) {
      const vectors: Float32Array[] = [];
      for (let start = 0; start < texts.length; start += batchSize) {
        signal?.throwIfAborted();
        vectors.push(...(await embedBatch(texts.slice(start, start + batchSize), signal)));
      }
      const length = vectors[0]?.length;
      const odd = vectors.find((vector) => vector.length !== length);
      if (odd) throw new ProviderError(`embedding endpoint ${url} answered vectors of different lengths (${length} and ${odd.length})`);
      if (dimensions !== undefined && length !== undefined && length !== dimensions) {
        throw new ProviderError(`embedding endpoint ${url} answered ${length}-dimensional vectors, but ${dimensions} were asked for (does model ${model} support \`dimensions\`?)`);
      }
      return vectors;
    },
  };
}

/** `{baseUrl}/embeddings`, validated now so a typo fails at start-up rather than at the first recall. */
function endpointUrl(baseUrl: string): string {
  let parsed: URL;
  try {
    parsed = new URL(baseUrl);
  } catch {
    throw new TypeError(`embeddings: baseUrl must be an http(s) URL, got ${JSON.stringify(baseUrl)}`);
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
    throw new TypeError(`embeddings: baseUrl must be an http(s) URL, got ${JSON.stringify(baseUrl)}`);
  }
  return `${baseUrl.replace(/\/+$/, '')}/embeddings`;
}

/** The vectors of an OpenAI `list` answer, ordered by `index`; `fail` builds the error for a malformed one. */
function vectorsOf(parsed: unknown, expected: number, fail: (problem: string) => Error): Float32Array[] {
  const data = (parsed as { data?: unknown } | undefined)?.data;
  if (!Array.isArray(data)) throw fail('without a `data` list (not an OpenAI-compatible embeddings API?)');
  if (data.length !== expected) throw fail(`${data.length} vectors for ${expected} inputs`);
  const vectors = new Array<Float32Array | undefined>(expected);
  data.forEach((item: unknown, position) => {
    const { index = position, embedding } = (item ?? {}) as { index?: unknown; embedding?: unknown };
    if (typeof index !== 'number' || !Number.isInteger(index) || index < 0 || index >= expected || vectors[index]) {
      throw fail(`a missing, repeated or out-of-range index ${JSON.stringify(index)}`);
    }
    if (!Array.isArray(embedding) || embedding.length === 0 || !embedding.every((x) => typeof x === 'number' && Number.isFinite(x))) {
      throw fail(`an embedding that is not a list of numbers at index ${index}`);
    }
    vectors[index] = Float32Array.from(embedding as number[]);
  });
  return vectors as Float32Array[];
}

function staleConnection(error: unknown): boolean {
  const code = ((error as { cause?: { code?: unknown } } | undefined)?.cause)?.code;
  return code === 'UND_ERR_SOCKET' || code === 'ECONNRESET';
}

/** `ECONNREFUSED` rather than the client's bare "fetch failed" (client.ts keeps fetch's shapes); other failures by their message. */
function describe(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const cause = error.cause as { code?: unknown; message?: unknown; errors?: Array<{ code?: unknown }> } | undefined;
  const codes = [cause?.code, ...(Array.isArray(cause?.errors) ? cause.errors.map((inner) => inner.code) : [])];
  const system = codes.find((code): code is string => typeof code === 'string' && /^E[A-Z]+$/.test(code));
  if (system) return system;
  return typeof cause?.message === 'string' && cause.message !== '' ? cause.message : error.message;
}
