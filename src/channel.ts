/**
 * The Channel contract: the only platform-specific code in Switchboard.
 *
 * A channel has a name, listens (pushing normalized messages into the runtime) and sends.
 * Anything else a platform can do (typing, editing, reactions, threads) is an optional
 * capability interface, checked at run time — never a no-op method on this one.
 */
import type { ConversationRef } from './conversation.ts';

/** Who sent a message, as the platform identifies them. */
export interface Sender {
  /** Stable platform id (Telegram user id, IRC nick, email address…). */
  readonly id: string;
  /** Display name, when the platform has one. */
  readonly name?: string;
}

/** One message received from a platform, normalized. */
export interface InboundMessage extends ConversationRef {
  /** Platform message id: unique per channel, used to recognise redeliveries. */
  readonly id: string;
  readonly sender: Sender;
  /** Plain text of the message. */
  readonly text: string;
  /** When the platform says it was sent (ms since the epoch). */
  readonly timestamp: number;
  /** A direct message (one person and the bot), as opposed to a group, room or channel. @default true */
  readonly direct?: boolean;
  /** In a group: the bot was addressed (an @mention, a reply to it, or its name first). */
  readonly addressed?: boolean;
}

/** One reply to deliver to a conversation. */
export interface OutboundMessage extends ConversationRef {
  readonly text: string;
  /** Platform id of the inbound message this answers, when there is one. */
  readonly replyTo?: string;
}

/** What the runtime did with a pushed message. */
export type PushResult = 'accepted' | 'duplicate';

/**
 * Hands a message to the runtime. Resolves once the message is durably in the inbox
 * (only then should the adapter acknowledge it to the platform). Waits while the queue is
 * full (backpressure). Rejects when the runtime is shutting down: do not acknowledge then.
 */
export type Push = (message: InboundMessage) => Promise<PushResult>;

/** How a running `listen` reports its health to the supervisor. */
export interface ListenLink {
  /** The connection is up and messages can flow. Call once per `listen`. */
  ready(): void;
  /** Proof of life (a poll returned, a heartbeat was acknowledged). */
  alive(): void;
  /** The connection looks up but has gone deaf: the supervisor restarts `listen`. */
  deaf(reason: string): void;
}

export interface Channel {
  /** Instance name as configured, e.g. "terminal" — the first part of conversation keys. */
  readonly name: string;
  /**
   * Receive messages until `signal` aborts. Resolving or rejecting before that counts as a
   * dropped connection, and the supervisor restarts it with backoff.
   */
  listen(push: Push, signal: AbortSignal, link: ListenLink): Promise<void>;
  /** Deliver one message. Throw {@link SendError} to tell the outbox how to retry. */
  send(message: OutboundMessage): Promise<void>;
}

/** Optional capability: the supervisor restarts the channel when no `alive()` came for this long. */
export interface LivenessWatched {
  readonly livenessTimeoutMs: number;
}

export function isLivenessWatched(channel: Channel): channel is Channel & LivenessWatched {
  return typeof (channel as Partial<LivenessWatched>).livenessTimeoutMs === 'number';
}

/** A failed send, carrying what a retry decision needs. */
export class SendError extends Error {
  /** Retrying cannot help (the chat is gone, the bot was removed…). */
  readonly permanent: boolean;
  /** The platform asked us to wait this long before trying again. */
  readonly retryAfterMs: number | undefined;

  constructor(message: string, options: { permanent?: boolean; retryAfterMs?: number; cause?: unknown } = {}) {
    super(message, { cause: options.cause });
    this.name = 'SendError';
    this.permanent = options.permanent ?? false;
    this.retryAfterMs = options.retryAfterMs;
  }
}
