/**
 * Discord message (the API's JSON, as the gateway dispatches it and REST returns it) →
 * InboundMessage. Pure: the channel kind (DM, guild text, thread + parent) is looked up by the
 * caller, since REST messages do not say.
 */
import type { Attachment, InboundMessage } from '../../src/channel.ts';
import { expectShape, MalformedPayload } from '../../src/inbound/malformed.ts';

export interface RawUser {
  readonly id: string;
  readonly username?: string;
  readonly global_name?: string | null;
  readonly bot?: boolean;
}

export interface RawAttachment {
  readonly id: string;
  readonly filename: string;
  readonly size?: number;
  readonly url: string;
  readonly content_type?: string;
}

/** The fields of a Discord message object this adapter reads. */
export interface RawMessage {
  readonly id: string;
  readonly channel_id: string;
  readonly guild_id?: string;
  /** Gateway MESSAGE_CREATE only. */
  readonly channel_type?: number;
  readonly author: RawUser;
  readonly member?: { readonly nick?: string | null } | null;
  readonly content: string;
  readonly timestamp?: string;
  readonly type?: number;
  readonly flags?: number;
  readonly webhook_id?: string;
  readonly mentions?: readonly RawUser[];
  /** `type` 0 DEFAULT (a reply), 1 FORWARD. */
  readonly message_reference?: { readonly type?: number; readonly message_id?: string; readonly channel_id?: string } | null;
  readonly referenced_message?: { readonly author?: RawUser } | null;
  readonly attachments?: readonly RawAttachment[];
  /** A forward's copy of the message it forwards (Discord sends one). */
  readonly message_snapshots?: readonly RawSnapshot[];
}

/**
 * A forwarded message: the forward itself has empty `content`; the text and files are in
 * `message_snapshots[0].message`, a minimal copy without the author (discord/discord-api-docs,
 * developers/resources/message.mdx, "Message Reference Types" FORWARD = 1 and "Message
 * Snapshot Object").
 */
export interface RawSnapshot {
  readonly message: { readonly content?: string; readonly attachments?: readonly RawAttachment[]; readonly flags?: number };
}

const FORWARD = 1;

/** The forwarded message a forward carries, if `raw` is one. */
export function forwardedOf(raw: RawMessage): RawSnapshot['message'] | undefined {
  return raw.message_reference?.type === FORWARD ? raw.message_snapshots?.[0]?.message : undefined;
}

/** Every file of a message: its own, and those of the message it forwards. */
export function attachmentsOf(raw: RawMessage): Array<{ readonly attachment: RawAttachment; readonly flags: number }> {
  const forwarded = forwardedOf(raw);
  return [
    ...(raw.attachments ?? []).map((attachment) => ({ attachment, flags: raw.flags ?? 0 })),
    ...(forwarded?.attachments ?? []).map((attachment) => ({ attachment, flags: forwarded?.flags ?? 0 })),
  ];
}

/** Where a message was posted. */
export interface ChannelInfo {
  /** Discord channel type: 1 DM, 3 group DM, 0/5 guild text, 10/11/12 threads… */
  readonly type: number;
  /** A thread's parent channel. */
  readonly parentId?: string;
}

export interface BotIdentity {
  readonly id: string;
  /** Names that address the bot as a message's first word (username, display name, assistant name). */
  readonly names: readonly string[];
}

export const THREAD_TYPES: ReadonlySet<number> = new Set([10, 11, 12]);
const DIRECT_TYPES: ReadonlySet<number> = new Set([1, 3]);
/** DEFAULT and REPLY; the rest are system messages (joins, pins, thread created…). */
const PERSON_TYPES: ReadonlySet<number> = new Set([0, 19]);
const VOICE_MESSAGE_FLAG = 1 << 13;
const DISCORD_EPOCH = 1_420_070_400_000n;

