/**
 * Anthropic's Messages API over node:http (src/endpoint/client.ts). Our history is reshaped on the way out: the
 * system prompt is a top-level field, tool calls and results are content blocks, and roles
 * must alternate, so consecutive messages of one role are merged.
 */
import { deadline } from '../abort.ts';
import { ProviderError, sendable, type ChatMessage, type ChatRequest, type ChatResponse, type Provider, type ProviderErrorCode, type ToolCall } from '../provider.ts';
import { cutShort, errorInBody, eventObject, httpFailure, isEventStream, isObject, parseJson, postJson, readEvents, readJsonObject, rejectsTools, wrongShape, type EndpointCall } from '../endpoint/http.ts';
import { createEndpointClient, type EndpointClient, type EndpointResponse } from '../endpoint/client.ts';
import { createSchemaCleaner } from './schema-clean.ts';

export interface AnthropicProviderOptions {
  /** The HTTP client (its connection pool); absent = this provider makes its own. */
  readonly client?: EndpointClient;
  /** The origin, without `/v1` (a trailing `/v1` is tolerated). @default "https://api.anthropic.com" */
  readonly baseUrl?: string;
  readonly model: string;
  /** Sent as `x-api-key`; omitted for a proxy that adds its own. */
  readonly apiKey?: string;
  /** Per request, streamed or not, until the answer is complete. */
  readonly timeoutMs: number;
  /** The most the model may write in one answer; the API requires it. @default 4096 */
  readonly maxTokens?: number;
  readonly temperature?: number;
}

type Block =
  | { type: 'text'; text: string }
  | { type: 'tool_use'; id: string; name: string; input: Record<string, unknown> }
  | { type: 'tool_result'; tool_use_id: string; content?: string }
  | { type: 'image'; source: { type: 'base64'; media_type: string; data: string } };

interface WireUsage {
  input_tokens?: number;
  output_tokens?: number;
  cache_creation_input_tokens?: number | null;
  cache_read_input_tokens?: number | null;
}

interface WireBlock {
  type?: string;
  text?: string;
  id?: string;
  name?: string;
  input?: unknown;
}

interface WireMessage {
  content?: WireBlock[];
  usage?: WireUsage;
}

interface WireEvent {
  type?: string;
  index?: number;
  message?: WireMessage;
  content_block?: WireBlock;
  delta?: { type?: string; text?: string; partial_json?: string };
  usage?: WireUsage;
  error?: { type?: string; message?: string };
}

/** HTTP status for each error type, for an error that arrives inside a stream. */
const ERROR_STATUS: Readonly<Record<string, number>> = {
  invalid_request_error: 400,
  authentication_error: 401,
  permission_error: 403,
  not_found_error: 404,
  request_too_large: 413,
  rate_limit_error: 429,
  api_error: 500,
  overloaded_error: 529,
};

