/**
 * A local Telegram Bot API server for tests and benchmarks. (Not npm's telegram-test-api:
 * it does not long-poll — getUpdates answers at once — so the poll loop, its offsets and
 * redelivery could not be tested against it.) It speaks the real wire format: POST/GET /bot<token>/<method>
 * with JSON, form-urlencoded or multipart bodies, answers {ok, result} or
 * {ok:false, error_code, description, parameters}. getUpdates really long-polls and honours
 * `offset` (which confirms earlier updates); HTML is validated like Telegram does and the
 * VISIBLE text is recorded; files go both ways. A webhook mode POSTs updates to the bot.
 *
 * Every object it sends and every request body it parses is typed with @grammyjs/types (grammY's
 * Bot API types), so `tsc` rejects a peer whose shapes drift from the Bot API.
 *
 * As strict as the real server (tdlib/telegram-bot-api, telegram-bot-api/Client.cpp, read at
 * commit 01a3679c, and the Bot API docs):
 * - flood control per chat (FAQ "My bot is hitting limits": about one message a second in a
 *   chat, short bursts allowed, at most 20 a minute in a group) on EVERY method addressed to a
 *   chat, edits and chat actions included: 429 "Too Many Requests: retry after N" with
 *   parameters.retry_after (Query.cpp set_retry_after_error); {@link TelegramPeer.callsInsideWait}
 *   counts the calls that still came for a chat inside its wait;
 * - a text (or caption) over 32 KiB of raw UTF-8 is refused before its entities are parsed
 *   (Client::get_formatted_text: `text.size() > (1 << 15)` → "Bad Request: text is too long");
 * - setWebhook's secret_token: at most 256 characters of A-Z a-z 0-9 _ - (Client.cpp,
 *   "secret token is too long" / "secret token contains unallowed characters");
 * - privacy mode (getMe's can_read_all_group_messages false, as BotFather makes every new
 *   bot; https://core.telegram.org/bots/features#privacy-mode): in groups only commands,
 *   @mentions of the bot, replies to the bot and service messages are delivered;
 * - a basic group migrated to a supergroup: a write to the old id answers 400 "Bad Request:
 *   group chat was upgraded to a supergroup chat" with parameters.migrate_to_chat_id
 *   (Client.cpp, check_chat_access), and both service messages (migrate_to_chat_id,
 *   migrate_from_chat_id) arrive;
 * - getFile serves at most 20 MiB (Client.h MAX_DOWNLOAD_FILE_SIZE = 20 << 20; do_get_file:
 *   "Bad Request: file is too big"), unless the server runs with --local.
 *
 * People: alice, bob, mallory (a private chat each); one forum supergroup with one topic
 * (the `thread` place); one basic group that a test can migrate. Fault hooks: drop or stall
 * polls, restart, 429s, blocked users.
 */
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { Animation, ApiError as TgApiError, ApiMethods, ApiSuccess, Chat, File, Message, MessageEntity, Opts, PhotoSize, ResponseParameters, Update as TgUpdate, User, UserFromGetMe, Voice, WebhookInfo } from '@grammyjs/types';
import type { BotMessage, ChatPeer, PeerUser, Place } from '../contracts/chat-channel.ts';
import sharp from 'sharp';
import { freePort } from '../support/net.ts';

/** A request body as parsed, before a method reads it as its own parameters. */
type Json = Record<string, unknown>;
/** What a method's request carries (grammY's types; a form body carries numbers as text, hence Partial and the coercions). */
type Args<M extends keyof Opts<Part>> = Partial<Opts<Part>[M]>;
/** What a method answers. */
type Result<M extends keyof ApiMethods<Part>> = Awaited<ReturnType<ApiMethods<Part>[M]>>;
export type TgUser = User;
export type TgChat = Exclude<Chat, Chat.ChannelChat>;
/** A message as people send them to the bot (never a channel post: it has a chat that is not a channel, and a sender). */
export type TgMessage = NonNullable<TgUpdate['message']>;
/** An update as this peer makes them (messages and edits; never channel posts). */
export type Update = Pick<TgUpdate, 'update_id' | 'message' | 'edited_message'>;

/** What the bot posted, as the peer keeps it. */
export interface SentMessage {
  readonly chatId: number;
  readonly threadId: number | undefined;
  readonly messageId: number;
  text: string;
  html: string | undefined;
  edits: number;
  readonly replyTo: number | undefined;
}

/**
 * A file the bot sent, as the chat shows it: `photo` (sendPhoto: inline, re-encoded by Telegram),
 * `animation` (sendAnimation) or `document` (sendDocument: a file to download). Width and height
 * of a photo or animation as the server decoded them.
 */
export interface BotUpload { readonly name: string; readonly kind: 'photo' | 'animation' | 'document'; readonly width?: number; readonly height?: number; readonly size: number }

export interface ApiCall { readonly method: string; readonly params: Json; status: number; readonly at: number }

/** One 429 the peer answered because a chat went over its flood limit. */
export interface FloodWait { readonly chatId: number; readonly method: string; readonly at: number; readonly retryAfter: number }

/**
 * Flood control per chat (the Bot API FAQ, "My bot is hitting limits, how do I avoid this?":
 * "avoid sending more than one message per second … We may allow short bursts that go over
 * this limit, but eventually you'll begin receiving 429 errors"; "not more than 20 messages
 * per minute to the same group"). Modelled as token buckets per chat (and a second one per
 * group) that every message call (send, edit, file) takes a token from; chat actions (typing)
 * have a bucket of their own at the same rate. After a 429 the chat is in a wait of
 * retry_after seconds, and every call to it — of any method — is answered 429 until it ends.
 */
export interface FloodOptions {
  /** Calls a chat may get per second, sustained. @default 1 */
  readonly perSecond?: number;
  /** Calls a chat may get at once (the "short bursts"). @default 3 */
  readonly burst?: number;
  /** Calls a group or supergroup may get per minute (a bucket of this size, refilled evenly). @default 20 */
  readonly groupPerMinute?: number;
  /** retry_after (seconds) of a 429, instead of the time until the bucket has a token again (at least 1, as Telegram's are whole seconds). */
  readonly retryAfterSeconds?: number;
}

export interface TelegramPeerOptions {
  /** Configure the bot for webhook mode: updates are POSTed to it instead of handed to getUpdates. */
  readonly webhook?: boolean;
  /** Answer getUpdates at once, ignoring its `timeout` (as telegram-test-api and some proxies do). */
  readonly ignoreTimeout?: boolean;
  /** getMe's can_read_all_group_messages: privacy mode off (BotFather /setprivacy → Disable). @default false, as for every new bot */
  readonly canReadAllGroupMessages?: boolean;
  /** Flood control per chat; `false` turns it off. @default {} (Telegram's limits, see {@link FloodOptions}) */
  readonly flood?: FloodOptions | false;
}

