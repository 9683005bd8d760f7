/**
 * IRC → InboundMessage. A PRIVMSG to a channel is a group message (chat = the channel,
 * lower-cased); one to us is a direct message (chat = the sender's nick, lower-cased). There
 * are no threads. The sender is their nick, with `nick!user@host` as an alias for `allow`.
 *
 * Ids: IRC has no message ids. The IRCv3 `msgid` tag is used when the server sends one, else
 * a unique id is made (time + a per-process nonce + a counter). IRC never redelivers a
 * message — what was missed while disconnected is simply gone — so the inbox never needs to
 * recognise a redelivery here; the ids only have to be unique.
 *
 * Addressed (in a channel): `nick: …` / `nick, …` (our current nick or the configured one,
 * any case; also `@nick`), or the nick / the assistant's name as the first word. A leading
 * `nick:` / `nick,` is stripped. CTCP ACTION (`/me waves at switchboard`) is taken as a
 * message "* alice waves at switchboard" and is addressed when it names the bot anywhere.
 * NOTICEs and other CTCPs are never pushed: a bot never answers a NOTICE (that is how IRC
 * avoids bot loops), and CTCP queries are not conversation.
 */
import { randomBytes } from 'node:crypto';
import type { InboundMessage } from '../../src/channel.ts';

/** The IRC parts of a PRIVMSG, as parsed from the line. */
export interface IrcPrivmsg {
  readonly nick: string;
  readonly ident: string;
  readonly hostname: string;
  /** A channel or our nick (a STATUSMSG prefix like `@#chan` already removed). */
  readonly target: string;
  readonly text: string;
  readonly tags: Readonly<Record<string, string | true>>;
}

/** What {@link privmsgOf} needs to know about the connection. */
export interface PrivmsgContext {
  /** ISUPPORT STATUSMSG prefixes, e.g. "@+". */
  readonly statusPrefixes: string;
  readonly chanTypes: string;
  /** Our nick right now. */
  readonly nick: string;
}

/**
 * The PRIVMSG a parsed line carries (`params[0]` the target, the last param the text), or
 * undefined when it is not for us (a message to a nick we no longer have). A STATUSMSG target
 * (`@#chan`: to the channel's operators) is still the channel.
 */
export function privmsgOf(
  msg: { readonly nick: string; readonly ident: string; readonly hostname: string; readonly tags: Readonly<Record<string, string | true>> },
  rawTarget: string,
  text: string,
  context: PrivmsgContext,
): IrcPrivmsg | undefined {
  let target = rawTarget;
  while (target.length > 1 && context.statusPrefixes.includes(target[0]!) && !isChannelName(target, context.chanTypes)) target = target.slice(1);
  if (!isChannelName(target, context.chanTypes) && !sameNick(target, context.nick)) return undefined;
  return { nick: msg.nick, ident: msg.ident, hostname: msg.hostname, target, text, tags: msg.tags };
}

export interface Identity {
  /** Channel instance name. */
  readonly channel: string;
  /** The configured nick: the account, stable across alternate nicks. */
  readonly configuredNick: string;
  /** The nick we have right now (maybe an alternate). */
  readonly currentNick: string;
  readonly assistantName: string;
  /** Channel name prefixes (ISUPPORT CHANTYPES). */
  readonly chanTypes: string;
}

const nonce = randomBytes(4).toString('hex');
let counter = 0;

/** A new unique message id (no IRCv3 msgid). */
export function makeId(now: number = Date.now()): string {
  counter = (counter + 1) % 1_000_000_000;
  return `${now.toString(36)}-${nonce}-${counter.toString(36)}`;
}

export function isChannelName(name: string, chanTypes: string): boolean {
  return name !== '' && chanTypes.includes(name[0]!);
}

/**
 * Lower case for chat ids and nick comparison. ASCII only: under rfc1459 casemapping `[]\~`
 * are also the upper case of `{}|^`, but not under `ascii` (ngircd), so folding them could
 * make a reply go to a different nick (and non-ASCII letters in channel names are left alone).
 */
export function ircLower(text: string): string {
  return text.replace(/[A-Z]+/g, (upper) => upper.toLowerCase());
}

export function sameNick(a: string, b: string): boolean {
  return ircLower(a) === ircLower(b);
}