export function createAnthropicProvider(options: AnthropicProviderOptions): Provider {
  const client = options.client ?? createEndpointClient();
  const maxTokens = options.maxTokens ?? 4096;
  if (!Number.isInteger(maxTokens) || maxTokens < 1) throw new TypeError(`maxTokens must be a positive integer, got ${String(options.maxTokens)}`);
  const origin = (options.baseUrl ?? 'https://api.anthropic.com').replace(/\/+$/, '').replace(/\/v1$/, '');
  const url = `${origin}/v1/messages`;
  const inputSchemaOf = createSchemaCleaner('anthropic');
  return {
    name: `anthropic:${options.model}`,
    async chat(request: ChatRequest, signal: AbortSignal): Promise<ChatResponse> {
      const body: Record<string, unknown> = { model: request.model ?? options.model, max_tokens: maxTokens, messages: toWireMessages(request.messages) };
      if (request.system !== '') body.system = request.system;
      if (request.tools.length > 0) {
        body.tools = request.tools.map((tool) => ({ name: tool.name, description: tool.description, input_schema: inputSchemaOf(tool.parameters) }));
      }
      if (options.temperature !== undefined) body.temperature = options.temperature;
      if (request.onTextDelta) body.stream = true;

      const headers: Record<string, string> = { 'anthropic-version': '2023-06-01' };
      if (options.apiKey) headers['x-api-key'] = options.apiKey;
      // The timeout's timer goes as soon as the answer is read, not when it would have fired.
      const limit = deadline(signal, options.timeoutMs);
      const call: EndpointCall = { url, timeoutMs: options.timeoutMs, signal, deadline: limit.signal };
      try {
        const response = await postJson(client, call, headers, body);
        const sentTools = request.tools.length > 0;
        if (!response.ok) throw await httpFailure(call, response, (status, message) => classify(status, message, sentTools));
        if (request.onTextDelta && isEventStream(response)) return await readMessageStream(call, response, request.onTextDelta, sentTools);

        const { body: answered, text } = await readJsonObject(call, response);
        const parsed = answered as WireMessage;
        if (!Array.isArray(parsed.content) || !parsed.content.every(isObject)) {
          throw errorInBody(call, response.status, answered) ?? wrongShape(call, response.status, 'a list of content blocks (an Anthropic message)', text);
        }
        const answer = fromWireMessage(parsed.content, isObject(parsed.usage) ? parsed.usage : undefined);
        if (request.onTextDelta && answer.text !== '') request.onTextDelta(answer.text);
        return answer;
      } finally {
        limit.dispose();
      }
    },
  };
}

/** Our messages as alternating user/assistant turns; tool results are user turns, results first. */
function toWireMessages(messages: readonly ChatMessage[]): Array<{ role: 'user' | 'assistant'; content: string | Block[] }> {
  const turns: Array<{ role: 'user' | 'assistant'; blocks: Block[] }> = [];
  for (const message of messages) {
    const role = message.role === 'assistant' ? 'assistant' : 'user';
    const blocks = toBlocks(message);
    // The API rejects empty turns and empty text blocks.
    if (blocks.length === 0) continue;
    const previous = turns.at(-1);
    if (previous?.role === role) previous.blocks.push(...blocks);
    else turns.push({ role, blocks });
  }
  return turns.map(({ role, blocks }) => {
    const only = blocks.length === 1 ? blocks[0] : undefined;
    if (only?.type === 'text') return { role, content: only.text };
    // A user turn answering tool calls must start with the results.
    const ordered = role === 'user' ? [...blocks.filter((b) => b.type === 'tool_result'), ...blocks.filter((b) => b.type !== 'tool_result')] : blocks;
    return { role, content: ordered };
  });
}

function toBlocks(message: ChatMessage): Block[] {
  switch (message.role) {
    case 'user':
      // https://docs.anthropic.com/en/docs/build-with-claude/vision ("Base64-encoded image
      // example"): `image` blocks with a base64 source, placed before the text.
      return [
        ...sendable(message.images).map((image) => ({ type: 'image' as const, source: { type: 'base64' as const, media_type: image.mime, data: image.base64 } })),
        ...(message.content === '' ? [] : [{ type: 'text' as const, text: message.content }]),
      ];
    case 'assistant':
      return [
        ...(message.content === '' ? [] : [{ type: 'text' as const, text: message.content }]),
        ...(message.toolCalls ?? []).map((call) => ({ type: 'tool_use' as const, id: call.id, name: call.name, input: toInput(call.arguments) })),
      ];
    case 'tool':
      return [{ type: 'tool_result', tool_use_id: message.toolCallId, ...(message.content === '' ? {} : { content: message.content }) }];
  }
}

/** `input` must be an object; arguments the model got wrong were already answered with an error result. */
function toInput(args: string): Record<string, unknown> {
  const parsed = parseJson(args);
  return typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : {};
}