export interface NormaliseOptions {
  /** Channel instance name (ctx.name). */
  readonly channel: string;
  readonly bot: BotIdentity;
  readonly info: ChannelInfo;
  /** Whether the bot sent this message id (a reply to it addresses the bot). */
  readonly sentByBot?: (messageId: string) => boolean;
}

const userShape = { id: 'string', 'username?': 'string', 'global_name?': 'string|null', 'bot?': 'boolean' };

/**
 * Checks every field {@link normalise} and the intake read (a gateway dispatch or a REST page
 * is not trusted); throws {@link MalformedPayload} naming the first that does not fit.
 */
export function checkMessage(raw: unknown): asserts raw is RawMessage {
  const m = expectShape(raw, 'message', {
    id: 'string',
    channel_id: 'string',
    'guild_id?': 'string',
    'channel_type?': 'number',
    author: 'object',
    'member?': 'object|null',
    content: 'string',
    'timestamp?': 'string',
    'type?': 'number',
    'flags?': 'number',
    'mentions?': 'array',
    'message_reference?': 'object|null',
    'referenced_message?': 'object|null',
    'attachments?': 'array',
    'message_snapshots?': 'array',
  });
  expectShape(m.author, 'message.author', userShape);
  if (m.member) expectShape(m.member, 'message.member', { 'nick?': 'string|null' });
  for (const [i, user] of ((m.mentions ?? []) as unknown[]).entries()) expectShape(user, `message.mentions.${i}`, userShape);
  if (m.message_reference) expectShape(m.message_reference, 'message.message_reference', { 'type?': 'number', 'message_id?': 'string' });
  const attachmentShape = { id: 'string', filename: 'string', 'size?': 'number', url: 'string', 'content_type?': 'string' };
  for (const [i, snapshot] of ((m.message_snapshots ?? []) as unknown[]).entries()) {
    const wrapper = expectShape(snapshot, `message.message_snapshots.${i}`, { message: 'object' });
    const copy = expectShape(wrapper.message, `message.message_snapshots.${i}.message`, { 'content?': 'string', 'attachments?': 'array', 'flags?': 'number' });
    for (const [j, attachment] of ((copy.attachments ?? []) as unknown[]).entries()) expectShape(attachment, `message.message_snapshots.${i}.message.attachments.${j}`, attachmentShape);
  }
  if (m.referenced_message) {
    const referenced = expectShape(m.referenced_message, 'message.referenced_message', { 'author?': 'object' });
    if (referenced.author !== undefined) expectShape(referenced.author, 'message.referenced_message.author', userShape);
  }
  for (const [i, attachment] of ((m.attachments ?? []) as unknown[]).entries()) {
    expectShape(attachment, `message.attachments.${i}`, attachmentShape);
  }
  if (!/^\d{1,20}$/.test(m.id as string)) throw new MalformedPayload('message.id', 'must be a snowflake (digits)');
}

/**
 * The normalised message (without attachments), or undefined when it is not for the runtime.
 * Throws {@link MalformedPayload} for a message with a field missing or of the wrong type.
 */
