/**
 * Matrix room event → InboundMessage: what the bot answers at all, ids, conversation refs
 * (room, thread root), sender, whether the bot was addressed, mention stripping and the files
 * that came with it. Pure functions, no I/O: the channel resolves replies and downloads files.
 */
import { parseEncryptedFile, type EncryptedFileKeys } from './attachment-crypto.ts';
import type { Attachment, InboundMessage } from '../../src/channel.ts';

/** A room event as /sync delivers it (client format). */
export interface RoomEvent {
  readonly event_id: string;
  readonly type: string;
  readonly sender: string;
  readonly origin_server_ts: number;
  readonly content: Record<string, unknown>;
  readonly state_key?: string;
  readonly unsigned?: Record<string, unknown>;
}

/** Who the bot is. */
export interface BotIdentity {
  /** Full user id, "@switchboard:example.org". */
  readonly userId: string;
  /** Display name(s) people see and mention the bot by (global profile, per-room name). */
  readonly names: readonly string[];
}

/** A file a message carries, before it is downloaded. */
export interface FileRef {
  readonly kind: Attachment['kind'];
  /** `mxc://server/media-id`; absent when the event has neither a url nor a usable encrypted file. */
  readonly url?: string;
  /** The keys of an encrypted file (in an encrypted room): its bytes are decrypted after the download. */
  readonly encrypted?: EncryptedFileKeys;
  readonly name?: string;
  readonly mime?: string;
  readonly size?: number;
}

export type Verdict =
  | { readonly kind: 'message' }
  | { readonly kind: 'encrypted' }
  | { readonly kind: 'skip'; readonly reason: string };

const MEDIA: Record<string, Attachment['kind']> = { 'm.file': 'file', 'm.image': 'photo', 'm.audio': 'audio', 'm.video': 'video' };
const record = (value: unknown): Record<string, unknown> | undefined =>
  typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
const str = (value: unknown): string | undefined => (typeof value === 'string' ? value : undefined);

/** Whether the bot answers this event at all (timeline events that are not state). */
export function classify(event: RoomEvent, botUserId: string): Verdict {
  if (event.sender === botUserId) return { kind: 'skip', reason: 'own event' };
  if (event.type === 'm.room.encrypted') return { kind: 'encrypted' };
  if (event.type !== 'm.room.message') return { kind: 'skip', reason: `event type ${event.type}` };
  const content = event.content;
  const relates = record(content['m.relates_to']);
  if (relates?.rel_type === 'm.replace' || content['m.new_content'] !== undefined) return { kind: 'skip', reason: 'an edit' };
  const msgtype = str(content.msgtype);
  if (msgtype === 'm.notice') return { kind: 'skip', reason: 'm.notice (bots post those)' };
  if (msgtype === 'm.text' || msgtype === 'm.emote' || (msgtype !== undefined && msgtype in MEDIA)) return { kind: 'message' };
  return { kind: 'skip', reason: msgtype === undefined ? 'no msgtype (redacted?)' : `msgtype ${msgtype}` };
}

/** Relation facts of a message: its thread root, and the event it really replies to (not a thread fallback). */
export function relationsOf(event: RoomEvent): { thread?: string; replyTo?: string } {
  const relates = record(event.content['m.relates_to']);
  if (!relates) return {};
  const thread = relates.rel_type === 'm.thread' ? str(relates.event_id) : undefined;
  const inReplyTo = str(record(relates['m.in_reply_to'])?.event_id);
  const replyTo = inReplyTo !== undefined && !(thread !== undefined && relates.is_falling_back === true) ? inReplyTo : undefined;
  return { ...(thread === undefined ? {} : { thread }), ...(replyTo === undefined ? {} : { replyTo }) };
}

export interface NormaliseOptions {
  readonly channel: string;
  /** The bot's user id (conversation keys). */
  readonly account: string;
  /** The agent's name: a room message starting with it is addressed to the bot. */
  readonly assistantName: string;
  readonly roomId: string;
  /** A DM: the bot and one person. */
  readonly direct: boolean;
  /** The sender's display name in the room. */
  readonly senderName?: string | undefined;
  /** The message replies to one of the bot's events (or its thread was started on one). */
  readonly repliesToBot: boolean;
}

export interface Normalised {
  readonly message: InboundMessage;
  readonly files: readonly FileRef[];
}