function fromWireMessage(content: readonly WireBlock[], usage: WireUsage | undefined): ChatResponse {
  const text = content
    .filter((block) => block.type === 'text')
    .map((block) => (typeof block.text === 'string' ? block.text : ''))
    .join('');
  const toolCalls: ToolCall[] = content
    .filter((block) => block.type === 'tool_use')
    .map((block, index) => ({ id: block.id || `toolu_${index}`, name: block.name ?? '', arguments: JSON.stringify(block.input ?? {}) }));
  return { text, toolCalls, ...(usage ? { usage: fromWireUsage(usage) } : {}) };
}

/** Cached input tokens are counted apart by the API; the context holds all of them. */
const fromWireUsage = (usage: WireUsage) => ({
  inputTokens: (usage.input_tokens ?? 0) + (usage.cache_creation_input_tokens ?? 0) + (usage.cache_read_input_tokens ?? 0),
  outputTokens: usage.output_tokens ?? 0,
});

/** message_start, content_block_start/delta/stop, message_delta, message_stop; ping and unknown events ignored. */
async function readMessageStream(call: EndpointCall, response: EndpointResponse, onTextDelta: (delta: string) => void, sentTools: boolean): Promise<ChatResponse> {
  let text = '';
  const tools = new Map<number, { id: string; name: string; json: string; input: unknown }>();
  const usage: WireUsage = {};
  let sawUsage = false;
  let complete = false;
  for await (const event of readEvents(call, response)) {
    const data = eventObject(call, response.status, event.data) as WireEvent;
    switch (data.type ?? event.event) {
      case 'message_start':
      case 'message_delta': {
        const counts = data.type === 'message_start' ? data.message?.usage : data.usage;
        if (counts) {
          // message_delta repeats the counts so far; later values replace earlier ones.
          for (const [key, value] of Object.entries(counts)) if (typeof value === 'number') (usage as Record<string, number>)[key] = value;
          sawUsage = true;
        }
        break;
      }
      case 'content_block_start': {
        const block = data.content_block;
        if (block?.type === 'tool_use') tools.set(data.index ?? tools.size, { id: block.id ?? '', name: block.name ?? '', json: '', input: block.input });
        else if (block?.type === 'text' && block.text) {
          text += block.text;
          onTextDelta(block.text);
        }
        break;
      }
      case 'content_block_delta':
        if (data.delta?.type === 'text_delta' && data.delta.text) {
          text += data.delta.text;
          onTextDelta(data.delta.text);
        } else if (data.delta?.type === 'input_json_delta') {
          const tool = tools.get(data.index ?? -1);
          if (tool) tool.json += data.delta.partial_json ?? '';
        }
        break;
      case 'message_stop':
        complete = true;
        break;
      case 'error': {
        const status = ERROR_STATUS[data.error?.type ?? ''];
        const message = data.error?.message ?? event.data.slice(0, 300);
        const code = status === undefined ? undefined : classify(status, message, sentTools);
        throw new ProviderError(`model endpoint failed while streaming: ${message}`, { ...(status === undefined ? {} : { status }), ...(code === undefined ? {} : { code }) });
      }
    }
  }
  if (!complete) throw cutShort(call);
  const toolCalls = [...tools.entries()]
    .sort(([a], [b]) => a - b)
    .map(([, tool], index) => ({ id: tool.id || `toolu_${index}`, name: tool.name, arguments: tool.json || JSON.stringify(tool.input ?? {}) }));
  return { text, toolCalls, ...(sawUsage ? { usage: fromWireUsage(usage) } : {}) };
}

const CONTEXT_MESSAGE = /prompt is too long|exceed context limit|context (window|length)|too many (input )?tokens/i;

function classify(status: number, message: string, sentTools: boolean): ProviderErrorCode | undefined {
  if (status === 401 || status === 403) return 'auth';
  if (status >= 400 && status < 500 && status !== 429 && CONTEXT_MESSAGE.test(message)) return 'context_length';
  // Anthropic's own models all take tools; Anthropic-compatible servers may not.
  if (sentTools && (status === 400 || status === 404 || status === 422) && rejectsTools(message)) return 'tools_unsupported';
  return undefined;
}
