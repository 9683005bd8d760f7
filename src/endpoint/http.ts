/**
 * HTTP plumbing for calling a model endpoint, shared by the providers (chat), the embedder
 * (src/memory) and transcription and vision (src/media): a JSON POST with timeout and
 * cancellation, reading bodies and SSE streams under the same deadline, and turning failures
 * into ProviderErrors that carry status, Retry-After and a code. It sits below all three so
 * none of them imports another's folder (docs/architecture.md).
 */
import { ProviderError, type ProviderErrorCode } from '../provider.ts';
import type { EndpointClient, EndpointResponse } from './client.ts';
import { readSse, type SseEvent } from './sse.ts';

/** What is read of an answer: the endpoint client's response (a fetch `Response` fits too). */
type Answer = Pick<EndpointResponse, 'status' | 'headers' | 'text'>;

/** One request to a model endpoint, and what its failures are reported with. */
export interface EndpointCall {
  readonly url: string;
  readonly timeoutMs: number;
  /** The caller's: its abort passes through as it is. */
  readonly signal: AbortSignal;
  /** `signal` plus the timeout (see abort.ts `deadline`), disposed by the caller; absent = made per request. */
  readonly deadline?: AbortSignal;
}

/**
 * The body of a 2xx answer as a JSON object. Anything else — an HTML page (a proxy's login or
 * error page, a web site instead of the API), broken JSON, JSON that is not an object — is a
 * non-retryable ProviderError (the status is the 2xx) saying what came back and what to check.
 */
