/**
 * Any OpenAI-compatible chat-completions endpoint (OpenAI, OpenRouter, Groq, Mistral,
 * DeepSeek, Ollama, vLLM, LM Studio, llama.cpp server) over plain `fetch`: no SDK to load,
 * and the wire format is small and stable.
 */
import { ProviderError, type ChatMessage, type ChatRequest, type ChatResponse, type Provider, type ToolCall } from '../provider.ts';

export interface OpenAIProviderOptions {
  /** e.g. "https://api.openai.com/v1" — the path before `/chat/completions`. */
  readonly baseUrl: string;
  readonly model: string;
  /** Omitted for local servers that need none. */
  readonly apiKey?: string;
  /** Per request. @default 120000 */
  readonly timeoutMs: number;
  readonly temperature?: number;
  readonly maxTokens?: number;
}

interface WireToolCall {
  id?: string;
  type?: string;
  function?: { name?: string; arguments?: string | Record<string, unknown> };
}

interface WireResponse {
  choices?: Array<{ message?: { content?: string | null; tool_calls?: WireToolCall[] | null } }>;
  usage?: { prompt_tokens?: number; completion_tokens?: number };
  error?: { message?: string };
}

export function createOpenAIProvider(options: OpenAIProviderOptions): Provider {
  const url = `${options.baseUrl.replace(/\/+$/, '')}/chat/completions`;
  return {
    name: `openai:${options.model}`,
    async chat(request: ChatRequest, signal: AbortSignal): Promise<ChatResponse> {
      const body: Record<string, unknown> = {
        model: request.model ?? options.model,
        messages: [{ role: 'system', content: request.system }, ...request.messages.map(toWire)],
      };
      if (request.tools.length > 0) {
        body.tools = request.tools.map((tool) => ({
          type: 'function',
          function: { name: tool.name, description: tool.description, parameters: tool.parameters },
        }));
      }
      if (options.temperature !== undefined) body.temperature = options.temperature;
      if (options.maxTokens !== undefined) body.max_tokens = options.maxTokens;

      const headers: Record<string, string> = { 'content-type': 'application/json' };
      if (options.apiKey) headers.authorization = `Bearer ${options.apiKey}`;
      let response: Response;
      try {
        response = await fetch(url, {
          method: 'POST',
          headers,
          body: JSON.stringify(body),
          signal: AbortSignal.any([signal, AbortSignal.timeout(options.timeoutMs)]),
        });
      } catch (error) {
        if (signal.aborted) throw error;
        const reason = error instanceof Error && error.name === 'TimeoutError' ? `no answer within ${options.timeoutMs} ms` : describe(error);
        throw new ProviderError(`model endpoint ${url} unreachable: ${reason}`, { cause: error });
      }
      const text = await response.text();
      if (!response.ok) {
        const retryAfter = parseRetryAfter(response.headers.get('retry-after'));
        throw new ProviderError(`model endpoint answered HTTP ${response.status}: ${errorMessage(text)}`, {
          status: response.status,
          ...(retryAfter === undefined ? {} : { retryAfterMs: retryAfter }),
        });
      }
      let parsed: WireResponse;
      try {
        parsed = JSON.parse(text) as WireResponse;
      } catch (error) {
        throw new ProviderError(`model endpoint answered with non-JSON: ${text.slice(0, 200)}`, { status: response.status, cause: error });
      }
      const message = parsed.choices?.[0]?.message;
      if (!message) throw new ProviderError(`model endpoint answered without choices: ${text.slice(0, 200)}`, { status: response.status });
      return {
        text: message.content ?? '',
        toolCalls: (message.tool_calls ?? []).map(fromWireToolCall),
        ...(parsed.usage ? { usage: { inputTokens: parsed.usage.prompt_tokens ?? 0, outputTokens: parsed.usage.completion_tokens ?? 0 } } : {}),
      };
    },
  };
}

function toWire(message: ChatMessage): Record<string, unknown> {
  switch (message.role) {
    case 'user':
      return { role: 'user', content: message.content };
    case 'assistant':
      return message.toolCalls && message.toolCalls.length > 0
        ? {
            role: 'assistant',
            content: message.content === '' ? null : message.content,
            tool_calls: message.toolCalls.map((call) => ({ id: call.id, type: 'function', function: { name: call.name, arguments: call.arguments } })),
          }
        : { role: 'assistant', content: message.content };
    case 'tool':
      return { role: 'tool', tool_call_id: message.toolCallId, content: message.content };
  }
}

function fromWireToolCall(call: WireToolCall, index: number): ToolCall {
  const args = call.function?.arguments;
  return {
    id: call.id ?? `call_${index}`,
    name: call.function?.name ?? '',
    arguments: typeof args === 'string' ? args : JSON.stringify(args ?? {}),
  };
}

function parseRetryAfter(value: string | null): number | undefined {
  if (value === null) return undefined;
  const seconds = Number(value);
  if (Number.isFinite(seconds)) return Math.max(0, seconds * 1000);
  const date = Date.parse(value);
  return Number.isNaN(date) ? undefined : Math.max(0, date - Date.now());
}

function errorMessage(body: string): string {
  try {
    const parsed = JSON.parse(body) as WireResponse;
    if (parsed.error?.message) return parsed.error.message;
  } catch {
    // not JSON: fall through to the raw text
  }
  return body.slice(0, 300) || '(empty body)';
}

function describe(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const cause = error.cause instanceof Error ? `: ${error.cause.message}` : '';
  return `${error.message}${cause}`;
}
