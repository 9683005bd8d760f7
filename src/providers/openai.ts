/**
 * Any OpenAI-compatible chat-completions endpoint (OpenAI, OpenRouter, Groq, Mistral,
 * DeepSeek, Ollama, vLLM, LM Studio, llama.cpp server) over node:http
 * (src/endpoint/client.ts): no SDK to load, and the wire format is small and stable.
 */
import { deadline } from '../abort.ts';
import { ProviderError, sendable, type ChatMessage, type ChatRequest, type ChatResponse, type Provider, type ProviderErrorCode, type ToolCall } from '../provider.ts';
import { createSchemaCleaner } from './schema-clean.ts';
import { cutShort, errorInBody, eventObject, httpFailure, isEventStream, isObject, messageText, postJson, readEvents, readJsonObject, rejectsTools, wrongShape, type EndpointCall } from '../endpoint/http.ts';
import { createEndpointClient, type EndpointClient, type EndpointResponse } from '../endpoint/client.ts';

export interface OpenAIProviderOptions {
  /** The HTTP client (its connection pool); absent = this provider makes its own. */
  readonly client?: EndpointClient;
  /** e.g. "https://api.openai.com/v1" — the path before `/chat/completions`. */
  readonly baseUrl: string;
  readonly model: string;
  /** Omitted for local servers that need none. */
  readonly apiKey?: string;
  /** Per request, streamed or not, until the answer is complete. @default 120000 */
  readonly timeoutMs: number;
  readonly temperature?: number;
  readonly maxTokens?: number;
  /**
   * How tool parameter schemas are cleaned (see schema-clean.ts): `conservative` keeps only
   * type, description, properties, required, items and enum, for servers whose schema
   * handling is strict or partial. @default 'openai'
   */
  readonly schemaDialect?: 'openai' | 'conservative';
}

interface WireToolCall {
  index?: number;
  id?: string;
  type?: string;
  function?: { name?: string; arguments?: string | Record<string, unknown> };
}

interface WireUsage {
  prompt_tokens?: number;
  completion_tokens?: number;
}

interface WireResponse {
  choices?: Array<{ message?: { content?: string | null; tool_calls?: WireToolCall[] | null } }>;
  usage?: WireUsage | null;
  error?: unknown;
}

interface WireChunk {
  choices?: Array<{ delta?: { content?: string | null; tool_calls?: WireToolCall[] | null }; finish_reason?: string | null }>;
  usage?: WireUsage | null;
  error?: { message?: unknown; code?: unknown };
}

export function createOpenAIProvider(options: OpenAIProviderOptions): Provider {
  const client = options.client ?? createEndpointClient();
  const url = `${options.baseUrl.replace(/\/+$/, '')}/chat/completions`;
  const parametersOf = createSchemaCleaner(options.schemaDialect ?? 'openai');
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
          function: { name: tool.name, description: tool.description, parameters: parametersOf(tool.parameters) },
        }));
      }
      if (options.temperature !== undefined) body.temperature = options.temperature;
      if (options.maxTokens !== undefined) body.max_tokens = options.maxTokens;
      // No `stream_options: { include_usage: true }`: Mistral rejects it (HTTP 422). Servers that
      // send usage in a chunk anyway get it reported.
      if (request.onTextDelta) body.stream = true;

      const headers: Record<string, string> = {};
      if (options.apiKey) headers.authorization = `Bearer ${options.apiKey}`;
      // The timeout's timer goes as soon as the answer is read, not when it would have fired.
      const limit = deadline(signal, options.timeoutMs);
      const call: EndpointCall = { url, timeoutMs: options.timeoutMs, signal, deadline: limit.signal };
      try {
        const response = await postJson(client, call, headers, body);
        if (!response.ok) throw await httpFailure(call, response, (status, message, parsed) => classify(status, message, parsed, request.tools.length > 0));
        if (request.onTextDelta && isEventStream(response)) return await readChatStream(call, response, request.onTextDelta);

        const { body: answered, text } = await readJsonObject(call, response);
        const parsed = answered as WireResponse;
        const message = Array.isArray(parsed.choices) && isObject(parsed.choices[0]) ? parsed.choices[0].message : undefined;
        if (!isObject(message)) throw errorInBody(call, response.status, answered) ?? wrongShape(call, response.status, 'choices[0].message (an OpenAI-compatible chat completion)', text);
        const content = contentText(message.content);
        if (content === undefined) throw wrongShape(call, response.status, 'text in choices[0].message.content', text);
        const calls = message.tool_calls ?? [];
        if (!Array.isArray(calls) || !calls.every(isObject)) throw wrongShape(call, response.status, 'a list of tool calls in choices[0].message.tool_calls', text);
        const answer: ChatResponse = {
          text: content,
          toolCalls: calls.map(fromWireToolCall),
          ...(isObject(parsed.usage) ? { usage: fromWireUsage(parsed.usage) } : {}),
        };
        // The server ignored `stream: true`: the whole text is the one delta.
        if (request.onTextDelta && answer.text !== '') request.onTextDelta(answer.text);
        return answer;
      } finally {
        limit.dispose();
      }
    },
  };
}

