/**
 * The Channel contract: the only platform-specific code in Switchboard.
 *
 * A channel has a name, listens (pushing normalized messages into the runtime) and sends.
 * Anything else a platform can do (typing, editing, reactions, threads) is an optional
 * capability interface, checked at run time — never a no-op method on this one.
 */
import type { Logger } from 'pino';
import type { ConversationRef } from './conversation.ts';
import type { ChannelState } from './channel-state.ts';
import type { GatewayRoutes } from './route.ts';

/** Who sent a message, as the platform identifies them. */
export interface Sender {
  /** Stable platform id (Telegram user id, IRC nick, email address…). */
  readonly id: string;
  /** Display name, when the platform has one. */
  readonly name?: string;
  /** Other forms an `allow` entry may name this sender by (IRC: `nick!user@host`). */
  readonly aliases?: readonly string[];
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
  /**
   * In a group: the bot was addressed (an @mention, a reply to it, or its name as the first
   * word). The adapter strips a leading mention of the bot from `text` and normalises a
   * command addressed to it (`/new@bot` → `/new`). Adapters never push the bot's own messages
   * (nor other bots').
   */
  readonly addressed?: boolean;
  /** Files, photos and voice notes that came with the message, already saved in the workspace. */
  readonly attachments?: readonly Attachment[];
}

/** A file a person sent, as saved by the {@link AttachmentStore} (or why it was not). */
export interface Attachment {
  readonly kind: 'file' | 'photo' | 'voice' | 'audio' | 'video' | 'sticker';
  /** File name (sanitised), e.g. "report.pdf". */
  readonly name: string;
  /** MIME type, when the platform says. */
  readonly mime?: string;
  /** Bytes. */
  readonly size: number;
  /** Path relative to the workspace ("inbox/telegram/123/report.pdf"); absent when not saved. */
  readonly path?: string;
  /** Why the file was not saved (too large, download failed). */
  readonly note?: string;
}

/** One reply to deliver to a conversation. */
export interface OutboundMessage extends ConversationRef {
  readonly text: string;
  /** Platform id of the inbound message this answers, when there is one. */
  readonly replyTo?: string;
}

