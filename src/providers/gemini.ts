/**
 * Google's Gemini API (generateContent) over node:http (src/endpoint/client.ts). Gemini has no tool call ids: calls
 * get generated ones, and results go back as `functionResponse` parts matched by name and
 * order. Gemini 3 also signs its tool calls and rejects a history that drops the signature,
 * so signatures are remembered here by call id and sent back with the calls.
 */
import { deadline } from '../abort.ts';
import { ProviderError, sendable, type ChatMessage, type ChatRequest, type ChatResponse, type Provider, type ProviderErrorCode, type ToolCall } from '../provider.ts';
import { cutShort, eventObject, httpFailure, isEventStream, isObject, parseJson, postJson, readEvents, readJsonObject, rejectsTools, wrongShape, type EndpointCall } from '../endpoint/http.ts';
import { createEndpointClient, type EndpointClient } from '../endpoint/client.ts';
import { createSchemaCleaner } from './schema-clean.ts';
import { BoundedMap } from '../bounded-map.ts';

export interface GeminiProviderOptions {
  /** The HTTP client (its connection pool); absent = this provider makes its own. */
  readonly client?: EndpointClient;
  /** The API root, before `/models/…`. @default "https://generativelanguage.googleapis.com/v1beta" */
  readonly baseUrl?: string;
  /** e.g. "gemini-2.5-flash"; a name with a slash ("tunedModels/x") is used as the path. */
  readonly model: string;
  /** Sent as `x-goog-api-key` (never in the URL, which ends up in logs). */
  readonly apiKey?: string;
  /** Per request, streamed or not, until the answer is complete. */
  readonly timeoutMs: number;
  readonly temperature?: number;
  /** Sent as `generationConfig.maxOutputTokens`. */
  readonly maxTokens?: number;
}

interface WirePart {
  text?: string;
  thought?: boolean;
  functionCall?: { name?: string; args?: unknown; id?: string };
  thoughtSignature?: string;
}

interface WireResponse {
  candidates?: Array<{ content?: { parts?: WirePart[] }; finishReason?: string }>;
  usageMetadata?: { promptTokenCount?: number; candidatesTokenCount?: number; thoughtsTokenCount?: number };
  promptFeedback?: { blockReason?: string };
  error?: { code?: unknown; message?: string };
}

/** Google's documented stand-in for a tool call signature we do not have (history from another model, or from before a restart). */
const SKIP_SIGNATURE = 'skip_thought_signature_validator';
/** Signatures remembered; a tool loop needs only its last few calls. */
const MAX_SIGNATURES = 1000;
const ANSWERED = new Set(['STOP', 'MAX_TOKENS']);