/** Normalises an m.room.message that {@link classify} let through. */
export function normalise(event: RoomEvent, bot: BotIdentity, options: NormaliseOptions): Normalised | undefined {
  const content = event.content;
  const msgtype = str(content.msgtype) ?? 'm.text';
  const files = fileOf(content, msgtype);
  const { thread } = relationsOf(event);
  const inReply = record(record(content['m.relates_to'])?.['m.in_reply_to']) !== undefined;
  let body = str(content.body) ?? '';
  if (files.length > 0) body = captionOf(content);
  else if (inReply) body = stripReplyFallback(body);
  if (msgtype === 'm.emote') body = `* ${options.senderName ?? event.sender} ${body}`;
  if (body.trim() === '' && files.length === 0) return undefined;
  const addressed = options.direct || options.repliesToBot || mentions(content, bot) || startsWithName(body, [...bot.names, localpart(bot.userId), options.assistantName]);
  const message: InboundMessage = {
    channel: options.channel,
    account: options.account,
    chat: options.roomId,
    ...(thread === undefined ? {} : { thread }),
    id: event.event_id,
    sender: options.senderName ? { id: event.sender, name: options.senderName } : { id: event.sender },
    text: stripMention(body, bot),
    timestamp: event.origin_server_ts,
    direct: options.direct,
    addressed,
  };
  return { message, files };
}

export const localpart = (userId: string): string => /^@([^:]+)/.exec(userId)?.[1] ?? userId;

/** An intentional mention (m.mentions) or a pill linking to the bot in the HTML. */
export function mentions(content: Record<string, unknown>, bot: BotIdentity): boolean {
  const ids = record(content['m.mentions'])?.user_ids;
  if (Array.isArray(ids) && ids.includes(bot.userId)) return true;
  const html = str(content.formatted_body);
  if (html === undefined) return false;
  const id = bot.userId.toLowerCase();
  for (const match of html.matchAll(/href\s*=\s*["']https:\/\/matrix\.to\/#\/([^"'?]+)/gi)) {
    let target = match[1]!;
    try {
      target = decodeURIComponent(target);
    } catch {
      // keep it as written
    }
    if (target.toLowerCase() === id) return true;
  }
  return false;
}

const same = (a: string, b: string): boolean => a.toLowerCase() === b.toLowerCase();

/** "Testbot, what's up?" / "testbot: hi" / "@testbot:example.org hi" / "Testbot" — but not "Testbots are…". */
export function startsWithName(text: string, names: readonly string[]): boolean {
  const head = text.trimStart();
  return names.some((raw) => {
    const name = raw.trim();
    if (name === '') return false;
    for (const form of name.startsWith('@') ? [name] : [name, `@${name}`]) {
      if (!same(head.slice(0, form.length), form)) continue;
      const next = head.charAt(form.length);
      if (next === '' || /[\s,.:;!?]/.test(next)) return true;
    }
    return false;
  });
}

/** Drops a leading mention of the bot (its user id, or a pill's display name followed by ":" or ","). */
export function stripMention(text: string, bot: BotIdentity): string {
  const head = text.trimStart();
  const forms = [bot.userId, `@${localpart(bot.userId)}`, ...bot.names.map((n) => n.trim()).filter((n) => n !== '')];
  for (const form of forms) {
    if (!same(head.slice(0, form.length), form)) continue;
    const rest = head.slice(form.length);
    const isId = form.startsWith('@');
    if ((isId && (rest === '' || /^[\s,:;]/.test(rest))) || /^\s*[:,]/.test(rest)) return rest.replace(/^[\s,:;]+/, '').trim();
  }
  return text.trim();
}

/** Legacy replies quote the message they answer as "> <@user> …" lines, then a blank line. */
export function stripReplyFallback(body: string): string {
  if (!body.startsWith('> ')) return body;
  const lines = body.split('\n');
  let i = 0;
  while (i < lines.length && lines[i]!.startsWith('>')) i++;
  return lines.slice(i).join('\n').replace(/^\n+/, '');
}

/** A file message's caption: `body` when `filename` names the file separately (MSC2530), else none. */
function captionOf(content: Record<string, unknown>): string {
  const filename = str(content.filename);
  const body = str(content.body) ?? '';
  return filename !== undefined && filename !== body ? body : '';
}

function fileOf(content: Record<string, unknown>, msgtype: string): FileRef[] {
  let kind = MEDIA[msgtype];
  if (!kind) return [];
  if (kind === 'audio' && (content['org.matrix.msc3245.voice'] !== undefined || content['m.voice'] !== undefined)) kind = 'voice';
  const info = record(content.info);
  const encrypted = parseEncryptedFile(content.file);
  const url = str(content.url) ?? encrypted?.url;
  const name = str(content.filename) ?? str(content.body);
  const mime = str(info?.mimetype);
  const size = typeof info?.size === 'number' ? info.size : undefined;
  return [
    {
      kind,
      ...(url === undefined ? {} : { url }),
      ...(encrypted === undefined || str(content.url) !== undefined ? {} : { encrypted }),
      ...(name === undefined || name === '' ? {} : { name }),
      ...(mime === undefined ? {} : { mime }),
      ...(size === undefined ? {} : { size }),
    },
  ];
}

/** `mxc://server/media-id` → its parts; undefined for anything else. */
export function parseMxc(url: string): { server: string; mediaId: string } | undefined {
  const match = /^mxc:\/\/([^/]+)\/([^/?#]+)$/.exec(url);
  return match ? { server: match[1]!, mediaId: match[2]! } : undefined;
}