const escapeRegExp = (text: string): string => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** Whether a channel message addresses the bot, and its text with a leading `nick:` removed. */
export function addressing(text: string, names: readonly string[], assistantName: string): { addressed: boolean; text: string } {
  const alternatives = [...new Set(names.filter((n) => n !== ''))].map(escapeRegExp).join('|');
  if (alternatives !== '') {
    const mention = new RegExp(`^\\s*@?(?:${alternatives})\\s*[:,]\\s*`, 'i').exec(text);
    if (mention) return { addressed: true, text: text.slice(mention[0].length).trim() };
    if (new RegExp(`^\\s*@?(?:${alternatives})(?=$|[\\s!?.;])`, 'i').test(text)) return { addressed: true, text: text.trim() };
  }
  const name = assistantName.trim();
  if (name !== '' && new RegExp(`^\\s*@?${escapeRegExp(name)}(?=$|[\\s,:!?.;])`, 'i').test(text)) return { addressed: true, text: text.trim() };
  return { addressed: false, text: text.trim() };
}

/** Whether `text` names the bot anywhere as a word (for ACTIONs). */
export function mentions(text: string, names: readonly string[]): boolean {
  return names.some((name) => name !== '' && new RegExp(`(^|[^\\w\\[\\]\\\\\`^{|}-])${escapeRegExp(name)}($|[^\\w\\[\\]\\\\\`^{|}-])`, 'i').test(text));
}

/** The server's timestamp (IRCv3 server-time) or now. */
export function timestampOf(tags: Readonly<Record<string, string | true>>, now: number = Date.now()): number {
  const time = tags.time;
  const parsed = typeof time === 'string' ? Date.parse(time) : NaN;
  return Number.isFinite(parsed) ? parsed : now;
}

/** Splits a CTCP-wrapped text: `\x01ACTION waves\x01` → { command: 'ACTION', text: 'waves' }. */
export function parseCtcp(text: string): { command: string; text: string } | undefined {
  if (!text.startsWith('\x01')) return undefined;
  const body = text.slice(1, text.endsWith('\x01') ? -1 : undefined);
  const space = body.indexOf(' ');
  return space === -1 ? { command: body.toUpperCase(), text: '' } : { command: body.slice(0, space).toUpperCase(), text: body.slice(space + 1) };
}

/** IRC formatting codes (bold, colour, italics, reset…) removed from what people typed. */
export function stripFormatting(text: string): string {
  // eslint-disable-next-line no-control-regex
  return text.replace(/\x03(\d{1,2}(,\d{1,2})?)?|\x04[0-9a-fA-F]{6}(,[0-9a-fA-F]{6})?|[\x02\x0f\x11\x16\x1d\x1e\x1f]/g, '');
}

/** A PRIVMSG as the runtime's message, or undefined when it is not for the runtime (ours, another bot's, a CTCP query). */
export function normalise(msg: IrcPrivmsg, who: Identity, now: number = Date.now()): InboundMessage | undefined {
  if (msg.nick === '' || sameNick(msg.nick, who.currentNick)) return undefined;
  if (msg.tags.bot !== undefined || msg.tags['draft/bot'] !== undefined) return undefined; // IRCv3 bot-mode tag
  const ctcp = parseCtcp(msg.text);
  if (ctcp && ctcp.command !== 'ACTION') return undefined;
  const body = stripFormatting(ctcp ? ctcp.text : msg.text);
  const names = [who.currentNick, who.configuredNick];
  const inChannel = isChannelName(msg.target, who.chanTypes);
  let text: string;
  let addressed: boolean;
  if (ctcp) {
    text = `* ${msg.nick} ${body.trim()}`;
    addressed = !inChannel || mentions(body, [...names, who.assistantName]);
  } else if (inChannel) {
    ({ text, addressed } = addressing(body, names, who.assistantName));
  } else {
    text = body.trim();
    addressed = true;
  }
  const msgid = msg.tags.msgid;
  return {
    channel: who.channel,
    account: who.configuredNick,
    chat: inChannel ? ircLower(msg.target) : ircLower(msg.nick),
    id: typeof msgid === 'string' && msgid !== '' ? `msgid:${msgid}` : makeId(now),
    sender: { id: msg.nick, name: msg.nick, aliases: [`${msg.nick}!${msg.ident}@${msg.hostname}`] },
    text,
    timestamp: timestampOf(msg.tags, now),
    direct: !inChannel,
    addressed,
  };
}
