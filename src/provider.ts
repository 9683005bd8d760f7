/**
 * The Provider contract: one required method. Retries, key rotation, fallbacks and routing
 * are decorators around it, never subclasses.
 */

/** A tool call the model asked for. `arguments` is the raw JSON text the model produced. */
export interface ToolCall {
  readonly id: string;
  readonly name: string;
  readonly arguments: string;
}

/**
 * An image in a user message. `file` is what history keeps: a workspace path, never bytes in
 * the database; the vision decorator (src/media/vision.ts) turns the recent ones into `data`
 * (JPEG or PNG bytes, already downscaled, base64) just before a request. A provider sends
 * `data` parts in its own wire format and ignores `file` parts (it cannot read the workspace;
 * the message text already describes the attachment).
 */
export type ImagePart =
  | { readonly type: 'file'; readonly path: string; readonly name: string }
  | { readonly type: 'data'; readonly mime: 'image/jpeg' | 'image/png'; readonly base64: string };

/** The image parts a provider sends: those with bytes. */
export function sendable(images: readonly ImagePart[] | undefined): Array<Extract<ImagePart, { type: 'data' }>> {
  return (images ?? []).filter((image): image is Extract<ImagePart, { type: 'data' }> => image.type === 'data');
}

export interface UserMessage {
  readonly role: 'user';
  readonly content: string;
  /** Photos with this message (sent before the text: Anthropic's vision guide advises images first). */
  readonly images?: readonly ImagePart[];
}

export interface AssistantMessage {
  readonly role: 'assistant';
  readonly content: string;
  readonly toolCalls?: readonly ToolCall[];
}

export interface ToolResultMessage {
  readonly role: 'tool';
  readonly toolCallId: string;
  readonly name: string;
  readonly content: string;
}

/** A conversation message, keyed on `role`. The system prompt travels separately. */
export type ChatMessage = UserMessage | AssistantMessage | ToolResultMessage;

/** What the model is told about a tool. */
export interface ToolSpec {
  readonly name: string;
  readonly description: string;
  /** JSON Schema of the arguments object. */
  readonly parameters: Readonly<Record<string, unknown>>;
}

export interface ChatRequest {
  readonly system: string;
  readonly messages: readonly ChatMessage[];
  readonly tools: readonly ToolSpec[];
  /** Overrides the provider's configured model (`hint:<name>` goes through the router). */
  readonly model?: string;
  /**
   * When given, the provider streams and calls this with each text delta as it arrives; the
   * resolved response still carries the whole text. A provider that cannot stream calls it
   * once with the whole text.
   */
  readonly onTextDelta?: (delta: string) => void;
  /**
   * Told about an image of the request that could not be shown to the model (damaged, not an
   * image, too large), with its workspace path and a one-line reason, so the person hears it too.
   */
  readonly onImageProblem?: (path: string, line: string) => void;
}

export interface ChatResponse {
  readonly text: string;
  readonly toolCalls: readonly ToolCall[];
  readonly usage?: { readonly inputTokens: number; readonly outputTokens: number };
}

export interface Provider {
  /** For logs and status, e.g. "openai:gpt-4o-mini". */
  readonly name: string;
  chat(request: ChatRequest, signal: AbortSignal): Promise<ChatResponse>;
}

/**
 * What kind of failure, where it changes what the caller does:
 * - `context_length`: the conversation is too long for the model (compact it, try once more);
 * - `tools_unsupported`: the endpoint rejects native tools (fall back to XML tool calling);
 * - `auth`: the key is wrong or lacks access (try the next key / fallback, never retry as is).
 */
export type ProviderErrorCode = 'context_length' | 'tools_unsupported' | 'auth';

/** A failed model call, carrying what a retry decision needs. */
export class ProviderError extends Error {
  /** HTTP status, when the endpoint answered. */
  readonly status: number | undefined;
  /** `Retry-After` from the endpoint, in ms. */
  readonly retryAfterMs: number | undefined;
  readonly code: ProviderErrorCode | undefined;

  constructor(message: string, options: { status?: number; retryAfterMs?: number; code?: ProviderErrorCode; cause?: unknown } = {}) {
    super(message, { cause: options.cause });
    this.name = 'ProviderError';
    this.status = options.status;
    this.retryAfterMs = options.retryAfterMs;
    this.code = options.code;
  }

  /** 429, 5xx and network failures may succeed on a later try; other 4xx will not. */
  get retryable(): boolean {
    return this.status === undefined || this.status === 429 || this.status >= 500;
  }
}