export function createGeminiProvider(options: GeminiProviderOptions): Provider {
  const client = options.client ?? createEndpointClient();
  const base = (options.baseUrl ?? 'https://generativelanguage.googleapis.com/v1beta').replace(/\/+$/, '');
  const signatures = new BoundedMap<string, string>(MAX_SIGNATURES);
  let calls = 0;
  const remember = (id: string, signature: string): void => {
    signatures.set(id, signature);
  };
  const parametersOf = createSchemaCleaner('gemini');
  return {
    name: `gemini:${options.model}`,
    async chat(request: ChatRequest, signal: AbortSignal): Promise<ChatResponse> {
      const model = request.model ?? options.model;
      const path = model.includes('/') ? model : `models/${model}`;
      const url = request.onTextDelta ? `${base}/${path}:streamGenerateContent?alt=sse` : `${base}/${path}:generateContent`;
      // Gemini 1.x and 2.x do not check signatures; later models reject a call without one.
      const needsSignature = !/^(models\/)?gemini-[12][.-]/.test(model);
      const body: Record<string, unknown> = { contents: toContents(request.messages, signatures, needsSignature) };
      if (request.system !== '') body.systemInstruction = { parts: [{ text: request.system }] };
      if (request.tools.length > 0) body.tools = [{ functionDeclarations: request.tools.map((tool) => toDeclaration(tool, parametersOf)) }];
      const generationConfig: Record<string, unknown> = {};
      if (options.temperature !== undefined) generationConfig.temperature = options.temperature;
      if (options.maxTokens !== undefined) generationConfig.maxOutputTokens = options.maxTokens;
      if (Object.keys(generationConfig).length > 0) body.generationConfig = generationConfig;

      const headers: Record<string, string> = {};
      if (options.apiKey) headers['x-goog-api-key'] = options.apiKey;
      // The timeout's timer goes as soon as the answer is read, not when it would have fired.
      const limit = deadline(signal, options.timeoutMs);
      const call: EndpointCall = { url, timeoutMs: options.timeoutMs, signal, deadline: limit.signal };
      try {
        const response = await postJson(client, call, headers, body);
        const sentTools = request.tools.length > 0;
        if (!response.ok) throw await httpFailure(call, response, (status, message, parsed) => classify(status, message, parsed, sentTools), retryDelay);

        const answer: Answer = { text: '', toolCalls: [] };
        const take = (chunk: WireResponse, onText: (delta: string) => void): void =>
          collect(chunk, answer, onText, (part) => {
            const id = part.functionCall?.id || `call_${++calls}`;
            if (part.thoughtSignature) remember(id, part.thoughtSignature);
            return id;
          }, sentTools);

        if (request.onTextDelta && isEventStream(response)) {
          for await (const event of readEvents(call, response)) {
            const chunk = eventObject(call, response.status, event.data) as WireResponse;
            if (!answers(chunk)) throw wrongShape(call, response.status, 'candidates (a Gemini generateContent answer)', event.data);
            take(chunk, request.onTextDelta);
          }
          if (answer.finishReason === undefined && answer.blockReason === undefined) throw cutShort(call);
        } else {
          const { body, text } = await readJsonObject(call, response);
          const parsed = body as WireResponse;
          if (!answers(parsed)) throw wrongShape(call, response.status, 'candidates (a Gemini generateContent answer)', text);
          take(parsed, () => undefined);
          if (request.onTextDelta && answer.text !== '') request.onTextDelta(answer.text);
        }
        // A refusal is final for this prompt: the HTTP status (200) makes it non-retryable.
        if (answer.blockReason) throw new ProviderError(`model endpoint refused the prompt: ${answer.blockReason}`, { status: response.status });
        if (answer.text === '' && answer.toolCalls.length === 0 && answer.finishReason !== undefined && !ANSWERED.has(answer.finishReason)) {
          throw new ProviderError(`model endpoint stopped without an answer: ${answer.finishReason}`, { status: response.status });
        }
        return { text: answer.text, toolCalls: answer.toolCalls, ...(answer.usage ? { usage: answer.usage } : {}) };
      } finally {
        limit.dispose();
      }
    },
  };
}

/** Whether a response (or stream chunk) is shaped like Gemini's: candidates, prompt feedback, usage or an error. */
function answers(chunk: WireResponse): boolean {
  const { candidates, promptFeedback, usageMetadata, error } = chunk as Record<string, unknown>;
  if (candidates !== undefined) return Array.isArray(candidates) && candidates.every(wellFormed);
  return isObject(promptFeedback) || isObject(usageMetadata) || isObject(error);
}

function wellFormed(candidate: unknown): boolean {
  if (!isObject(candidate)) return false;
  const { content } = candidate;
  if (content === undefined) return true;
  if (!isObject(content)) return false;
  return content.parts === undefined || (Array.isArray(content.parts) && content.parts.every(isObject));
}

/** What the chunks of one answer added up to so far. */
interface Answer {
  text: string;
  toolCalls: ToolCall[];
  finishReason?: string;
  blockReason?: string;
  usage?: { inputTokens: number; outputTokens: number };
}

/** Adds one response (or stream chunk) to `answer`; thoughts never count as text. */
function collect(chunk: WireResponse, answer: Answer, onText: (delta: string) => void, idFor: (part: WirePart) => string, sentTools: boolean): void {
  if (chunk.error) {
    const status = typeof chunk.error.code === 'number' ? chunk.error.code : undefined;
    const message = chunk.error.message ?? 'unknown error';
    const code = status === undefined ? undefined : classify(status, message, chunk, sentTools);
    throw new ProviderError(`model endpoint failed while streaming: ${message}`, { ...(status === undefined ? {} : { status }), ...(code === undefined ? {} : { code }) });
  }
  const candidate = chunk.candidates?.[0];
  for (const part of candidate?.content?.parts ?? []) {
    if (part.functionCall) {
      answer.toolCalls.push({ id: idFor(part), name: part.functionCall.name ?? '', arguments: JSON.stringify(part.functionCall.args ?? {}) });
    } else if (typeof part.text === 'string' && part.text !== '' && !part.thought) {
      answer.text += part.text;
      onText(part.text);
    }
  }
  if (candidate?.finishReason) answer.finishReason = candidate.finishReason;
  if (chunk.promptFeedback?.blockReason) answer.blockReason = chunk.promptFeedback.blockReason;
  const usage = chunk.usageMetadata;
  if (usage) answer.usage = { inputTokens: usage.promptTokenCount ?? 0, outputTokens: (usage.candidatesTokenCount ?? 0) + (usage.thoughtsTokenCount ?? 0) };
}