export interface TelegramPeer extends ChatPeer {
  readonly token: string;
  /** http://127.0.0.1:PORT — the bot's api_root. */
  readonly apiRoot: string;
  readonly bot: UserFromGetMe;
  readonly groupId: number;
  readonly topicId: number;
  /** A basic group (type "group") the bot is in, until {@link migrateGroup}. */
  readonly basicGroupId: number;
  /** Every Bot API call, in order. */
  readonly calls: readonly ApiCall[];
  /** Everything the bot posted (all chats), in order. */
  readonly sent: readonly SentMessage[];
  /** Files the bot sent to a place, in order, with how they were sent (photo, animation, document). */
  botUploads(place: Place): readonly BotUpload[];
  /** The webhook settings in the config section (webhook mode). */
  readonly webhook: { url: string; listen: string; secret: string } | undefined;
  /** Status codes the bot's webhook answered, in order. */
  readonly webhookAnswers: readonly number[];
  /**
   * A person posts a file of a given kind. Without a kind, as the Telegram apps do: a JPEG, PNG
   * or WebP that decodes goes as a photo (every size Telegram makes of it, see `photoSizes`),
   * anything else — a damaged image included, which the app cannot compress — as a document.
   */
  postFile(user: PeerUser, place: Place, file: { name: string; mime: string; data: Uint8Array }, caption?: string, kind?: 'document' | 'photo' | 'voice'): Promise<void>;
  /**
   * A person records a voice note: a Message with `voice` (Bot API "Voice": file_id,
   * file_unique_id, duration, mime_type, file_size; https://core.telegram.org/bots/api#voice).
   * Telegram stores voice notes as OGG/Opus under `voice/file_N.oga` (the file_path getFile
   * returns), and a voice note has no file name.
   */
  postVoice(user: PeerUser, place: Place, data: Uint8Array, options?: { duration?: number; caption?: string }): Promise<void>;
  /** The message `postFile` queues, with its file stored (not queued). */
  fileMessage(user: PeerUser, place: Place, file: { name: string; mime: string; data: Uint8Array }, caption?: string, kind?: 'document' | 'photo' | 'voice'): TgMessage;
  /**
   * Queues any update (update_id is assigned); returns the update_id, or 0 when Telegram would
   * not deliver it (a group message privacy mode hides from the bot).
   */
  queue(update: Omit<Update, 'update_id'>): number;
  /** A message object as a person in a place would send it (not queued). */
  messageFrom(user: PeerUser, place: Place, text: string, extra?: Json): TgMessage;
  /** A message object as a person would send it in the chat with this id (the basic group, or the supergroup it became). Not queued. */
  messageIn(user: PeerUser, chatId: number, text: string, extra?: Json): TgMessage;
  /** How many times getUpdates (or the webhook) handed out each update. */
  deliveries(updateId: number): number;
  /** The update_id of the last update queued. */
  readonly lastUpdateId: number;
  /** Updates queued and not yet confirmed. */
  readonly pending: number;
  /** getUpdates requests waiting (held for long polling, or stalled). */
  readonly pollsWaiting: number;
  /** Destroys the connections of every waiting getUpdates; returns how many. */
  dropPolls(): number;
  /** getUpdates requests are held unanswered (their offset not applied) until `unstall`. */
  stallPolls(): void;
  /** Like stallPolls, from right after the next getUpdates that hands out an update. */
  stallAfterNextDelivery(): void;
  unstall(): void;
  /** Closes the server (every connection) and listens again on the same port after `downMs`. */
  restart(downMs?: number): Promise<void>;
  /** The next `n` sendMessage calls answer 429 with retry_after (and put their chat in a flood wait). */
  rateLimitSends(n: number, retryAfterSeconds: number): void;
  /** The 429s flood control answered (rateLimitSends' included), in order. */
  readonly floodWaits: readonly FloodWait[];
  /**
   * Calls that reached a chat while it was inside a flood wait (after a 429, before its
   * retry_after had passed) — each answered 429 again. Of one chat, or of all when omitted.
   * A client that honours retry_after makes none.
   */
  callsInsideWait(chatId?: number): number;
  /** The next `n` sendMessage / editMessageText calls with parse_mode HTML answer 400 "can't parse entities". */
  rejectHtml(n: number): void;
  /** The next getUpdates that would hand out updates has its connection destroyed instead (the batch is lost in transit). */
  dropNextDelivery(): void;
  /** The user blocks the bot: sends to their chat answer 403. */
  block(user: PeerUser): void;
  /**
   * The basic group is upgraded to a supergroup (as Telegram does when a group gets an admin
   * feature or 200 000 members): writes to the old id answer 400 with migrate_to_chat_id, and
   * the service messages migrate_to_chat_id (in the old group) and migrate_from_chat_id (in the
   * new supergroup) are queued. Returns the supergroup's id.
   */
  migrateGroup(): number;
  /** POSTs an update to the bot's webhook with a given secret; returns the HTTP status. */
  webhookRequest(update: Omit<Update, 'update_id'>, secret: string): Promise<number>;
}

const LIMIT = 4096;
/** Client::get_formatted_text: a text longer than this many bytes (raw UTF-8, before entities are parsed) is refused. */
const RAW_LIMIT = 1 << 15;
/** Client.h MAX_DOWNLOAD_FILE_SIZE: getFile serves files up to this size (without --local). */
const MAX_DOWNLOAD = 20 << 20;
const people: Record<PeerUser, User> = {
  alice: { id: 1001, is_bot: false, first_name: 'Alice', username: 'alice' },
  bob: { id: 1002, is_bot: false, first_name: 'Bob', username: 'bob' },
  mallory: { id: 1003, is_bot: false, first_name: 'Mallory', username: 'mallory' },
};

class ApiError extends Error {
  readonly code: number;
  readonly parameters: ResponseParameters | undefined;
  constructor(code: number, description: string, parameters?: ResponseParameters) {
    super(description);
    this.code = code;
    this.parameters = parameters;
  }
}

const badRequest = (what: string): ApiError => new ApiError(400, `Bad Request: ${what}`);
/** Query.cpp set_retry_after_error: the description and parameters of every 429. */
const tooManyRequests = (seconds: number): ApiError => new ApiError(429, `Too Many Requests: retry after ${seconds}`, { retry_after: seconds });
const now = (): number => Math.floor(Date.now() / 1000);

/** Methods addressed to a chat (chat_id): the ones flood control, blocking and migration apply to. */
const CHAT_METHODS = new Set(['sendMessage', 'editMessageText', 'sendChatAction', 'sendDocument', 'sendPhoto', 'sendAnimation', 'sendVoice', 'sendAudio', 'sendVideo', 'setMessageReaction', 'deleteMessage']);

/** A token bucket: `capacity` tokens, refilled at `perSecond`. */
interface Bucket { tokens: number; at: number; readonly capacity: number; readonly perSecond: number }