/** A workspace file the agent sends back to a conversation. */
export interface OutboundFile {
  /** Absolute path. */
  readonly path: string;
  /** Name shown to people. */
  readonly name: string;
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

/**
 * Optional capability: a message-length limit. The outbox splits a longer reply (markdown) on
 * paragraph / line / word boundaries, never inside a code fence, and sends the parts in order.
 */
export interface MessageLimit {
  readonly maxMessageLength: number;
  /** Length of a markdown part as the platform counts it once rendered. @default UTF-16 length */
  measure?(markdown: string): number;
}

/** Optional capability: a typing indicator, shown when a turn starts and every `typingIntervalMs` while it runs. */
export interface TypingIndicator {
  readonly typingIntervalMs: number;
  typing(ref: ConversationRef): Promise<void>;
}

/**
 * Optional capability: messages that can be edited after they are sent. With `stream = true`
 * the reply appears as a draft that grows as the model streams (edited at most every
 * `editIntervalMs`); the outbox finalises it by editing it to the reply's first part.
 */
export interface MessageEditor {
  readonly editIntervalMs: number;
  /** Sends a new message (markdown, within the limit); returns its platform id. */
  sendDraft(message: OutboundMessage): Promise<string>;
  /** Replaces the text of a message this channel sent. Throw a permanent SendError when it is gone. */
  edit(ref: ConversationRef, messageId: string, text: string): Promise<void>;
}

/** Optional capability: sending a file to a conversation. */
export interface FileSender {
  /**
   * Largest file, in bytes, the platform takes from the bot, as far as the channel knows
   * (Discord: 10 MiB; Matrix: the homeserver's `m.upload.size`, read from its media config).
   * The send_file tool tells the model a larger file cannot be sent here; `sendFile` refuses
   * one before uploading (and describes it to the person).
   * @default no limit of the channel's own (the tool's general one applies)
   */
  readonly maxFileBytes?: number;
  sendFile(ref: ConversationRef, file: OutboundFile): Promise<void>;
}

/**
 * Optional capability: conditions an operator must know about that are not errors of the
 * connection (e.g. Matrix rooms that are end-to-end encrypted and cannot be read). Shown in
 * health / `/status`.
 */
export interface StatusNotes {
  statusNotes(): readonly string[];
}

/**
 * Optional capability: this channel's messages that an earlier run left unanswered (stopped
 * mid-turn, crashed, or still waiting in the queue) are not run again at start. The runtime
 * marks them `interrupted` in the inbox and hands them here once, before `listen`, so the
 * channel can tell its person what went unanswered. For a live session like the terminal: the
 * person who stopped it is there to ask again, and a late answer would read as the answer to
 * whatever they type next. Must not throw.
 */
export interface SkipsInterrupted {
  skipInterrupted(messages: readonly InboundMessage[]): void;
}

const has =
  <T>(key: string, type: 'number' | 'function') =>
  (channel: Channel): channel is Channel & T =>
    typeof (channel as unknown as Record<string, unknown>)[key] === type;

export const hasMessageLimit = has<MessageLimit>('maxMessageLength', 'number');
export const hasTyping = has<TypingIndicator>('typing', 'function');
export const canEdit = has<MessageEditor>('edit', 'function');
export const canSendFiles = has<FileSender>('sendFile', 'function');
export const hasStatusNotes = has<StatusNotes>('statusNotes', 'function');
export const skipsInterrupted = has<SkipsInterrupted>('skipInterrupted', 'function');

/** Saves files people send into the workspace, within the size limit. */
export interface AttachmentStore {
  /** Bytes a file may have; larger ones are described to the model but not downloaded. */
  readonly maxBytes: number;
  save(input: AttachmentInput): Promise<Attachment>;
}

export interface AttachmentInput {
  readonly channel: string;
  /** Platform message id (files of one message share a folder). */
  readonly messageId: string;
  readonly kind: Attachment['kind'];
  /** Name as sent; a safe one is made from it (or from kind + mime when absent). */
  readonly name?: string;
  readonly mime?: string;
  /** Size the platform announces, checked before downloading. */
  readonly size?: number;
  /** Fetches the content (only called when within the limit). */
  download(signal: AbortSignal): Promise<Uint8Array | AsyncIterable<Uint8Array>>;
}

/** What the composition root gives every channel factory besides the channel's own config. */
export interface ChannelContext {
  /** Instance name, e.g. "telegram": the first part of conversation keys. */
  readonly name: string;
  readonly log: Logger;
  /** The agent's name, e.g. "Switchboard" (a group message starting with it is addressed to the bot). */
  readonly assistantName: string;
  readonly attachments: AttachmentStore;
  /**
   * This channel's durable state (a sync token, read positions, thread records…), in the
   * database beside the inbox: in a cluster the node that takes the channel over finds it where
   * the last owner left it. Read it when `listen` starts (the channel may be taken over between
   * construction and then), never in the factory.
   */
  readonly state: ChannelState;
  /**
   * A directory of this channel's own (created, private to it): `<data_dir>/channels/<name>/`.
   * Channel state lived in files here before it moved into {@link state}; a channel imports its
   * old file from here once (src/state-import.ts). '' in tests: none.
   */
  readonly stateDir: string;
  /** The HTTP gateway, when `[gateway]` is configured: for channels that receive over HTTP (webhooks). */
  readonly gateway?: GatewayRoutes;
  /**
   * Where a channel reports a failed write of its own state (to {@link state}), so a full
   * disk shows in the log and `/readyz` once, like the inbox's. Returns an error to throw (or to
   * answer with) when it was the disk being full, else undefined. Omitted in tests.
   */
  readonly storage?: { failed(error: unknown, what: string): Error | undefined };
}

/** A failed send, carrying what a retry decision needs. */
export class SendError extends Error {
  /** Retrying cannot help (the chat is gone, the bot was removed…). */
  readonly permanent: boolean;
  /** The platform asked us to wait this long before trying again. */
  readonly retryAfterMs: number | undefined;
  /**
   * What that wait covers: 'chat' (the default) — only calls to this conversation's chat
   * (Telegram's per-chat flood control, Discord's per-channel route buckets, Slack's
   * per-channel posting limit); 'channel' — every call of this channel (Discord's global
   * limit, Matrix's per-account limit). The runtime's flood gate (src/runtime/flood.ts) holds
   * every call of that scope — sends, edits, typing — until the wait has passed.
   */
  readonly scope: 'chat' | 'channel';

  constructor(message: string, options: { permanent?: boolean; retryAfterMs?: number; scope?: 'chat' | 'channel'; cause?: unknown } = {}) {
    super(message, { cause: options.cause });
    this.name = 'SendError';
    this.permanent = options.permanent ?? false;
    this.retryAfterMs = options.retryAfterMs;
    this.scope = options.scope ?? 'chat';
  }
}
