/**
 * Flood control, one mechanism for every channel: when a platform answers a call with "wait"
 * (Telegram's 429 `retry_after`, Discord's rate-limit buckets, Slack's `Retry-After`, Matrix's
 * `M_LIMIT_EXCEEDED`), no call of any kind — send, streamed draft, edit, file, typing — reaches
 * that chat (or, for an account-wide limit, that channel) until the wait has passed. Calling
 * again inside the wait is what makes Telegram lengthen it; a bot that keeps editing a
 * streamed preview through its flood wait can lock itself out of a chat for minutes
 * (core.telegram.org/bots/faq "My bot is hitting limits, how do I avoid this?").
 *
 * The gate wraps a channel's outbound calls; the runtime hands only wrapped channels to the
 * outbox, the streamed draft and the typing indicator. Inside a wait:
 * - typing is skipped (an indicator during a flood wait is pointless);
 * - every other call is refused without reaching the platform, with a {@link FloodWaitError}
 *   (a SendError carrying the time left): the outbox waits that long and sends then (the
 *   reply arrives whole); the draft skips previews until the wait is over.
 */
import type { Logger } from 'pino';
import { SendError, type Channel } from '../channel.ts';
import type { ConversationRef } from '../conversation.ts';

/** A call refused by the gate (it never reached the platform): try again in `retryAfterMs`. */
export class FloodWaitError extends SendError {
  constructor(channel: string, chat: string, remainingMs: number) {
    super(`${channel} asked to wait (flood control): no call to chat ${chat} for ${Math.ceil(remainingMs)} ms more`, { retryAfterMs: Math.ceil(remainingMs) });
    this.name = 'FloodWaitError';
  }
}

/** Channels by name (what the outbox needs of the runtime's map). */
export interface ChannelLookup {
  get(name: string): Channel | undefined;
}

export interface FloodGateOptions {
  /** Monotonic milliseconds. @default performance.now */
  readonly now?: () => number;
  readonly log: Logger;
}

/** Calls addressed to a chat: their first argument is a ConversationRef (or an OutboundMessage, which is one). */
const CHAT_CALLS: ReadonlySet<string> = new Set(['send', 'sendDraft', 'edit', 'sendFile', 'typing']);

export class FloodGate {
  readonly #now: () => number;
  readonly #log: Logger;
  /** Until when (monotonic) each chat — key `channel\0chat` — or whole channel — key `channel` — waits. */
  readonly #holds = new Map<string, number>();
  readonly #wrapped = new WeakMap<Channel, Channel>();

  constructor(options: FloodGateOptions) {
    this.#now = options.now ?? (() => performance.now());
    this.#log = options.log;
  }

  /** Milliseconds left before a call may reach this chat of this channel (0: now). */
  remainingMs(channel: string, chat: string): number {
    const now = this.#now();
    const until = Math.max(this.#holds.get(channel) ?? 0, this.#holds.get(`${channel}\0${chat}`) ?? 0);
    return Math.max(0, until - now);
  }

  /** Records the wait a platform asked for in a failed call (a SendError with `retryAfterMs`). */
  note(channel: string, chat: string, error: unknown): void {
    if (!(error instanceof SendError) || error instanceof FloodWaitError || error.permanent || !(error.retryAfterMs! > 0)) return;
    const now = this.#now();
    for (const [key, until] of this.#holds) if (until <= now) this.#holds.delete(key); // bounded by the chats waiting now
    const key = error.scope === 'channel' ? channel : `${channel}\0${chat}`;
    const until = now + error.retryAfterMs!;
    if ((this.#holds.get(key) ?? 0) >= until) return;
    this.#holds.set(key, until);
    this.#log.warn(
      { channel, ...(error.scope === 'channel' ? {} : { chat }), waitMs: error.retryAfterMs },
      error.scope === 'channel'
        ? 'flood control: the platform asked this channel to wait; holding every send, edit and typing call of it until then'
        : 'flood control: the platform asked to wait before the next call to this chat; holding sends, edits and typing there until then',
    );
  }

  /** The channel with its outbound calls going through the gate (the same wrapper each time). */
  wrap<C extends Channel>(channel: C): C {
    const existing = this.#wrapped.get(channel);
    if (existing) return existing as C;
    const bound = new Map<PropertyKey, unknown>();
    const proxy = new Proxy(channel, {
      get: (target, property) => {
        const value: unknown = Reflect.get(target, property, target);
        if (typeof value !== 'function') return value;
        if (!bound.has(property)) bound.set(property, typeof property === 'string' && CHAT_CALLS.has(property) ? this.#gated(target, property, value as (...args: unknown[]) => Promise<unknown>) : (value as (...args: unknown[]) => unknown).bind(target));
        return bound.get(property);
      },
    });
    this.#wrapped.set(channel, proxy);
    return proxy;
  }

  /** A live view of `channels` through the gate (a channel added later is gated too). */
  view(channels: ReadonlyMap<string, Channel>): ChannelLookup {
    return { get: (name) => {
      const channel = channels.get(name);
      return channel && this.wrap(channel);
    } };
  }

  #gated(channel: Channel, method: string, call: (...args: unknown[]) => Promise<unknown>): (...args: unknown[]) => Promise<unknown> {
    return async (...args) => {
      const chat = (args[0] as ConversationRef | undefined)?.chat ?? '';
      const remaining = this.remainingMs(channel.name, chat);
      if (remaining > 0) {
        if (method === 'typing') return undefined;
        throw new FloodWaitError(channel.name, chat, remaining);
      }
      try {
        return await call.apply(channel, args);
      } catch (error) {
        this.note(channel.name, chat, error);
        throw error;
      }
    };
  }
}
