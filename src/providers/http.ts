/**
 * HTTP plumbing shared by every provider: a JSON POST with timeout and cancellation, reading
 * bodies and SSE streams under the same deadline, and turning failures into ProviderErrors
 * that carry status, Retry-After and a code.
 */
import { ProviderError, type ProviderErrorCode } from '../provider.ts';
import { readSse, type SseEvent } from './sse.ts';

/** One request to a model endpoint, and what its failures are reported with. */
export interface EndpointCall {
  readonly url: string;
  readonly timeoutMs: number;
  readonly signal: AbortSignal;
}

/** POSTs `body` as JSON. Network failures and the timeout become retryable ProviderErrors; the caller's abort passes through. */
export async function postJson(call: EndpointCall, headers: Record<string, string>, body: unknown): Promise<Response> {
  try {
    return await fetch(call.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify(body),
      signal: AbortSignal.any([call.signal, AbortSignal.timeout(call.timeoutMs)]),
    });
  } catch (error) {
    throw transportFailure(call, error, 'unreachable');
  }
}

export async function readText(call: EndpointCall, response: Response): Promise<string> {
  try {
    return await response.text();
  } catch (error) {
    throw transportFailure(call, error, 'failed while answering');
  }
}

/** The body as Server-Sent Events; a broken or timed-out stream becomes a retryable ProviderError. */
export async function* readEvents(call: EndpointCall, response: Response): AsyncGenerator<SseEvent, void, undefined> {
  if (!response.body) throw new ProviderError(`model endpoint ${call.url} answered with an empty stream`, { status: response.status });
  try {
    yield* readSse(response.body);
  } catch (error) {
    throw transportFailure(call, error, 'failed while answering');
  }
}

export function isEventStream(response: Response): boolean {
  return (response.headers.get('content-type') ?? '').includes('text/event-stream');
}

/** A ProviderError for a non-2xx answer: status, `Retry-After`, the endpoint's own message, and `classify`'s code. */
export async function httpFailure(
  call: EndpointCall,
  response: Response,
  classify: (status: number, message: string, parsed: unknown) => ProviderErrorCode | undefined,
  retryAfterMs: (parsed: unknown) => number | undefined = () => undefined,
): Promise<ProviderError> {
  const text = await readText(call, response).catch(() => '');
  const parsed = parseJson(text);
  const message = endpointMessage(parsed) ?? (text.slice(0, 300) || '(empty body)');
  const retryAfter = parseRetryAfter(response.headers) ?? retryAfterMs(parsed);
  const code = classify(response.status, message, parsed);
  return new ProviderError(`model endpoint answered HTTP ${response.status}: ${message}`, {
    status: response.status,
    ...(retryAfter === undefined ? {} : { retryAfterMs: retryAfter }),
    ...(code === undefined ? {} : { code }),
  });
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

function parseRetryAfter(headers: Headers): number | undefined {
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
  const reason = error instanceof Error && error.name === 'TimeoutError' ? `no answer within ${call.timeoutMs} ms` : describe(error);
  return new ProviderError(`model endpoint ${call.url} ${what}: ${reason}`, { cause: error });
}

function describe(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const cause = error.cause instanceof Error ? `: ${error.cause.message}` : '';
  return `${error.message}${cause}`;
}