/** `content` as text: a string, nothing, or (some servers) a list of `{ type: "text", text }` parts; undefined when it is none of these. */
function contentText(content: unknown): string | undefined {
  if (content === undefined || content === null) return '';
  if (typeof content === 'string') return content;
  if (Array.isArray(content) && content.every(isObject)) return content.map((part) => (part.type === 'text' && typeof part.text === 'string' ? part.text : '')).join('');
  return undefined;
}

function toWire(message: ChatMessage): Record<string, unknown> {
  switch (message.role) {
    case 'user': {
      // https://platform.openai.com/docs/guides/images-vision ("Passing a Base64 encoded image"):
      // a content array with `image_url` parts whose url is a data URL. Without images the content
      // stays a plain string, as servers without vision support expect.
      const images = sendable(message.images);
      if (images.length === 0) return { role: 'user', content: message.content };
      return {
        role: 'user',
        content: [
          ...images.map((image) => ({ type: 'image_url', image_url: { url: `data:${image.mime};base64,${image.base64}` } })),
          ...(message.content === '' ? [] : [{ type: 'text', text: message.content }]),
        ],
      };
    }
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
    id: call.id || `call_${index}`,
    name: call.function?.name ?? '',
    arguments: typeof args === 'string' ? args || '{}' : JSON.stringify(args ?? {}),
  };
}

const fromWireUsage = (usage: WireUsage) => ({ inputTokens: usage.prompt_tokens ?? 0, outputTokens: usage.completion_tokens ?? 0 });

/** Reads `chat.completion.chunk`s: text deltas, tool calls assembled from pieces by index. */
async function readChatStream(call: EndpointCall, response: EndpointResponse, onTextDelta: (delta: string) => void): Promise<ChatResponse> {
  let text = '';
  const calls = new Map<number, { id: string; name: string; arguments: string }>();
  let usage: WireUsage | undefined;
  let complete = false;
  let last = -1;
  for await (const event of readEvents(call, response)) {
    if (event.data === '[DONE]') {
      complete = true;
      break;
    }
    const chunk = eventObject(call, response.status, event.data) as WireChunk;
    if (chunk.error) {
      const status = typeof chunk.error.code === 'number' ? chunk.error.code : undefined;
      throw new ProviderError(`model endpoint failed while streaming: ${messageText(chunk.error.message) ?? event.data.slice(0, 300)}`, status === undefined ? {} : { status });
    }
    if (isObject(chunk.usage)) usage = chunk.usage;
    const choice = Array.isArray(chunk.choices) ? chunk.choices[0] : undefined;
    if (!isObject(choice)) continue;
    if (choice.finish_reason) complete = true;
    const delta = isObject(choice.delta) ? choice.delta : {};
    const content = contentText(delta.content);
    if (content === undefined) throw wrongShape(call, response.status, 'text in a streamed delta.content', event.data);
    if (content) {
      text += content;
      onTextDelta(content);
    }
    const pieces = delta.tool_calls ?? [];
    if (!Array.isArray(pieces) || !pieces.every(isObject)) throw wrongShape(call, response.status, 'a list of tool calls in a streamed delta.tool_calls', event.data);
    for (const piece of pieces as WireToolCall[]) {
      const slot = slotOf(piece, calls, last);
      last = slot;
      const entry = calls.get(slot) ?? { id: '', name: '', arguments: '' };
      calls.set(slot, entry);
      if (piece.id) entry.id = piece.id;
      const name = piece.function?.name;
      // The name normally comes whole in the first piece; some servers repeat it in every piece.
      if (name && name !== entry.name) entry.name += name;
      const args = piece.function?.arguments;
      if (typeof args === 'string') entry.arguments += args;
      else if (args) entry.arguments = JSON.stringify(args);
    }
  }
  if (!complete) throw cutShort(call);
  const toolCalls = [...calls.entries()]
    .sort(([a], [b]) => a - b)
    .map(([, entry], index) => ({ id: entry.id || `call_${index}`, name: entry.name, arguments: entry.arguments || '{}' }));
  return { text, toolCalls, ...(usage ? { usage: fromWireUsage(usage) } : {}) };
}

/** Pieces carry `index`; a few servers omit it and start each call with a new `id` instead. */
function slotOf(piece: WireToolCall, calls: ReadonlyMap<number, { id: string }>, last: number): number {
  if (typeof piece.index === 'number') return piece.index;
  if (!piece.id) return Math.max(last, 0);
  for (const [slot, entry] of calls) if (entry.id === piece.id) return slot;
  return calls.size === 0 ? 0 : Math.max(...calls.keys()) + 1;
}

const CONTEXT_MESSAGE =
  /maximum context length|context[_ ]length[_ ]exceeded|context (window|size)|too many tokens|prompt is too long|input is too long|reduce the length of the (messages|prompt)/i;

function classify(status: number, message: string, parsed: unknown, sentTools: boolean): ProviderErrorCode | undefined {
  if (status === 401 || status === 403) return 'auth';
  const code = (parsed as { error?: { code?: unknown } } | null | undefined)?.error?.code;
  if (code === 'context_length_exceeded' || (status >= 400 && status < 500 && status !== 429 && CONTEXT_MESSAGE.test(message))) return 'context_length';
  if (sentTools && (status === 400 || status === 404 || status === 422) && rejectsTools(message)) return 'tools_unsupported';
  return undefined;
}