export function normalise(raw: RawMessage, options: NormaliseOptions): Omit<InboundMessage, 'attachments'> | undefined {
  checkMessage(raw);
  const { bot, info } = options;
  if (raw.author.bot === true || raw.webhook_id !== undefined || raw.author.id === bot.id) return undefined;
  if (raw.type !== undefined && !PERSON_TYPES.has(raw.type)) return undefined;
  const forwarded = forwardedOf(raw);
  const forwardedText = forwarded?.content?.trim() ?? '';
  if (raw.content.trim() === '' && forwardedText === '' && attachmentsOf(raw).length === 0) return undefined;

  const direct = DIRECT_TYPES.has(info.type);
  const thread = THREAD_TYPES.has(info.type);
  const mentionPattern = new RegExp(`<@!?${bot.id}>`);
  const mentioned = mentionPattern.test(raw.content);
  // a forward of the bot's own message is not a reply to it
  const referenced = forwarded ? undefined : raw.message_reference?.message_id;
  const repliedToBot =
    raw.referenced_message?.author?.id === bot.id || (referenced !== undefined && (options.sentByBot?.(referenced) ?? false));
  const own = cleanText(raw.content, bot, raw.mentions ?? []);
  // the snapshot's mentions are not kept by Discord: ids stay as they are (the bot's own become its name)
  const text = forwarded ? [own, `(forwarded message)\n${cleanText(forwarded.content ?? '', bot, [])}`.trim()].filter((part) => part !== '').join('\n') : own;
  const named = bot.names.some((name) => startsWithName(own, name));

  return {
    channel: options.channel,
    account: bot.id,
    chat: thread ? (info.parentId ?? raw.channel_id) : raw.channel_id,
    ...(thread ? { thread: raw.channel_id } : {}),
    id: raw.id,
    sender: { id: raw.author.id, name: raw.member?.nick || raw.author.global_name || raw.author.username || raw.author.id },
    text,
    timestamp: timestampOf(raw),
    direct,
    addressed: direct || mentioned || repliedToBot || named,
  };
}

/**
 * Strips a leading mention of the bot, shows other user mentions as @name, and turns
 * `/cmd@bot` into `/cmd`.
 */
export function cleanText(content: string, bot: BotIdentity, mentions: readonly RawUser[]): string {
  let text = content.replace(new RegExp(`^\\s*<@!?${bot.id}>[\\s,:]*`), '');
  const names = new Map(mentions.map((user) => [user.id, user.global_name || user.username || user.id]));
  text = text.replace(/<@!?(\d+)>/g, (whole, id: string) => {
    if (id === bot.id) return `@${bot.names[0] ?? 'bot'}`;
    const name = names.get(id);
    return name ? `@${name}` : whole;
  });
  const command = /^([/!][A-Za-z0-9_]+)@(\S+)/.exec(text);
  if (command && bot.names.some((name) => name.toLowerCase() === command[2]!.toLowerCase())) text = command[1]! + text.slice(command[0].length);
  return text.trim();
}

function startsWithName(text: string, name: string): boolean {
  if (name.trim() === '') return false;
  const head = text.slice(0, name.length);
  if (head.toLowerCase() !== name.toLowerCase()) return false;
  const next = text.charAt(name.length);
  return next === '' || /[\s,.:;!?]/.test(next);
}

function timestampOf(raw: RawMessage): number {
  const parsed = raw.timestamp === undefined ? Number.NaN : Date.parse(raw.timestamp);
  return Number.isFinite(parsed) ? parsed : snowflakeTime(raw.id);
}

/** When a snowflake was made (ms since the epoch). */
export function snowflakeTime(id: string): number {
  try {
    return Number((BigInt(id) >> 22n) + DISCORD_EPOCH);
  } catch {
    return Date.now();
  }
}

/** The smallest snowflake made at `ms` (ms since the epoch). */
export function snowflakeAt(ms: number): string {
  return ((BigInt(Math.max(0, Math.floor(ms))) - DISCORD_EPOCH) << 22n).toString();
}

/** Whether snowflake `a` is after `b`. */
export function isAfter(a: string, b: string): boolean {
  try {
    return BigInt(a) > BigInt(b);
  } catch {
    return a.length === b.length ? a > b : a.length > b.length;
  }
}

/** The snowflake just before `id` (a position from which `id` itself is fetched again). */
export function before(id: string): string {
  try {
    return (BigInt(id) - 1n).toString();
  } catch {
    return '0';
  }
}

export function attachmentKind(attachment: RawAttachment, messageFlags = 0): Attachment['kind'] {
  const mime = attachment.content_type ?? '';
  if (mime.startsWith('image/')) return 'photo';
  if (mime.startsWith('audio/')) return (messageFlags & VOICE_MESSAGE_FLAG) !== 0 ? 'voice' : 'audio';
  if (mime.startsWith('video/')) return 'video';
  return 'file';
}
