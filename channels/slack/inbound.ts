/**
 * Slack events → InboundMessage (pure; the receiver adds sender names and attachments).
 *
 * Conversations:
 * - a DM (channel type im) is one conversation: chat = the D… channel id, direct; a DM
 *   message inside a thread gets thread = its thread_ts;
 * - in a channel, a reply goes into the thread of the message it answers and each thread is
 *   its own conversation: an ADDRESSED top-level message gets thread = its own ts (the reply
 *   opens a thread under it), a message inside a thread gets thread = thread_ts, and an
 *   UNADDRESSED top-level message is pushed without a thread (channel chatter the runtime
 *   keeps as context for the next addressed turn in that channel or its threads).
 *
 * Ids: `<channel>:<ts>` — a ts is unique within a channel and the same in the `message` and
 * the `app_mention` event of one message and in every redelivery, so the inbox dedupes them.
 */
import type { InboundMessage } from '../../src/channel.ts';
import { expectShape } from '../../src/inbound/malformed.ts';

/** The file fields of a Slack message event we use. */
export interface SlackFile {
  readonly id?: string;
  readonly name?: string;
  readonly title?: string;
  readonly mimetype?: string;
  readonly filetype?: string;
  readonly size?: number;
  readonly mode?: string;
  readonly subtype?: string;
  readonly url_private?: string;
  readonly url_private_download?: string;
  /**
   * "check_file_info": a Slack Connect stub without name, size or URLs; files.info has the
   * rest (https://api.slack.com/types/file, Slack Connect).
   */
  readonly file_access?: string;
}

/** The fields of `message` / `app_mention` events we use. */
export interface SlackMessageEvent {
  readonly type: string;
  readonly subtype?: string;
  readonly channel?: string;
  readonly channel_type?: string;
  readonly user?: string;
  readonly bot_id?: string;
  readonly text?: string;
  readonly ts?: string;
  readonly thread_ts?: string;
  readonly parent_user_id?: string;
  readonly files?: readonly SlackFile[];
  readonly user_profile?: { readonly display_name?: string; readonly real_name?: string; readonly name?: string };
}

/** Who the bot is (from auth.test). */
export interface SlackIdentity {
  /** The bot user id (U…): the `account` of every conversation and what <@…> mentions name. */
  readonly userId: string;
  /** The bot id (B…) its own messages carry. */
  readonly botId?: string;
  readonly teamId: string;
  /** Names that address the bot as a message's first word (its Slack user name, the assistant's name). */
  readonly names: readonly string[];
}

export interface NormaliseOptions {
  /** Channel instance name. */
  readonly channel: string;
  readonly identity: SlackIdentity;
  /** Whether the bot has posted in this thread (a message in it is addressed to the bot). */
  readonly botInThread: (chat: string, thread: string) => boolean;
}

export interface Normalised {
  readonly message: InboundMessage;
  readonly files: readonly SlackFile[];
}

/** Message subtypes that are people talking; everything else (edits, joins, deletions…) is ignored. */
const talkingSubtypes = new Set(['file_share', 'thread_broadcast']);

/** Whether the event is a message or mention this channel handles at all. */
export function isMessageEvent(event: unknown): event is SlackMessageEvent {
  if (typeof event !== 'object' || event === null) return false;
  const type = (event as { type?: unknown }).type;
  return type === 'message' || type === 'app_mention';
}

/**
 * Checks every field this channel reads of a message event (after {@link isMessageEvent});
 * throws MalformedPayload naming the first that does not fit. The receiver logs and skips it.
 */
export function checkEvent(event: SlackMessageEvent): void {
  const e = expectShape(event, 'event', {
    type: 'string',
    'subtype?': 'string',
    'channel?': 'string',
    'channel_type?': 'string',
    'user?': 'string',
    'bot_id?': 'string',
    'text?': 'string',
    'ts?': 'string',
    'thread_ts?': 'string',
    'parent_user_id?': 'string',
    'files?': 'array',
    'user_profile?': 'object',
  });
  for (const [i, file] of ((e.files ?? []) as unknown[]).entries()) {
    expectShape(file, `event.files.${i}`, { 'id?': 'string', 'file_access?': 'string', 'name?': 'string', 'title?': 'string', 'mimetype?': 'string', 'size?': 'number', 'mode?': 'string', 'subtype?': 'string', 'url_private?': 'string', 'url_private_download?': 'string' });
  }
  if (e.user_profile !== undefined) expectShape(e.user_profile, 'event.user_profile', { 'display_name?': 'string', 'real_name?': 'string', 'name?': 'string' });
}

/** The id the inbox dedupes on. */
export const messageId = (chat: string, ts: string): string => `${chat}:${ts}`;

/** Whether a message is a DM (app_mention events carry no channel_type; DM ids start with D). */
export const isDirect = (event: SlackMessageEvent): boolean =>
  event.channel_type === undefined ? (event.channel ?? '').startsWith('D') : event.channel_type === 'im';