export async function startTelegramPeer(options: TelegramPeerOptions = {}): Promise<TelegramPeer> {
  const bot: UserFromGetMe = {
    id: 7_000_001, is_bot: true, first_name: 'Switchboard Test', username: 'switchboard_test_bot',
    can_join_groups: true, can_read_all_group_messages: options.canReadAllGroupMessages ?? false, supports_inline_queries: false,
    can_connect_to_business: false, has_main_web_app: false,
  } as UserFromGetMe;
  const token = `${bot.id}:AA${randomBytes(12).toString('hex')}`;
  const group: Chat.SupergroupChat = { id: -1_001_000_000_001, type: 'supergroup', title: 'Test group', is_forum: true };
  const basicGroup: Chat.GroupChat = { id: -987_654_321, type: 'group', title: 'Old group' };
  let supergroupOfBasic: Chat.SupergroupChat | undefined;
  const privateChat = (user: PeerUser): Chat.PrivateChat => ({ id: people[user].id, type: 'private', first_name: people[user].first_name, username: people[user].username! });
  const counters = new Map<number, number>();
  const nextId = (chat: number): number => {
    const n = (counters.get(chat) ?? 0) + 1;
    counters.set(chat, n);
    return n;
  };
  const topicCreated: Message = {
    message_id: nextId(group.id), from: people.alice, chat: group, date: now(), message_thread_id: 0, is_topic_message: true,
    forum_topic_created: { name: 'Test topic', icon_color: 7_322_096 },
  };
  const topicId = topicCreated.message_id;
  topicCreated.message_thread_id = topicId;

  let updates: Update[] = [];
  let nextUpdateId = 400_000 + Math.floor(Math.random() * 100_000);
  let lastUpdateId = 0;
  const delivered = new Map<number, number>();
  const calls: ApiCall[] = [];
  let sent: SentMessage[] = [];
  let files: Array<{ chatId: number; threadId: number | undefined } & BotUpload> = [];
  let typing: Array<{ chatId: number; threadId: number | undefined }> = [];
  const userMessages = new Set<string>();
  const stored = new Map<string, { data: Buffer; path: string; size: number }>();
  let rateLimited = { n: 0, retryAfter: 1 };
  let htmlRejections = 0;
  let dropDelivery = false;
  const blocked = new Set<number>();
  let stalled = false;
  let stallAfterDelivery = false;
  let webhookSet: { url: string; secret: string | undefined } | undefined;
  const webhookAnswers: number[] = [];
  const sockets = new Set<Socket>();
  const flood = options.flood === false ? undefined : { perSecond: 1, burst: 3, groupPerMinute: 20, ...options.flood };
  const buckets = new Map<string, Bucket>();
  /** Per chat: when its flood wait ends (ms). */
  const waitUntil = new Map<number, number>();
  const insideWait = new Map<number, number>();
  let floodWaits: FloodWait[] = [];

  interface Poll { params: Args<'getUpdates'>; res: ServerResponse; timer?: NodeJS.Timeout }
  let waiting: Poll[] = [];
  let held: Poll[] = [];

  const webhookConfig = options.webhook
    ? { url: 'https://bot.example.test/telegram/hook', listen: `127.0.0.1:${await freePort()}`, secret: randomBytes(16).toString('hex') }
    : undefined;

  const placeOf = (place: Place): { chat: TgChat; threadId: number | undefined } =>
    place.kind === 'dm' ? { chat: privateChat(place.user), threadId: undefined } : { chat: group, threadId: place.kind === 'thread' ? topicId : undefined };
  const inPlace = (place: Place) => (item: { chatId: number; threadId: number | undefined }): boolean => {
    const { chat, threadId } = placeOf(place);
    return item.chatId === chat.id && item.threadId === threadId;
  };
  /** People who wrote privately through `queue` (not alice, bob or mallory), by chat id. */
  const strangers = new Map<number, User>();
  /** The chat a method is addressed to; throws what Telegram answers for a blocked user, a gone chat or a migrated group. */
  const findChat = (id: unknown): TgChat => {
    const n = Number(id);
    if (n === group.id) return group;
    if (supergroupOfBasic && n === supergroupOfBasic.id) return supergroupOfBasic;
    if (n === basicGroup.id) {
      // Client.cpp, check_chat_access: a deactivated basic group that was upgraded refuses writes so.
      if (supergroupOfBasic) throw new ApiError(400, 'Bad Request: group chat was upgraded to a supergroup chat', { migrate_to_chat_id: supergroupOfBasic.id });
      return basicGroup;
    }
    const user = Object.values(people).find((p) => p.id === n) ?? strangers.get(n);
    if (!user) throw badRequest('chat not found');
    if (blocked.has(n)) throw new ApiError(403, 'Forbidden: bot was blocked by the user');
    return { id: user.id, type: 'private', first_name: user.first_name, ...(user.username === undefined ? {} : { username: user.username }) };
  };
  const threadFor = (chat: TgChat, params: { message_thread_id?: number | undefined }): number | undefined => {
    if (params.message_thread_id === undefined || chat.type === 'private') return undefined;
    const id = Number(params.message_thread_id);
    if (id !== topicId || chat.id !== group.id) throw badRequest('message thread not found');
    return id;
  };

  // ---- flood control ---------------------------------------------------------------------

  function take(key: string, capacity: number, perSecond: number, at: number): number {
    let bucket = buckets.get(key);
    if (!bucket) buckets.set(key, (bucket = { tokens: capacity, at, capacity, perSecond }));
    bucket.tokens = Math.min(bucket.capacity, bucket.tokens + ((at - bucket.at) / 1000) * bucket.perSecond);
    bucket.at = at;
    if (bucket.tokens >= 1) return 0;
    return ((1 - bucket.tokens) / bucket.perSecond) * 1000; // ms until a token
  }
  function refund(key: string): void {
    const bucket = buckets.get(key);
    if (bucket) bucket.tokens -= 1;
  }

  /** The chat contract's flood test: the next call to this chat (any method) opens a wait of that many seconds. */
  const floodNext = new Map<number, number>();

  /** Opens a flood wait for a chat and returns the 429 to answer. */
  function floodWait(chatId: number, method: string, seconds: number): ApiError {
    const at = Date.now();
    waitUntil.set(chatId, at + seconds * 1000);
    floodWaits.push({ chatId, method, at, retryAfter: seconds });
    return tooManyRequests(seconds);
  }

  /**
   * Flood control for a call addressed to `chatId`: inside a wait, 429 again with what is left of
   * it (and counted); over the chat's (or group's) rate, a new wait.
   */
  function floodCheck(chatId: number, method: string): void {
    const at = Date.now();
    const until = waitUntil.get(chatId);
    if (until !== undefined && at < until) {
      insideWait.set(chatId, (insideWait.get(chatId) ?? 0) + 1);
      throw tooManyRequests(Math.max(1, Math.ceil((until - at) / 1000)));
    }
    const forced = floodNext.get(chatId);
    if (forced !== undefined) {
      floodNext.delete(chatId);
      throw floodWait(chatId, method, forced);
    }
    if (!flood) return;
    // A chat action is not a message: it has a bucket of its own (same rate), so "typing…" does
    // not use up the messages' allowance; a wait, once given, holds every call to the chat.
    if (method === 'sendChatAction') {
      const waitMs = take(`action:${chatId}`, flood.burst, flood.perSecond, at);
      if (waitMs > 0) throw floodWait(chatId, method, flood.retryAfterSeconds ?? Math.max(1, Math.ceil(waitMs / 1000)));
      refund(`action:${chatId}`);
      return;
    }
    const keys: Array<[string, number, number]> = [[`chat:${chatId}`, flood.burst, flood.perSecond]];
    if (chatId < 0) keys.push([`group:${chatId}`, flood.groupPerMinute, flood.groupPerMinute / 60]);
    const waitMs = Math.max(...keys.map(([key, capacity, perSecond]) => take(key, capacity, perSecond, at)));
    if (waitMs > 0) throw floodWait(chatId, method, flood.retryAfterSeconds ?? Math.max(1, Math.ceil(waitMs / 1000)));
    for (const [key] of keys) refund(key);
  }

  // ---- privacy mode ----------------------------------------------------------------------

  /**
   * Whether a group message reaches a bot in privacy mode (core.telegram.org/bots/features#privacy-mode):
   * commands meant for it (`/cmd@bot`, or a general `/cmd`), messages that mention it, replies
   * to its messages, and service messages. Everything else people say in a group it never sees.
   */
  function seenInPrivacyMode(message: Message): boolean {
    const text = message.text ?? message.caption;
    const hasContent = text !== undefined || ['photo', 'document', 'voice', 'audio', 'video', 'video_note', 'sticker', 'animation'].some((key) => key in message);
    if (!hasContent) return true; // a service message (member joined, topic created, migrated…)
    for (const entity of message.entities ?? message.caption_entities ?? []) {
      const part = (text ?? '').slice(entity.offset, entity.offset + entity.length).toLowerCase();
      if (entity.type === 'bot_command' && (!part.includes('@') || part.endsWith(`@${bot.username.toLowerCase()}`))) return true;
      if (entity.type === 'mention' && part === `@${bot.username.toLowerCase()}`) return true;
      if (entity.type === 'text_mention' && entity.user.id === bot.id) return true;
    }
    return message.reply_to_message?.from?.id === bot.id;
  }

  function messageFrom(user: PeerUser, place: Place, text: string, extra: Json = {}): TgMessage {
    const { chat, threadId } = placeOf(place);
    const message = withText({ message_id: nextId(chat.id), from: people[user], chat, date: now(), ...extra } as TgMessage, text, extra);
    if (threadId !== undefined) Object.assign(message, { message_thread_id: threadId, is_topic_message: true, reply_to_message: topicCreated });
    userMessages.add(`${chat.id}:${message.message_id}`);
    return message;
  }

  function messageIn(user: PeerUser, chatId: number, text: string, extra: Json = {}): TgMessage {
    const chat = chatId === basicGroup.id ? basicGroup : chatId === supergroupOfBasic?.id ? supergroupOfBasic : undefined;
    if (!chat) throw new Error(`messageIn: no such group ${chatId} (the basic group, or the supergroup it was migrated to)`);
    const message = withText({ message_id: nextId(chat.id), from: people[user], chat, date: now(), ...extra } as TgMessage, text, extra);
    userMessages.add(`${chat.id}:${message.message_id}`);
    return message;
  }

  /** Puts the text (or caption) and a command's entity on a message, as Telegram's clients do. */
  function withText(message: TgMessage, text: string, extra: Json): TgMessage {
    if (text === '') return message;
    const command = /^\/[A-Za-z0-9_]+(@[A-Za-z0-9_]+)?/.exec(text);
    const entities: MessageEntity[] | undefined = command ? [{ type: 'bot_command', offset: 0, length: command[0].length }] : undefined;
    if (extra.caption !== undefined) Object.assign(message, { caption: text }, entities ? { caption_entities: entities } : {});
    else Object.assign(message, { text }, entities ? { entities } : {});
    return message;
  }

  function fileMessage(user: PeerUser, place: Place, file: { name: string; mime: string; data: Uint8Array }, caption?: string, kind: 'document' | 'photo' | 'voice' = 'document'): TgMessage {
    const data = Buffer.from(file.data);
    const extra: Json = caption === undefined ? {} : { caption };
    if (kind === 'photo') {
      const big = storeFile(data, 'photos', file.name);
      extra.photo = [{ ...storeFile(data.subarray(0, Math.min(16, data.length)), 'photos', file.name), width: 90, height: 90 }, { ...big, width: 800, height: 600 }];
    } else if (kind === 'voice') {
      const voice: Voice = { ...storeFile(data, 'voice', file.name), duration: 1, mime_type: file.mime };
      extra.voice = voice;
    }
    else extra.document = { ...storeFile(data, 'documents', file.name), file_name: file.name, mime_type: file.mime };
    return messageFrom(user, place, caption ?? '', extra);
  }

  function queue(update: Omit<Update, 'update_id'>): number {
    const written = update.message ?? update.edited_message;
    // A person beyond alice, bob and mallory who writes privately: their chat exists from then on.
    if (update.message?.from && update.message.chat.type === 'private' && !Object.values(people).some((p) => p.id === update.message!.chat.id)) {
      strangers.set(update.message.chat.id, update.message.from);
      userMessages.add(`${update.message.chat.id}:${update.message.message_id}`);
    }
    if (written && written.chat.type !== 'private' && !bot.can_read_all_group_messages && !seenInPrivacyMode(written)) return 0;
    const full: Update = { update_id: nextUpdateId++, ...update };
    lastUpdateId = full.update_id;
    updates.push(full);
    if (webhookSet) void pushWebhook();
    else answerWaiting();
    return full.update_id;
  }

  // ---- getUpdates ------------------------------------------------------------------------

  const reply = <T>(res: ServerResponse, status: number, body: ApiSuccess<T> | TgApiError): void => {
    if (res.writableEnded || res.destroyed) return;
    const text = JSON.stringify(body);
    res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) }).end(text);
  };
  const fail = (res: ServerResponse, error: ApiError): void =>
    reply(res, error.code, { ok: false, error_code: error.code, description: error.message, ...(error.parameters ? { parameters: error.parameters } : {}) });

  function takeUpdates(limit: number): Update[] {
    const batch = updates.slice(0, limit);
    for (const update of batch) delivered.set(update.update_id, (delivered.get(update.update_id) ?? 0) + 1);
    if (batch.length > 0 && stallAfterDelivery) {
      stallAfterDelivery = false;
      stalled = true;
    }
    return batch;
  }

  function getUpdates(params: Args<'getUpdates'>, res: ServerResponse): void {
    if (webhookSet) return fail(res, new ApiError(409, "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first"));
    if (stalled) {
      const poll: Poll = { params, res };
      held.push(poll);
      res.on('close', () => (held = held.filter((p) => p !== poll)));
      return;
    }
    const offset = params.offset === undefined ? undefined : Number(params.offset);
    if (offset !== undefined && offset > 0) updates = updates.filter((u) => u.update_id >= offset); // confirmed: forgotten
    for (const other of waiting) {
      clearTimeout(other.timer);
      fail(other.res, new ApiError(409, 'Conflict: terminated by other getUpdates request; make sure that only one bot instance is running'));
    }
    waiting = [];
    const limit = Math.min(100, Math.max(1, Number(params.limit ?? 100)));
    const timeout = options.ignoreTimeout ? 0 : Math.min(50, Math.max(0, Number(params.timeout ?? 0)));
    if (updates.length > 0 || timeout === 0) return answer(res, limit);
    const poll: Poll = { params, res };
    poll.timer = setTimeout(() => {
      waiting = waiting.filter((p) => p !== poll);
      reply<Update[]>(res, 200, { ok: true, result: [] });
    }, timeout * 1000);
    waiting.push(poll);
    res.on('close', () => {
      clearTimeout(poll.timer);
      waiting = waiting.filter((p) => p !== poll);
    });
  }

  function answerWaiting(): void {
    const polls = waiting;
    waiting = [];
    for (const poll of polls) {
      clearTimeout(poll.timer);
      answer(poll.res, Math.min(100, Math.max(1, Number(poll.params.limit ?? 100))));
    }
  }

  function answer(res: ServerResponse, limit: number): void {
    const batch = takeUpdates(limit);
    if (batch.length > 0 && dropDelivery) {
      dropDelivery = false;
      res.socket?.destroy();
      return;
    }
    reply<Update[]>(res, 200, { ok: true, result: batch });
  }

  // ---- webhook delivery -----------------------------------------------------------------

  let pushing = false;
  async function pushWebhook(): Promise<void> {
    if (pushing || !webhookSet || !webhookConfig) return;
    pushing = true;
    let delay = 50;
    try {
      while (webhookSet && updates.length > 0 && !closed) {
        const update = updates[0]!;
        delivered.set(update.update_id, (delivered.get(update.update_id) ?? 0) + 1);
        const status = await postToBot(update, webhookSet.secret).catch(() => 0);
        webhookAnswers.push(status);
        if (status === 200) {
          updates = updates.filter((u) => u !== update);
          delay = 50;
        } else {
          await new Promise((resolve) => setTimeout(resolve, delay));
          delay = Math.min(delay * 2, 1000);
        }
      }
    } finally {
      pushing = false;
    }
  }

  async function postToBot(update: Update, secret: string | undefined): Promise<number> {
    const path = new URL(webhookSet?.url ?? webhookConfig!.url).pathname;
    const response = await fetch(`http://${webhookConfig!.listen}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(secret === undefined ? {} : { 'x-telegram-bot-api-secret-token': secret }) },
      body: JSON.stringify(update),
      signal: AbortSignal.timeout(30_000),
    });
    await response.arrayBuffer();
    return response.status;
  }

  // ---- methods --------------------------------------------------------------------------

  function storeFile(data: Buffer, dir: string, name: string): { file_id: string; file_unique_id: string; file_size: number } {
    const fileId = `F${randomBytes(10).toString('hex')}`;
    stored.set(fileId, { data, path: `${dir}/file_${stored.size}${name.includes('.') ? name.slice(name.lastIndexOf('.')) : ''}`, size: data.length });
    return { file_id: fileId, file_unique_id: `U${fileId.slice(1, 9)}`, file_size: data.length };
  }

  const htmlHook = { rejectHtml: (): boolean => htmlRejections > 0 && htmlRejections-- > 0 };

  function sendMessage(params: Args<'sendMessage'>): Result<'sendMessage'> {
    const chat = findChat(params.chat_id);
    const threadId = threadFor(chat, params);
    const { text, html } = visible(params.text, params.parse_mode, htmlHook);
    const replyParameters = params.reply_parameters;
    const replyTo = replyParameters?.message_id;
    if (replyTo !== undefined && !userMessages.has(`${chat.id}:${replyTo}`) && !sent.some((m) => m.chatId === chat.id && m.messageId === replyTo) && !replyParameters?.allow_sending_without_reply) {
      throw badRequest('message to be replied not found');
    }
    const record: SentMessage = { chatId: chat.id, threadId, messageId: nextId(chat.id), text, html, edits: 0, replyTo };
    sent.push(record);
    return { message_id: record.messageId, from: bot, chat, date: now(), text, ...(threadId === undefined ? {} : { message_thread_id: threadId, is_topic_message: true }) };
  }

  function editMessageText(params: Args<'editMessageText'>): Result<'editMessageText'> {
    const chat = findChat(params.chat_id);
    const record = sent.find((m) => m.chatId === chat.id && m.messageId === Number(params.message_id));
    if (!record) throw badRequest('message to edit not found');
    const { text, html } = visible(params.text, params.parse_mode, htmlHook);
    if (text === record.text && html === record.html) {
      throw badRequest('message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message');
    }
    Object.assign(record, { text, html, edits: record.edits + 1 });
    return { message_id: record.messageId, from: bot, chat, date: now(), edit_date: now(), text };
  }

  function sendDocument(params: Args<'sendDocument'>, parts: Map<string, Part>): Result<'sendDocument'> {
    const chat = findChat(params.chat_id);
    const threadId = threadFor(chat, params);
    const ref = typeof params.document === 'string' ? params.document : '';
    const part = ref.startsWith('attach://') ? parts.get(ref.slice('attach://'.length)) : parts.get('document');
    if (!part?.filename) throw badRequest('there is no document in the request');
    files.push({ chatId: chat.id, threadId, name: part.filename, kind: 'document', size: part.data.length });
    const document = { ...storeFile(part.data, 'documents', part.filename), file_name: part.filename, mime_type: part.type ?? 'application/octet-stream' };
    const caption = params.caption === undefined ? undefined : visible(params.caption, params.parse_mode).text;
    return { message_id: nextId(chat.id), from: bot, chat, date: now(), document, ...(caption ? { caption } : {}) };
  }

  /** The uploaded part a file parameter names (`attach://<name>`, or the part named like the parameter). */
  function uploaded(ref: unknown, field: string, parts: Map<string, Part>): Part | undefined {
    const name = typeof ref === 'string' && ref.startsWith('attach://') ? ref.slice('attach://'.length) : field;
    return parts.get(name);
  }

  /** Width and height as the server's decoder sees them; undefined when the bytes are no image. */
  async function decoded(data: Buffer): Promise<{ width: number; height: number; format: string } | undefined> {
    const meta = await sharp(data).metadata().catch(() => undefined);
    return meta?.width && meta.height && meta.format ? { width: meta.width, height: meta.height, format: meta.format } : undefined;
  }

  /**
   * sendPhoto (https://core.telegram.org/bots/api#sendphoto): "The photo must be at most 10 MB in
   * size. The photo's width and height must not exceed 10000 in total. Width and height ratio
   * must be at most 20." — the limits of TDLib's inputMessagePhoto (tdlib/td, td_api.tl; tdlib/td
   * issue #2544), answered as Telegram does: 400 PHOTO_SAVE_FILE_INVALID over 10 MB,
   * PHOTO_INVALID_DIMENSIONS over the size or ratio, IMAGE_PROCESS_FAILED for bytes that are no
   * image. A photo is re-encoded: the answer lists PhotoSizes (a 90 px thumbnail, and the photo
   * fitted in 1280 px, Telegram's "y" size), not the file sent.
   */
  async function sendPhoto(params: Args<'sendPhoto'>, parts: Map<string, Part>): Promise<Result<'sendPhoto'>> {
    const chat = findChat(params.chat_id);
    const threadId = threadFor(chat, params);
    const part = uploaded(params.photo, 'photo', parts);
    if (!part) throw badRequest('there is no photo in the request');
    if (part.data.length > 10 * 1024 * 1024) throw badRequest('PHOTO_SAVE_FILE_INVALID');
    const image = await decoded(part.data);
    if (!image || !['jpeg', 'png', 'webp', 'gif'].includes(image.format)) throw badRequest('IMAGE_PROCESS_FAILED');
    const { width, height } = image;
    if (width + height > 10_000 || Math.max(width, height) > 20 * Math.min(width, height)) throw badRequest('PHOTO_INVALID_DIMENSIONS');
    files.push({ chatId: chat.id, threadId, name: part.filename ?? 'photo', kind: 'photo', width, height, size: part.data.length });
    const fit = (edge: number): { width: number; height: number } => {
      const scale = Math.min(1, edge / Math.max(width, height));
      return { width: Math.max(1, Math.round(width * scale)), height: Math.max(1, Math.round(height * scale)) };
    };
    const stored = storeFile(part.data, 'photos', 'photo.jpg');
    const photo: PhotoSize[] = [{ ...storeFile(part.data.subarray(0, 16), 'photos', 'thumb.jpg'), ...fit(90) }, { ...stored, ...fit(1280) }];
    const caption = params.caption === undefined ? undefined : visible(params.caption, params.parse_mode).text;
    return { message_id: nextId(chat.id), from: bot, chat, date: now(), photo, ...(caption ? { caption } : {}), ...(threadId === undefined ? {} : { message_thread_id: threadId, is_topic_message: true }) };
  }

  /** sendAnimation (https://core.telegram.org/bots/api#sendanimation): "GIF or H.264/MPEG-4 AVC video without sound", up to 50 MB; the message carries `animation` and, for older clients, `document`. */
  async function sendAnimation(params: Args<'sendAnimation'>, parts: Map<string, Part>): Promise<Result<'sendAnimation'>> {
    const chat = findChat(params.chat_id);
    const threadId = threadFor(chat, params);
    const part = uploaded(params.animation, 'animation', parts);
    if (!part?.filename) throw badRequest('there is no animation in the request');
    if (part.data.length > 50 * 1024 * 1024) throw new ApiError(413, 'Request Entity Too Large');
    const image = await decoded(part.data);
    const isMp4 = part.data.subarray(4, 8).toString('latin1') === 'ftyp';
    if (image?.format !== 'gif' && !isMp4) throw badRequest('wrong file type of the animation');
    const { width, height } = image ?? { width: 0, height: 0 };
    files.push({ chatId: chat.id, threadId, name: part.filename, kind: 'animation', width, height, size: part.data.length });
    const file = { ...storeFile(part.data, 'animations', part.filename), file_name: part.filename, mime_type: isMp4 ? 'video/mp4' : 'image/gif' };
    const animation: Animation = { ...file, width, height, duration: 0 };
    return { message_id: nextId(chat.id), from: bot, chat, date: now(), animation, document: file, ...(threadId === undefined ? {} : { message_thread_id: threadId, is_topic_message: true }) };
  }

  function getFile(params: Args<'getFile'>): File {
    const file = stored.get(String(params.file_id ?? ''));
    if (!file) throw badRequest('invalid file_id');
    if (file.size > MAX_DOWNLOAD) throw badRequest('file is too big'); // Client::do_get_file (no --local)
    return { file_id: String(params.file_id), file_unique_id: `U${String(params.file_id).slice(1, 9)}`, file_size: file.size, file_path: file.path };
  }

  function setWebhook(params: Args<'setWebhook'>): true {
    const url = String(params.url ?? '');
    if (!/^https:\/\//.test(url)) throw badRequest('bad webhook: An HTTPS URL must be provided for webhook');
    // Client.cpp, process_set_webhook_query: at most 256 characters of td::is_base64url_characters.
    const secret = params.secret_token === undefined ? '' : String(params.secret_token);
    if (secret.length > 256) throw badRequest('secret token is too long');
    if (!/^[A-Za-z0-9_-]*$/.test(secret)) throw badRequest('secret token contains unallowed characters');
    webhookSet = { url, secret: secret === '' ? undefined : secret };
    for (const poll of waiting) fail(poll.res, new ApiError(409, 'Conflict: terminated by setWebhook request'));
    waiting = [];
    void pushWebhook();
    return true;
  }

  function call(method: string, params: Json, parts: Map<string, Part>): unknown {
    // (sendPhoto and sendAnimation answer a promise: the server decodes the image first)
    if (CHAT_METHODS.has(method)) {
      // The order Telegram checks in: the chat (gone, blocked, migrated), then flood control.
      const chat = findChat(params.chat_id);
      floodCheck(chat.id, method);
    }
    switch (method) {
      case 'getMe':
        return bot satisfies Result<'getMe'>;
      case 'deleteWebhook':
        if ((params as Args<'deleteWebhook'>).drop_pending_updates === true) updates = [];
        webhookSet = undefined;
        return true;
      case 'setWebhook':
        return setWebhook(params as Args<'setWebhook'>);
      case 'getWebhookInfo':
        return { url: webhookSet?.url ?? '', has_custom_certificate: false, pending_update_count: updates.length } satisfies WebhookInfo;
      case 'sendMessage':
        if (rateLimited.n > 0) {
          rateLimited.n--;
          throw floodWait(findChat(params.chat_id).id, method, rateLimited.retryAfter);
        }
        return sendMessage(params as Args<'sendMessage'>);
      case 'editMessageText':
        return editMessageText(params as Args<'editMessageText'>);
      case 'sendChatAction': {
        const args = params as Args<'sendChatAction'>;
        const chat = findChat(args.chat_id);
        typing.push({ chatId: chat.id, threadId: threadFor(chat, args) });
        return true;
      }
      case 'getFile':
        return getFile(params as Args<'getFile'>);
      case 'sendDocument':
        return sendDocument(params as Args<'sendDocument'>, parts);
      case 'sendPhoto':
        return sendPhoto(params as Args<'sendPhoto'>, parts);
      case 'sendAnimation':
        return sendAnimation(params as Args<'sendAnimation'>, parts);
      case 'setMyCommands':
      case 'deleteMyCommands':
        return true;
      default:
        throw new ApiError(404, 'Not Found: method not found');
    }
  }

  // ---- HTTP -----------------------------------------------------------------------------

  let closed = false;
  const server = createServer((req, res) => void handle(req, res).catch((error: unknown) => reply(res, 500, { ok: false, error_code: 500, description: `Internal Server Error: ${String(error)}` })));
  server.keepAliveTimeout = 60_000;
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://peer');
    const body = await readAll(req).catch(() => undefined);
    if (body === undefined) return;
    const file = /^\/file\/bot([^/]+)\/(.+)$/.exec(url.pathname);
    if (file && req.method === 'GET') {
      const found = file[1] === token ? [...stored.values()].find((f) => f.path === decodeURIComponent(file[2]!)) : undefined;
      if (!found) return void res.writeHead(404, { 'content-type': 'application/json' }).end('{"ok":false,"error_code":404,"description":"Not Found"}');
      return void res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': found.data.length }).end(found.data);
    }
    const match = /^\/bot([^/]+)\/([A-Za-z]+)$/.exec(url.pathname);
    if (!match) return fail(res, new ApiError(404, 'Not Found'));
    if (match[1] !== token) return fail(res, new ApiError(401, 'Unauthorized'));
    const method = match[2]!;
    let params: Json;
    let parts: Map<string, Part>;
    try {
      ({ params, parts } = parseParams(url, String(req.headers['content-type'] ?? ''), body));
    } catch {
      return fail(res, badRequest('invalid request body'));
    }
    const record: ApiCall = { method, params, status: 200, at: Date.now() };
    calls.push(record);
    if (method === 'getUpdates') return getUpdates(params as Args<'getUpdates'>, res);
    try {
      reply(res, 200, { ok: true, result: await call(method, params, parts) });
    } catch (error) {
      if (!(error instanceof ApiError)) throw error;
      record.status = error.code;
      fail(res, error);
    }
  }

  const port = await new Promise<number>((resolve) => server.listen(0, '127.0.0.1', () => resolve((server.address() as AddressInfo).port)));
  const apiRoot = `http://127.0.0.1:${port}`;

  async function shutdownServer(): Promise<void> {
    for (const poll of [...waiting, ...held]) clearTimeout(poll.timer);
    waiting = [];
    held = [];
    const closing = new Promise<void>((resolve) => server.close(() => resolve()));
    server.closeAllConnections();
    for (const socket of sockets) socket.destroy();
    await closing;
  }

  return {
    channel: 'telegram',
    limit: LIMIT,
    users: { alice: String(people.alice.id), bob: String(people.bob.id), mallory: String(people.mallory.id) },
    hasTyping: true,
    token,
    apiRoot,
    bot,
    groupId: group.id,
    topicId,
    basicGroupId: basicGroup.id,
    calls,
    get sent() {
      return sent;
    },
    webhook: webhookConfig,
    webhookAnswers,
    get lastUpdateId() {
      return lastUpdateId;
    },
    get pending() {
      return updates.length;
    },
    get pollsWaiting() {
      return waiting.length + held.length;
    },
    get floodWaits() {
      return floodWaits;
    },
    callsInsideWait(chatId) {
      if (chatId !== undefined) return insideWait.get(chatId) ?? 0;
      return [...insideWait.values()].reduce((a, b) => a + b, 0);
    },
    configSection() {
      const lines = [`[channels.telegram]`, `token = "${token}"`, `api_root = "${apiRoot}"`];
      if (webhookConfig) lines.push(`webhook = { url = "${webhookConfig.url}", listen = "${webhookConfig.listen}", secret = "${webhookConfig.secret}" }`);
      return `${lines.join('\n')}\n`;
    },
    async post(user, place, text, options = {}) {
      const mention = options.mention && place.kind !== 'dm';
      const full = mention ? `@${bot.username} ${text}` : text;
      const message = messageFrom(user, place, full);
      if (mention) message.entities = [{ type: 'mention', offset: 0, length: bot.username.length + 1 }];
      queue({ message });
    },
    async postFile(user, place, file, caption, kind) {
      const sizes = kind === undefined && /^image\/(jpeg|png|webp)$/i.test(file.mime) ? await photoSizes(Buffer.from(file.data)) : undefined;
      if (sizes) {
        const extra: Json = { photo: sizes.map((size) => ({ ...storeFile(size.data, 'photos', 'photo.jpg'), width: size.width, height: size.height })), ...(caption === undefined ? {} : { caption }) };
        queue({ message: messageFrom(user, place, caption ?? '', extra) });
        return;
      }
      queue({ message: fileMessage(user, place, file, caption, kind ?? 'document') });
    },
    async postVoice(user, place, data, options = {}) {
      const voice: Voice = { ...storeFile(Buffer.from(data), 'voice', '.oga'), duration: options.duration ?? Math.max(1, Math.round(data.length / 2000)), mime_type: 'audio/ogg' };
      queue({ message: messageFrom(user, place, options.caption ?? '', options.caption === undefined ? { voice } : { voice, caption: options.caption }) });
    },
    fileMessage,
    queue,
    messageFrom,
    messageIn,
    deliveries: (updateId) => delivered.get(updateId) ?? 0,
    botMessages(place): BotMessage[] {
      return sent.filter(inPlace(place)).map((m) => ({ text: m.text, edits: m.edits }));
    },
    botFiles: (place) => files.filter(inPlace(place)).map((f) => f.name),
    botUploads: (place) => files.filter(inPlace(place)).map(({ chatId: _chat, threadId: _thread, ...upload }) => upload),
    flood: {
      // retry_after is whole seconds on Telegram
      waitNext: (place, ms) => void floodNext.set(placeOf(place).chat.id, Math.max(1, Math.ceil(ms / 1000))),
      callsInsideWait: (place) => insideWait.get(placeOf(place).chat.id) ?? 0,
    },
    typing: (place) => typing.filter(inPlace(place)).length,
    reset() {
      sent = [];
      files = [];
      typing = [];
      calls.length = 0;
      webhookAnswers.length = 0;
      updates = [];
      rateLimited = { n: 0, retryAfter: 1 };
      htmlRejections = 0;
      dropDelivery = false;
      blocked.clear();
      stalled = stallAfterDelivery = false;
      buckets.clear();
      waitUntil.clear();
      insideWait.clear();
      floodNext.clear();
      floodWaits = [];
    },
    dropPolls() {
      const polls = [...waiting, ...held];
      for (const poll of polls) poll.res.socket?.destroy();
      return polls.length;
    },
    stallPolls() {
      stalled = true;
    },
    stallAfterNextDelivery() {
      stallAfterDelivery = true;
    },
    unstall() {
      stalled = stallAfterDelivery = false;
      const polls = held;
      held = [];
      for (const poll of polls) if (!poll.res.destroyed) getUpdates(poll.params, poll.res);
    },
    async restart(downMs = 0) {
      await shutdownServer();
      if (downMs > 0) await new Promise((resolve) => setTimeout(resolve, downMs));
      await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', () => resolve()));
    },
    rateLimitSends(n, retryAfterSeconds) {
      rateLimited = { n, retryAfter: retryAfterSeconds };
    },
    rejectHtml(n) {
      htmlRejections = n;
    },
    dropNextDelivery() {
      dropDelivery = true;
    },
    block(user) {
      blocked.add(people[user].id);
    },
    migrateGroup() {
      if (supergroupOfBasic) return supergroupOfBasic.id;
      const supergroup: Chat.SupergroupChat = { id: -1_009_876_543_210, type: 'supergroup', title: basicGroup.title };
      const by = people.alice;
      // The old group's last message, then the new supergroup's first (Client.cpp, messageChatUpgradeTo / messageChatUpgradeFrom).
      const to: TgMessage & Message.MigrateToChatIdMessage = { message_id: nextId(basicGroup.id), from: by, chat: basicGroup, date: now(), migrate_to_chat_id: supergroup.id };
      supergroupOfBasic = supergroup;
      const from: TgMessage & Message.MigrateFromChatIdMessage = { message_id: nextId(supergroup.id), from: by, chat: supergroup, date: now(), migrate_from_chat_id: basicGroup.id };
      queue({ message: to });
      queue({ message: from });
      return supergroup.id;
    },
    webhookRequest: (update, secret) => postToBot({ update_id: nextUpdateId++, ...update }, secret),
    async close() {
      closed = true;
      await shutdownServer();
    },
  };
}

// ---- Telegram HTML ----------------------------------------------------------------------

const TAGS = new Set(['b', 'strong', 'i', 'em', 'u', 'ins', 's', 'strike', 'del', 'a', 'code', 'pre', 'span', 'tg-spoiler', 'tg-emoji', 'blockquote']);
const NAMED: Record<string, string> = { lt: '<', gt: '>', amp: '&', quot: '"' };

/**
 * Parses text the way Telegram parses parse_mode HTML: the visible text, or the error Telegram
 * gives ("can't parse entities: …") for unknown or unbalanced tags and a bare "<".
 */
/**
 * The sizes Telegram makes of a photo, smallest first: JPEG thumbnails fitting the boxes of
 * https://core.telegram.org/api/files#image-thumbnail-types (s 100, m 320, x 800, y 1280,
 * w 2560) that are smaller than the photo, then the photo itself. Every size is a JPEG (a PNG or
 * WebP is converted); Telegram re-encodes a JPEG too, but the peer keeps the person's JPEG bytes
 * (within the 2560 box) so a test can compare what the model received with what was sent.
 * Undefined when the bytes do not decode (the app then sends the file as a document).
 */
export async function photoSizes(data: Buffer): Promise<Array<{ data: Buffer; width: number; height: number }> | undefined> {
  const { default: sharp } = await import('sharp');
  let width: number;
  let height: number;
  let jpeg: boolean;
  try {
    const meta = await sharp(data, { failOn: 'warning' }).metadata();
    await sharp(data, { failOn: 'warning' }).raw().toBuffer(); // the app decodes the whole photo to compress it
    ({ width, height } = meta.autoOrient ?? meta);
    jpeg = meta.format === 'jpeg';
  } catch {
    return undefined;
  }
  const long = Math.max(width, height);
  const boxes = [100, 320, 800, 1280, 2560].filter((box) => box < long);
  const thumbs = await Promise.all(
    boxes.map(async (box) => {
      const { data: bytes, info } = await sharp(data, { autoOrient: true }).resize({ width: box, height: box, fit: 'inside' }).jpeg({ quality: 80 }).toBuffer({ resolveWithObject: true });
      return { data: bytes, width: info.width, height: info.height };
    }),
  );
  if (long > 2560) return thumbs;
  return [...thumbs, { data: jpeg ? data : await sharp(data, { autoOrient: true }).flatten({ background: '#ffffff' }).jpeg({ quality: 87 }).toBuffer(), width, height }];
}

export function parseTelegramHtml(html: string): { text: string } | { error: string } {
  const stack: string[] = [];
  let text = '';
  const at = (i: number): number => Buffer.byteLength(html.slice(0, i));
  for (let i = 0; i < html.length; ) {
    const char = html[i]!;
    if (char === '&') {
      const entity = /^&(#x[0-9a-f]+|#\d+|[a-z]+);/i.exec(html.slice(i, i + 12));
      const name = entity?.[1];
      const decoded = name === undefined ? undefined : name[0] === '#' ? String.fromCodePoint(name[1]?.toLowerCase() === 'x' ? Number.parseInt(name.slice(2), 16) : Number(name.slice(1))) : NAMED[name.toLowerCase()];
      if (entity && decoded !== undefined) {
        text += decoded;
        i += entity[0].length;
      } else {
        text += char;
        i++;
      }
      continue;
    }
    if (char !== '<') {
      text += char;
      i++;
      continue;
    }
    const end = html.indexOf('>', i);
    if (end < 0) return { error: `Unclosed start tag at byte offset ${at(i)}` };
    const tag = /^<(\/?)([a-z-]*)(\s[^>]*)?\s*\/?>$/i.exec(html.slice(i, end + 1));
    const name = tag?.[2]?.toLowerCase() ?? '';
    if (tag?.[1] === '/') {
      if (stack.length === 0) return { error: `Unexpected end tag at byte offset ${at(i)}` };
      const open = stack.pop()!;
      if (open !== name) return { error: `Unmatched end tag at byte offset ${at(i)}, expected "</${open}>", found "</${name}>"` };
    } else {
      if (!tag || !TAGS.has(name)) return { error: `Unsupported start tag "${name}" at byte offset ${at(i)}` };
      stack.push(name);
    }
    i = end + 1;
  }
  if (stack.length > 0) return { error: `Can't find end tag corresponding to start tag "${stack.at(-1)}"` };
  return { text };
}

/** The visible text of a message as Telegram would store it (HTML parsed, trimmed, length checked). */
function visible(raw: unknown, parseMode: unknown, options: { rejectHtml: () => boolean } = { rejectHtml: () => false }): { text: string; html: string | undefined } {
  const source = typeof raw === 'string' ? raw : raw === undefined ? '' : String(raw);
  // Client::get_formatted_text refuses the raw text before it parses any entity.
  if (Buffer.byteLength(source, 'utf8') > RAW_LIMIT) throw badRequest('text is too long');
  let text = source;
  if (String(parseMode ?? '').toLowerCase() === 'html') {
    if (options.rejectHtml()) throw badRequest(`can't parse entities: Unsupported start tag "x" at byte offset 0`);
    const parsed = parseTelegramHtml(source);
    if ('error' in parsed) throw badRequest(`can't parse entities: ${parsed.error}`);
    text = parsed.text;
  }
  text = text.trim();
  if (text === '') throw badRequest('message text is empty');
  if (text.length > LIMIT) throw badRequest('message is too long');
  return { text, html: parseMode === undefined ? undefined : source };
}

// ---- request bodies ---------------------------------------------------------------------

interface Part { readonly data: Buffer; readonly filename?: string; readonly type?: string }

const JSON_FIELDS = new Set(['reply_parameters', 'allowed_updates', 'link_preview_options', 'reply_markup', 'entities', 'caption_entities']);

function parseParams(url: URL, contentType: string, body: Buffer): { params: Json; parts: Map<string, Part> } {
  const params: Json = {};
  const parts = new Map<string, Part>();
  const setField = (key: string, value: string): void => {
    params[key] = JSON_FIELDS.has(key) || value === 'true' || value === 'false' ? JSON.parse(value) : value;
  };
  for (const [key, value] of url.searchParams) setField(key, value);
  if (body.length === 0) return { params, parts };
  if (contentType.startsWith('application/json')) Object.assign(params, JSON.parse(body.toString('utf8')));
  else if (contentType.startsWith('application/x-www-form-urlencoded')) for (const [key, value] of new URLSearchParams(body.toString('utf8'))) setField(key, value);
  else if (contentType.startsWith('multipart/form-data')) {
    const boundary = /boundary="?([^";]+)"?/i.exec(contentType)?.[1];
    if (!boundary) throw new Error('no boundary');
    for (const [name, part] of parseMultipart(body, boundary)) {
      if (part.filename === undefined) setField(name, part.data.toString('utf8'));
      parts.set(name, part);
    }
  }
  return { params, parts };
}

