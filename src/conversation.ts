/**
 * Conversation keys: `channel:account:chat[:thread]`.
 *
 * A DM is one conversation per sender, a thread is its own conversation. Parts are
 * percent-encoded where they contain ':' or '%' so a key always splits back the same way.
 */

/** Where a message lives on a platform. */
export interface ConversationRef {
  /** Channel instance name ("terminal", "telegram"…). */
  readonly channel: string;
  /** The bot account on that platform (several bots can share one channel kind). */
  readonly account: string;
  /** Chat, room, DM or mailbox thread id. */
  readonly chat: string;
  /** Thread inside the chat, when the platform has them. */
  readonly thread?: string;
}

const escape = (part: string): string => part.replace(/%/g, '%25').replace(/:/g, '%3A');

/** @example conversationKey({ channel: 'telegram', account: 'bot1', chat: '42' }) === 'telegram:bot1:42' */
export function conversationKey(ref: ConversationRef): string {
  const parts = [ref.channel, ref.account, ref.chat];
  if (ref.thread !== undefined && ref.thread !== '') parts.push(ref.thread);
  return parts.map(escape).join(':');
}

const unescape = (part: string): string => part.replace(/%3A/gi, ':').replace(/%25/g, '%');

/** The inverse of {@link conversationKey}; undefined for a string that is not a key. */
export function parseConversationKey(key: string): ConversationRef | undefined {
  const parts = key.split(':').map(unescape);
  if (parts.length < 3 || parts.length > 4 || parts.some((part) => part === '')) return undefined;
  const [channel, account, chat, thread] = parts as [string, string, string, string | undefined];
  return thread === undefined ? { channel, account, chat } : { channel, account, chat, thread };
}

/** Only the ref fields of a message, e.g. to address a reply to where a message came from. */
export function refOf(ref: ConversationRef): ConversationRef {
  return ref.thread === undefined
    ? { channel: ref.channel, account: ref.account, chat: ref.chat }
    : { channel: ref.channel, account: ref.account, chat: ref.chat, thread: ref.thread };
}