/** The thread a message is in (a thread parent has thread_ts === ts and is top level). */
export const threadOf = (event: SlackMessageEvent): string | undefined =>
  event.thread_ts !== undefined && event.thread_ts !== event.ts ? event.thread_ts : undefined;

/** A message the bot itself (or another bot) posted. */
export const fromABot = (event: SlackMessageEvent, identity: SlackIdentity): boolean =>
  event.bot_id !== undefined || event.subtype === 'bot_message' || event.user === identity.userId;

/** Turns a Slack event into the message to push, or undefined when it is not one (bots, edits, joins…). */
export function normalise(event: SlackMessageEvent, options: NormaliseOptions): Normalised | undefined {
  checkEvent(event);
  const { identity } = options;
  if (event.subtype !== undefined && !talkingSubtypes.has(event.subtype)) return undefined;
  if (fromABot(event, identity)) return undefined;
  const chat = event.channel;
  const ts = event.ts;
  const user = event.user;
  if (!chat || !ts || !user) return undefined;

  const raw = event.text ?? '';
  const direct = isDirect(event);
  const inThread = threadOf(event);
  const mentioned = event.type === 'app_mention' || mentions(raw, identity.userId);
  const text = commandFor(plainText(stripLeadingMention(raw, identity.userId)), identity.names);
  const addressed =
    direct ||
    mentioned ||
    startsWithName(text, identity.names) ||
    (inThread !== undefined && (event.parent_user_id === identity.userId || options.botInThread(chat, inThread)));
  const thread = inThread ?? (!direct && addressed ? ts : undefined);
  const profile = event.user_profile;
  const name = profile?.display_name || profile?.real_name || profile?.name;

  const message: InboundMessage = {
    channel: options.channel,
    account: identity.userId,
    chat,
    ...(thread === undefined ? {} : { thread }),
    id: messageId(chat, ts),
    sender: name ? { id: user, name } : { id: user },
    text,
    timestamp: Math.round(Number.parseFloat(ts) * 1000) || Date.now(),
    direct,
    addressed,
  };
  return { message, files: event.files ?? [] };
}

const escapeRegExp = (text: string): string => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** `<@BOTID>` (or `<@BOTID|name>`) anywhere in the raw text. */
export function mentions(raw: string, userId: string): boolean {
  return new RegExp(`<@${escapeRegExp(userId)}(?:\\|[^>]*)?>`).test(raw);
}

/** Removes a leading `<@BOTID>` and the punctuation after it. */
export function stripLeadingMention(raw: string, userId: string): string {
  return raw.replace(new RegExp(`^\\s*<@${escapeRegExp(userId)}(?:\\|[^>]*)?>[\\s,:;.!-]*`), '');
}

/** Whether the text starts with one of the bot's names as a word ("Switchboard, what…", "@switchboard …"). */
export function startsWithName(text: string, names: readonly string[]): boolean {
  const start = text.trimStart().toLowerCase();
  return names.some((name) => {
    const wanted = name.trim().toLowerCase();
    if (wanted === '') return false;
    for (const prefix of [wanted, `@${wanted}`]) {
      if (start.startsWith(prefix) && /^(?:$|[\s,:;.!?])/.test(start.slice(prefix.length))) return true;
    }
    return false;
  });
}

/** `/new@botname …` → `/new …` (Slack has no such syntax, but people type it). */
export function commandFor(text: string, names: readonly string[]): string {
  const match = /^(\/[A-Za-z0-9_]+)@(\S+)/.exec(text);
  if (!match) return text;
  const target = match[2]!.toLowerCase();
  return names.some((name) => name.trim().toLowerCase() === target) ? match[1]! + text.slice(match[0].length) : text;
}

/**
 * Slack's message markup → plain text: <@U1|name> → @name, <#C1|general> → #general,
 * <!here> → @here, <url|label> → "label (url)", <url> → url, then &amp; &lt; &gt; decoded.
 */
export function plainText(raw: string): string {
  const text = raw.replace(/<([^<>]*)>/g, (_whole, inner: string) => {
    const bar = inner.indexOf('|');
    const target = bar === -1 ? inner : inner.slice(0, bar);
    const label = bar === -1 ? undefined : inner.slice(bar + 1);
    if (target.startsWith('@')) return label ? `@${label.replace(/^@/, '')}` : target;
    if (target.startsWith('#')) return `#${label ?? target.slice(1)}`;
    if (target.startsWith('!')) {
      return label || `@${target.slice(1).split('^')[0]}`;
    }
    if (label === undefined || label === '') return target.replace(/^mailto:/, '');
    const bare = target.replace(/^mailto:/, '');
    return label === bare || label === target ? label : `${label} (${bare})`;
  });
  return text.replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&amp;/g, '&');
}

/** The attachment kind for a Slack file. */
export function fileKind(file: SlackFile): 'file' | 'photo' | 'voice' | 'audio' | 'video' {
  const mime = file.mimetype ?? '';
  if (file.subtype === 'slack_audio') return 'voice';
  if (mime.startsWith('image/')) return 'photo';
  if (mime.startsWith('audio/')) return 'audio';
  if (mime.startsWith('video/')) return 'video';
  return 'file';
}