/** multipart/form-data, tolerant like Telegram (grammY writes `filename=` unquoted, headers without spaces). */
function parseMultipart(body: Buffer, boundary: string): Map<string, Part> {
  const parts = new Map<string, Part>();
  const delimiter = Buffer.from(`--${boundary}`);
  let start = body.indexOf(delimiter);
  while (start >= 0) {
    const next = body.indexOf(delimiter, start + delimiter.length);
    if (next < 0) break;
    const chunk = body.subarray(start + delimiter.length + 2, next - 2); // skip CRLF after the delimiter and before the next
    const split = chunk.indexOf('\r\n\r\n');
    if (split >= 0) {
      const headers = chunk.subarray(0, split).toString('utf8');
      const name = /name="([^"]*)"/i.exec(headers)?.[1];
      const filename = /filename="([^"]*)"/i.exec(headers)?.[1] ?? /filename=([^;\r\n]+)/i.exec(headers)?.[1]?.trim();
      const type = /content-type:\s*([^\r\n]+)/i.exec(headers)?.[1]?.trim();
      if (name !== undefined) parts.set(name, { data: Buffer.from(chunk.subarray(split + 4)), ...(filename === undefined ? {} : { filename }), ...(type === undefined ? {} : { type }) });
    }
    start = next;
  }
  return parts;
}

function readAll(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