export async function readJsonObject(call: EndpointCall, response: Answer): Promise<{ readonly body: Record<string, unknown>; readonly text: string }> {
  const text = await readText(call, response);
  if (isHtml(response, text)) {
    throw new ProviderError(
      `model endpoint ${call.url} answered HTTP ${response.status} with ${describeBody(response, text)} instead of JSON; check that base_url is the model API (e.g. https://api.openai.com/v1), not a web page, proxy or login portal`,
      { status: response.status },
    );
  }
  const parsed = parseJson(text);
  if (parsed === undefined) {
    throw new ProviderError(`model endpoint ${call.url} answered HTTP ${response.status} with broken JSON: ${excerpt(text)}; the server (or a proxy in front of it) is misbehaving`, { status: response.status });
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw wrongShape(call, response.status, 'a JSON object', text);
  return { body: parsed as Record<string, unknown>, text };
}

/**
 * An `{ "error": … }` body that came with a 2xx (some gateways do that): its own numeric code
 * when it has one (a 502 inside is retryable), else the 2xx.
 */
export function errorInBody(call: EndpointCall, status: number, body: Record<string, unknown>): ProviderError | undefined {
  if (body.error === undefined || body.error === null) return undefined;
  const code = (body.error as { code?: unknown }).code;
  const inner = typeof code === 'number' && code >= 400 && code < 600 ? code : status;
  return new ProviderError(`model endpoint ${call.url} answered HTTP ${status} with an error: ${endpointMessage(body) ?? JSON.stringify(body.error).slice(0, 300)}`, { status: inner });
}

/** A stream that ended without its closing event: retryable, like a dropped connection. */
export function cutShort(call: EndpointCall): ProviderError {
  return new ProviderError(`model endpoint ${call.url}: the stream ended before the answer was complete; the server (or a proxy in front of it) cut it off`);
}

export const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

/** One streamed event's data as a JSON object, or a ProviderError like readJsonObject's. */
export function eventObject(call: EndpointCall, status: number, data: string): Record<string, unknown> {
  const parsed = parseJson(data);
  if (parsed === undefined) throw new ProviderError(`model endpoint ${call.url} streamed broken JSON: ${excerpt(data)}; the server (or a proxy in front of it) is misbehaving`, { status });
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw wrongShape(call, status, 'a JSON object in a streamed event', data);
  return parsed as Record<string, unknown>;
}

/**
 * A 2xx answer that is JSON but not this API's (`expected` says what was missing): usually
 * base_url points at a server speaking another API than `kind` says. Not retryable.
 */
export function wrongShape(call: EndpointCall, status: number, expected: string, text: string): ProviderError {
  return new ProviderError(
    `model endpoint ${call.url} answered HTTP ${status} without ${expected}: ${excerpt(text)}; check that provider kind and base_url name the same API`,
    { status },
  );
}

/**
 * POSTs `body` (JSON unless it is already bytes, e.g. a multipart form with its own
 * content-type in `headers`) through `client`. Network failures and the timeout become
 * retryable ProviderErrors; the caller's abort passes through.
 */
export async function postJson(client: EndpointClient, call: EndpointCall, headers: Record<string, string>, body: unknown): Promise<EndpointResponse> {
  try {
    return await client.post(call.url, {
      headers: { 'content-type': 'application/json', ...headers },
      body: body instanceof Uint8Array ? body : JSON.stringify(body),
      signal: call.deadline ?? AbortSignal.any([call.signal, AbortSignal.timeout(call.timeoutMs)]),
    });
  } catch (error) {
    throw transportFailure(call, error, 'unreachable');
  }
}

export async function readText(call: EndpointCall, response: Answer): Promise<string> {
  try {
    return await response.text();
  } catch (error) {
    throw transportFailure(call, error, 'failed while answering');
  }
}

/** The body as Server-Sent Events; a broken or timed-out stream becomes a retryable ProviderError. */
export async function* readEvents(call: EndpointCall, response: EndpointResponse): AsyncGenerator<SseEvent, void, undefined> {
  if (!response.body) throw new ProviderError(`model endpoint ${call.url} answered with an empty stream`, { status: response.status });
  try {
    yield* readSse(response.body);
  } catch (error) {
    throw transportFailure(call, error, 'failed while answering');
  }
}

export function isEventStream(response: Answer): boolean {
  return (response.headers.get('content-type') ?? '').includes('text/event-stream');
}

/** A ProviderError for a non-2xx answer: status, `Retry-After`, the endpoint's own message, and `classify`'s code. */
export async function httpFailure(
  call: EndpointCall,
  response: Answer,
  classify: (status: number, message: string, parsed: unknown) => ProviderErrorCode | undefined,
  retryAfterMs: (parsed: unknown) => number | undefined = () => undefined,
): Promise<ProviderError> {
  const text = await readText(call, response).catch(() => '');
  const parsed = parseJson(text);
  const message = endpointMessage(parsed) ?? (isHtml(response, text) ? describeBody(response, text) : text.slice(0, 300) || '(empty body)');
  const retryAfter = parseRetryAfter(response.headers) ?? retryAfterMs(parsed);
  const code = classify(response.status, message, parsed);
  return new ProviderError(`model endpoint answered HTTP ${response.status}: ${message}`, {
    status: response.status,
    ...(retryAfter === undefined ? {} : { retryAfterMs: retryAfter }),
    ...(code === undefined ? {} : { code }),
  });
}

/**
 * Whether an error message says the model or server does not take image input. Real answers:
 * - OpenAI, a text-only model: 400 "Invalid content type. image_url is only supported by
 *   certain models." (quoted in vllm-project/vllm#11629, browser-use/web-ui#274);
 * - llama.cpp's llama-server without `--mmproj`: 500 "image input is not supported by this
 *   server" (ggml-org/llama.cpp#13566; newer builds add "- hint: … --mmproj");
 * - Ollama, a model without a vision projector: 500 "this model is missing data required for
 *   image input" (valentinfrlch/ha-llmvision#691); before 0.1.33 its OpenAI layer took only
 *   string content: 400 "json: cannot unmarshal array into Go struct field
 *   Message.messages.content of type string" (danny-avila/LibreChat#2494);
 * - vLLM serving a text-only model: "… is not a multimodal model" (vllm-project/vllm#23402);
 * - Anthropic- or Gemini-compatible proxies: "does not support image(s)" / "vision".
 */
export function rejectsImages(message: string): boolean {
  return (
    /image_url is only supported by certain models|image input is not supported|missing data required for image input|not a multimodal model|cannot unmarshal array into Go struct field \S*content of type string/i.test(message) ||
    (/\b(images?|image[_ ]?(url|input|content)|vision|multimodal|multi-modal)\b/i.test(message) && /unsupported|n(o|')t support|not enabled|not available|only supported by/i.test(message))
  );
}

/** Whether an error message says the model or server does not do native tool calling. */
export function rejectsTools(message: string): boolean {
  return (
    /\b(tools?|tool[_ ]?(choice|use|calls?|calling)|function[_ ]?(calls?|calling)|functions)\b/i.test(message) &&
    /unsupported|n(o|')t support|not enabled|not available|no endpoints found that support|requires --/i.test(message)
  );
}

export function parseJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

/** `error.message` (OpenAI, Anthropic, Gemini), `error` as a string (Ollama) or a top-level `message` (Mistral). */
export function endpointMessage(parsed: unknown): string | undefined {
  if (typeof parsed !== 'object' || parsed === null) return undefined;
  const { error, message } = parsed as { error?: unknown; message?: unknown };
  if (typeof error === 'string') return error;
  if (typeof error === 'object' && error !== null) return messageText((error as { message?: unknown }).message);
  return messageText(message);
}

export function messageText(message: unknown): string | undefined {
  if (typeof message === 'string') return message;
  return message === undefined || message === null ? undefined : JSON.stringify(message);
}

function parseRetryAfter(headers: Answer['headers']): number | undefined {
  const ms = Number(headers.get('retry-after-ms') ?? NaN);
  if (Number.isFinite(ms)) return Math.max(0, ms);
  const value = headers.get('retry-after');
  if (value === null) return undefined;
  const seconds = Number(value);
  if (value.trim() !== '' && Number.isFinite(seconds)) return Math.max(0, seconds * 1000);
  const date = Date.parse(value);
  if (Number.isNaN(date)) return undefined;
  // Against the server's own `Date` when it sent one: a local clock that was stepped (or is just
  // wrong) must not turn "in 5 s" into a day's wait or into none.
  const served = Date.parse(headers.get('date') ?? '');
  return Math.max(0, date - (Number.isNaN(served) ? Date.now() : served));
}

function transportFailure(call: EndpointCall, error: unknown, what: string): unknown {
  if (call.signal.aborted || error instanceof ProviderError) return error;
  const timedOut = error instanceof Error && error.name === 'TimeoutError';
  const reason = !timedOut
    ? `${describe(error)}${hint(error)}`
    : what === 'unreachable'
      ? `no answer within ${call.timeoutMs} ms (the provider's timeout_seconds); the server hangs or is overloaded`
      : `the answer stalled and was not complete within ${call.timeoutMs} ms (the provider's timeout_seconds)`;
  return new ProviderError(`model endpoint ${call.url} ${what}: ${reason}`, { cause: error });
}

/** What a network error code usually means for a model endpoint. */
function hint(error: unknown): string {
  const code = errorCode(error);
  if (code === 'ECONNREFUSED') return '; nothing listens there: is the model server running, and is base_url right?';
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return '; the host name does not resolve: check base_url';
  if (code === 'ECONNRESET' || code === 'UND_ERR_SOCKET') return '; the connection was dropped (the server crashed or restarted, or a proxy cut it)';
  return '';
}

function errorCode(error: unknown): string | undefined {
  for (let e: unknown = error, depth = 0; e instanceof Error && depth < 4; e = e.cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string') return code;
  }
  return undefined;
}

function isHtml(response: Answer, text: string): boolean {
  return /html/i.test(response.headers.get('content-type') ?? '') || /^\s*<(!doctype|html|head|body)\b/i.test(text);
}

/** An HTML page by its title, anything else by its first characters. */
function describeBody(response: Answer, text: string): string {
  if (!isHtml(response, text)) return excerpt(text);
  const title = /<title[^>]*>([^<]*)<\/title>/i.exec(text)?.[1]?.replace(/\s+/g, ' ').trim();
  if (title) return `an HTML page ("${title.slice(0, 120)}")`;
  const words = text.replace(/<(script|style)\b[\s\S]*?<\/\1>/gi, ' ').replace(/<[^>]*>/g, ' ').replace(/\s+/g, ' ').trim();
  return words ? `an HTML page ("${words.slice(0, 120)}")` : 'an HTML page';
}

const excerpt = (text: string): string => (text.trim() === '' ? '(an empty body)' : JSON.stringify(text.length > 200 ? `${text.slice(0, 200)}…` : text));

function describe(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const cause = error.cause instanceof Error ? `: ${error.cause.message}` : '';
  return `${error.message}${cause}`;
}
