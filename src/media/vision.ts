/**
 * Images for one model endpoint, as a Provider decorator. History carries photos as workspace
 * paths; just before each request the most recent ones are read, downscaled to this provider's
 * limits and sent as bytes, the older ones as a one-line stand-in. With `vision = "auto"` an
 * endpoint that refuses image input is remembered per model and asked again with the text
 * description every message already carries (what every model got before images) — the person
 * still gets an answer, and the log says so once.
 *
 * The refusal is remembered in memory, not in the database: after a restart the first photo
 * costs one refused request per model, and an operator who swaps a text model for a vision
 * model behind the same name (an Ollama tag, a llama-server restarted with --mmproj) gets
 * images again without clearing anything.
 */
import type { Logger } from 'pino';
import { ProviderError, type ChatMessage, type ChatRequest, type ChatResponse, type ImagePart, type Provider, type UserMessage } from '../provider.ts';
import { rejectsImages } from '../endpoint/http.ts';
import type { ImageLimits } from './image.ts';
import type { WorkspaceImages } from './workspace-images.ts';

/** `[provider] vision`: true = always send images; false = never (text description); auto = send, fall back on refusal. */
export type VisionMode = 'auto' | boolean;

/** Models of one endpoint that refused image input (shared by its API keys). */
export interface VisionMemory {
  refuses(model: string): boolean;
  /** Records a refusal; true the first time for this model. */
  remember(model: string): boolean;
}

export function createVisionMemory(): VisionMemory {
  const refused = new Set<string>();
  return {
    refuses: (model) => refused.has(model),
    remember: (model) => !refused.has(model) && Boolean(refused.add(model)),
  };
}

export interface VisionProviderOptions {
  readonly vision: VisionMode;
  /** The endpoint's own model (a request may name another). */
  readonly model: string;
  readonly limits: ImageLimits;
  readonly images: WorkspaceImages;
  /** The most recent images of the conversation the model sees; older ones become a line of text (0: none, as `vision = false`). @default 4 */
  readonly maxImages?: number;
  readonly memory: VisionMemory;
  readonly log: Logger;
}

export function createVisionProvider(inner: Provider, options: VisionProviderOptions): Provider {
  const maxImages = Math.min(options.maxImages ?? 4, options.limits.maxImages);
  return {
    name: inner.name,
    async chat(request: ChatRequest, signal: AbortSignal): Promise<ChatResponse> {
      if (!request.messages.some((message) => message.role === 'user' && message.images && message.images.length > 0)) return inner.chat(request, signal);
      const model = request.model ?? options.model;
      if (options.vision === false || maxImages === 0 || options.memory.refuses(model)) return inner.chat(withoutImages(request), signal);
      const shown = await withImages(request, options.images, options.limits, maxImages);
      try {
        return await inner.chat(shown, signal);
      } catch (error) {
        if (options.vision !== 'auto' || signal.aborted || !(error instanceof ProviderError) || !refusal(error)) throw error;
        if (options.memory.remember(model)) {
          options.log.warn({ provider: inner.name, model, status: error.status, error: error.message.slice(0, 300) }, 'the endpoint refuses image input; this model gets a text description of photos from now on (set vision = false to skip the try, or use a vision model)');
        }
        return inner.chat(withoutImages(request), signal);
      }
    },
  };
}

function refusal(error: ProviderError): boolean {
  const status = error.status;
  return status !== undefined && [400, 404, 415, 422, 500].includes(status) && rejectsImages(error.message);
}

/** The request as it was before images: no image parts (each message's text already describes its attachments). */
export function withoutImages(request: ChatRequest): ChatRequest {
  return { ...request, messages: request.messages.map((message) => (message.role === 'user' && message.images ? textOnly(message) : message)) };
}

function textOnly(message: UserMessage): UserMessage {
  const { images: _images, ...rest } = message;
  return rest;
}

/** The newest `maxImages` file images read and prepared; the rest, and any that fail, as text. */
async function withImages(request: ChatRequest, images: WorkspaceImages, limits: ImageLimits, maxImages: number): Promise<ChatRequest> {
  const slots: Array<{ message: number; image: number; part: ImagePart }> = [];
  request.messages.forEach((message, index) => {
    if (message.role === 'user') message.images?.forEach((part, image) => slots.push({ message: index, image, part }));
  });
  slots.reverse();
  const recent = slots.slice(0, maxImages);
  const loaded = await Promise.all(recent.map(({ part }) => (part.type === 'file' ? images.load(part.path, limits) : undefined)));

  const parts = new Map<number, ImagePart[]>();
  const notes = new Map<number, string[]>();
  const add = <T>(map: Map<number, T[]>, index: number, value: T): void => void (map.get(index) ?? map.set(index, []).get(index)!).push(value);
  let total = 0;
  slots.forEach((slot, rank) => {
    const { part } = slot;
    const result = rank < recent.length ? loaded[rank] : undefined;
    if (part.type === 'data') {
      total += (part.base64.length * 3) / 4;
      add(parts, slot.message, part);
      return;
    }
    if (rank >= recent.length) return add(notes, slot.message, `[Image ${part.name}: shown in an earlier turn, no longer shown (only the ${maxImages} most recent images stay in view)]`);
    if (result === undefined || (!result.ok && 'gone' in result)) return add(notes, slot.message, `[Image ${part.name} is no longer in the workspace, so it cannot be shown]`);
    if (!result.ok) {
      const line = `[Image ${part.name} could not be shown to you: ${result.reason}]`;
      request.onImageProblem?.(part.path, `I could not look at ${part.name}: ${result.reason}.`);
      return add(notes, slot.message, line);
    }
    if (total + result.data.length > limits.maxTotalBytes) return add(notes, slot.message, `[Image ${part.name}: not shown, the request's image budget is used by newer images]`);
    total += result.data.length;
    add(parts, slot.message, { type: 'data', mime: result.mime, base64: result.data.toString('base64') });
  });

  const messages: ChatMessage[] = request.messages.map((message, index) => {
    if (message.role !== 'user' || !message.images) return message;
    const shown = (parts.get(index) ?? []).reverse();
    const lines = (notes.get(index) ?? []).reverse();
    const content = lines.length === 0 ? message.content : [message.content, ...lines].filter((text) => text !== '').join('\n');
    const rest = textOnly(message);
    return shown.length === 0 ? { ...rest, content } : { ...rest, content, images: shown };
  });
  return { ...request, messages };
}