function toDeclaration(tool: ChatRequest['tools'][number], parametersOf: (schema: Readonly<Record<string, unknown>>) => Record<string, unknown>): Record<string, unknown> {
  const parameters = parametersOf(tool.parameters);
  const properties = parameters.properties;
  // Gemini rejects an object schema without properties: a tool without arguments sends none.
  const empty = parameters.type === 'object' && (typeof properties !== 'object' || properties === null || Object.keys(properties).length === 0);
  return { name: tool.name, description: tool.description, ...(empty ? {} : { parameters }) };
}

/** Our messages as user/model turns; consecutive turns of one role merged, empty text left out. */
function toContents(messages: readonly ChatMessage[], signatures: ReadonlyMap<string, string>, needsSignature: boolean): Array<{ role: 'user' | 'model'; parts: Array<Record<string, unknown>> }> {
  const contents: Array<{ role: 'user' | 'model'; parts: Array<Record<string, unknown>> }> = [];
  for (const message of messages) {
    const role = message.role === 'assistant' ? 'model' : 'user';
    const parts: Array<Record<string, unknown>> = [];
    if (message.role === 'tool') parts.push({ functionResponse: { name: message.name, response: { content: message.content } } });
    else {
      // https://ai.google.dev/gemini-api/docs/image-understanding ("Passing inline image data"):
      // `inline_data` parts (mime_type, base64 data) before the text. The REST API takes the
      // snake_case names of the docs' examples as well as the camelCase of the proto JSON.
      if (message.role === 'user') for (const image of sendable(message.images)) parts.push({ inline_data: { mime_type: image.mime, data: image.base64 } });
      if (message.content !== '') parts.push({ text: message.content });
    }
    if (message.role === 'assistant' && message.toolCalls && message.toolCalls.length > 0) {
      const callParts: Array<Record<string, unknown>> = message.toolCalls.map((call) => {
        const signature = signatures.get(call.id);
        return { functionCall: { name: call.name, args: toArgs(call.arguments) }, ...(signature ? { thoughtSignature: signature } : {}) };
      });
      // Only the first call of a turn carries the signature; without one, say so explicitly.
      if (needsSignature && !callParts.some((part) => part.thoughtSignature)) callParts[0]!.thoughtSignature = SKIP_SIGNATURE;
      parts.push(...callParts);
    }
    if (parts.length === 0) continue;
    const previous = contents.at(-1);
    if (previous?.role === role) previous.parts.push(...parts);
    else contents.push({ role, parts });
  }
  return contents;
}

function toArgs(args: string): Record<string, unknown> {
  const parsed = parseJson(args);
  return typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : {};
}

const CONTEXT_MESSAGE = /exceeds the maximum number of tokens|input token count|context (window|length)/i;

function classify(status: number, message: string, parsed: unknown, sentTools: boolean): ProviderErrorCode | undefined {
  if (status === 401 || status === 403) return 'auth';
  // A wrong key is a 400 INVALID_ARGUMENT with reason API_KEY_INVALID, not a 401.
  if (status === 400 && (/API key not valid|API_KEY_INVALID/i.test(message) || details(parsed).some((detail) => detail.reason === 'API_KEY_INVALID'))) return 'auth';
  if (status >= 400 && status < 500 && status !== 429 && CONTEXT_MESSAGE.test(message)) return 'context_length';
  if (sentTools && (status === 400 || status === 404 || status === 422) && rejectsTools(message)) return 'tools_unsupported';
  return undefined;
}

/** A 429 says when to come back in `error.details[].retryDelay` ("13s") rather than a header. */
function retryDelay(parsed: unknown): number | undefined {
  for (const detail of details(parsed)) {
    const match = typeof detail.retryDelay === 'string' ? /^(\d+(?:\.\d+)?)s$/.exec(detail.retryDelay) : null;
    if (match) return Math.round(Number(match[1]) * 1000);
  }
  return undefined;
}

function details(parsed: unknown): Array<Record<string, unknown>> {
  const list = (parsed as { error?: { details?: unknown } } | null | undefined)?.error?.details;
  return Array.isArray(list) ? list.filter((detail): detail is Record<string, unknown> => typeof detail === 'object' && detail !== null) : [];
}
