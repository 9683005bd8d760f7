/**
 * A local Telegram Bot API server for tests and benchmarks. (Not npm's telegram-test-api:
 * it does not long-poll — getUpdates answers at once — so the poll loop, its offsets and
 * redelivery could not be tested against it.) It speaks the real wire format: POST/GET /bot<token>/<method>
 * with JSON, form-urlencoded or multipart bodies, answers {ok, result} or
 * {ok:false, error_code, description, parameters}. getUpdates really long-polls and honours
 * `offset` (which confirms earlier updates); HTML is validated like Telegram does and the
 * VISIBLE text is recorded; files go both ways. A webhook mode POSTs updates to the bot.
 *
 * People: alice, bob, mallory (a private chat each); one forum supergroup with one topic
 * (the `thread` place). Fault hooks: drop or stall polls, restart, 429s, blocked users.
 */
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { BotMessage, ChatPeer, PeerUser, Place } from '../contracts/chat-channel.ts';
import { freePort } from '../support/net.ts';

type Json = Record<string, unknown>;
export interface TgUser { id: number; is_bot: boolean; first_name: string; username: string }
export interface TgChat { id: number; type: 'private' | 'supergroup'; title?: string; first_name?: string; username?: string; is_forum?: boolean }
export interface TgMessage extends Json { message_id: number; chat: TgChat; date: number; from?: TgUser }
export interface Update { update_id: number; message?: TgMessage; edited_message?: TgMessage }

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

export interface ApiCall { readonly method: string; readonly params: Json; status: number; readonly at: number }

export interface TelegramPeerOptions {
  /** Configure the bot for webhook mode: updates are POSTed to it instead of handed to getUpdates. */
  readonly webhook?: boolean;
  /** Answer getUpdates at once, ignoring its `timeout` (as telegram-test-api and some proxies do). */
  readonly ignoreTimeout?: boolean;
}

export interface TelegramPeer extends ChatPeer {
  readonly token: string;
  /** http://127.0.0.1:PORT — the bot's api_root. */
  readonly apiRoot: string;
  readonly bot: TgUser;
  readonly groupId: number;
  readonly topicId: number;
  /** Every Bot API call, in order. */
  readonly calls: readonly ApiCall[];
  /** Everything the bot posted (all chats), in order. */
  readonly sent: readonly SentMessage[];
  /** The webhook settings in the config section (webhook mode). */
  readonly webhook: { url: string; listen: string; secret: string } | undefined;
  /** Status codes the bot's webhook answered, in order. */
  readonly webhookAnswers: readonly number[];
  /** A person posts a file of a given kind (document by default). */
  postFile(user: PeerUser, place: Place, file: { name: string; mime: string; data: Uint8Array }, caption?: string, kind?: 'document' | 'photo' | 'voice'): Promise<void>;
  /** Queues any update (update_id is assigned); returns the update_id. */
  queue(update: Omit<Update, 'update_id'>): number;
  /** A message object as a person in a place would send it (not queued). */
  messageFrom(user: PeerUser, place: Place, text: string, extra?: Json): TgMessage;
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
  /** The next `n` sendMessage calls answer 429 with retry_after. */
  rateLimitSends(n: number, retryAfterSeconds: number): void;
  /** The next `n` sendMessage / editMessageText calls with parse_mode HTML answer 400 "can't parse entities". */
  rejectHtml(n: number): void;
  /** The next getUpdates that would hand out updates has its connection destroyed instead (the batch is lost in transit). */
  dropNextDelivery(): void;
  /** The user blocks the bot: sends to their chat answer 403. */
  block(user: PeerUser): void;
  /** POSTs an update to the bot's webhook with a given secret; returns the HTTP status. */
  webhookRequest(update: Omit<Update, 'update_id'>, secret: string): Promise<number>;
}

const LIMIT = 4096;
const people: Record<PeerUser, TgUser> = {
  alice: { id: 1001, is_bot: false, first_name: 'Alice', username: 'alice' },
  bob: { id: 1002, is_bot: false, first_name: 'Bob', username: 'bob' },
  mallory: { id: 1003, is_bot: false, first_name: 'Mallory', username: 'mallory' },
};

class ApiError extends Error {
  readonly code: number;
  readonly parameters: Json | undefined;
  constructor(code: number, description: string, parameters?: Json) {
    super(description);
    this.code = code;
    this.parameters = parameters;
  }
}

const badRequest = (what: string): ApiError => new ApiError(400, `Bad Request: ${what}`);
const now = (): number => Math.floor(Date.now() / 1000);

export async function startTelegramPeer(options: TelegramPeerOptions = {}): Promise<TelegramPeer> {
  const bot: TgUser = { id: 7_000_001, is_bot: true, first_name: 'Switchboard Test', username: 'switchboard_test_bot' };
  const token = `${bot.id}:AA${randomBytes(12).toString('hex')}`;
  const group: TgChat = { id: -1_001_000_000_001, type: 'supergroup', title: 'Test group', is_forum: true };
  const privateChat = (user: PeerUser): TgChat => ({ id: people[user].id, type: 'private', first_name: people[user].first_name, username: people[user].username });
  const counters = new Map<number, number>();
  const nextId = (chat: number): number => {
    const n = (counters.get(chat) ?? 0) + 1;
    counters.set(chat, n);
    return n;
  };
  const topicCreated: TgMessage = {
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
  let files: Array<{ chatId: number; threadId: number | undefined; name: string }> = [];
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

  interface Poll { params: Json; res: ServerResponse; timer?: NodeJS.Timeout }
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
  const strangers = new Map<number, TgUser>();
  const findChat = (id: unknown): TgChat => {
    const n = Number(id);
    if (n === group.id) return group;
    const user = Object.values(people).find((p) => p.id === n) ?? strangers.get(n);
    if (!user) throw badRequest('chat not found');
    if (blocked.has(n)) throw new ApiError(403, 'Forbidden: bot was blocked by the user');
    return { id: user.id, type: 'private', first_name: user.first_name, username: user.username };
  };
  const threadFor = (chat: TgChat, params: Json): number | undefined => {
    if (params.message_thread_id === undefined || chat.type === 'private') return undefined;
    const id = Number(params.message_thread_id);
    if (id !== topicId) throw badRequest('message thread not found');
    return id;
  };

  function messageFrom(user: PeerUser, place: Place, text: string, extra: Json = {}): TgMessage {
    const { chat, threadId } = placeOf(place);
    const message: TgMessage = { message_id: nextId(chat.id), from: people[user], chat, date: now(), ...extra };
    if (text !== '') {
      const command = /^\/[A-Za-z0-9_]+(@[A-Za-z0-9_]+)?/.exec(text);
      const key = extra.caption !== undefined ? 'caption' : 'text';
      message[key] = text;
      if (command) message[key === 'text' ? 'entities' : 'caption_entities'] = [{ type: 'bot_command', offset: 0, length: command[0].length }];
    }
    if (threadId !== undefined) Object.assign(message, { message_thread_id: threadId, is_topic_message: true, reply_to_message: topicCreated });
    userMessages.add(`${chat.id}:${message.message_id}`);
    return message;
  }

  function queue(update: Omit<Update, 'update_id'>): number {
    // A person beyond alice, bob and mallory who writes privately: their chat exists from then on.
    const written = update.message;
    if (written?.from && written.chat.type === 'private' && !Object.values(people).some((p) => p.id === written.chat.id)) {
      strangers.set(written.chat.id, written.from);
      userMessages.add(`${written.chat.id}:${written.message_id}`);
    }
    const full = { update_id: nextUpdateId++, ...update };
    lastUpdateId = full.update_id;
    updates.push(full);
    if (webhookSet) void pushWebhook();
    else answerWaiting();
    return full.update_id;
  }

  // ---- getUpdates ------------------------------------------------------------------------

  const reply = (res: ServerResponse, status: number, body: Json): void => {
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

  function getUpdates(params: Json, res: ServerResponse): void {
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
      reply(res, 200, { ok: true, result: [] });
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
    reply(res, 200, { ok: true, result: batch });
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

  async function postToBot(update: Omit<Update, 'update_id'> & { update_id?: number }, secret: string | undefined): Promise<number> {
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

  function sendMessage(params: Json): TgMessage {
    if (rateLimited.n > 0) {
      rateLimited.n--;
      throw new ApiError(429, `Too Many Requests: retry after ${rateLimited.retryAfter}`, { retry_after: rateLimited.retryAfter });
    }
    const chat = findChat(params.chat_id);
    const threadId = threadFor(chat, params);
    const { text, html } = visible(params.text, params.parse_mode, htmlHook);
    const replyParameters = params.reply_parameters as { message_id?: number; allow_sending_without_reply?: boolean } | undefined;
    const replyTo = replyParameters?.message_id;
    if (replyTo !== undefined && !userMessages.has(`${chat.id}:${replyTo}`) && !sent.some((m) => m.chatId === chat.id && m.messageId === replyTo) && !replyParameters?.allow_sending_without_reply) {
      throw badRequest('message to be replied not found');
    }
    const record: SentMessage = { chatId: chat.id, threadId, messageId: nextId(chat.id), text, html, edits: 0, replyTo };
    sent.push(record);
    return { message_id: record.messageId, from: bot, chat, date: now(), text, ...(threadId === undefined ? {} : { message_thread_id: threadId, is_topic_message: true }) };
  }

  function editMessageText(params: Json): TgMessage {
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

  function sendDocument(params: Json, parts: Map<string, Part>): TgMessage {
    const chat = findChat(params.chat_id);
    const threadId = threadFor(chat, params);
    const ref = String(params.document ?? '');
    const part = ref.startsWith('attach://') ? parts.get(ref.slice('attach://'.length)) : parts.get('document');
    if (!part?.filename) throw badRequest('there is no document in the request');
    files.push({ chatId: chat.id, threadId, name: part.filename });
    const document = { ...storeFile(part.data, 'documents', part.filename), file_name: part.filename, mime_type: part.type ?? 'application/octet-stream' };
    const caption = params.caption === undefined ? undefined : visible(params.caption, params.parse_mode).text;
    return { message_id: nextId(chat.id), from: bot, chat, date: now(), document, ...(caption ? { caption } : {}) };
  }

  function call(method: string, params: Json, parts: Map<string, Part>): unknown {
    switch (method) {
      case 'getMe':
        return { ...bot, can_join_groups: true, can_read_all_group_messages: false, supports_inline_queries: false };
      case 'deleteWebhook':
        if (params.drop_pending_updates === true) updates = [];
        webhookSet = undefined;
        return true;
      case 'setWebhook': {
        const url = String(params.url ?? '');
        if (!/^https:\/\//.test(url)) throw badRequest('bad webhook: An HTTPS URL must be provided for webhook');
        webhookSet = { url, secret: params.secret_token === undefined ? undefined : String(params.secret_token) };
        for (const poll of waiting) fail(poll.res, new ApiError(409, 'Conflict: terminated by setWebhook request'));
        waiting = [];
        void pushWebhook();
        return true;
      }
      case 'getWebhookInfo':
        return { url: webhookSet?.url ?? '', has_custom_certificate: false, pending_update_count: updates.length };
      case 'sendMessage':
        return sendMessage(params);
      case 'editMessageText':
        return editMessageText(params);
      case 'sendChatAction': {
        const chat = findChat(params.chat_id);
        typing.push({ chatId: chat.id, threadId: threadFor(chat, params) });
        return true;
      }
      case 'getFile': {
        const file = stored.get(String(params.file_id ?? ''));
        if (!file) throw badRequest('invalid file_id');
        return { file_id: params.file_id, file_unique_id: `U${String(params.file_id).slice(1, 9)}`, file_size: file.size, file_path: file.path };
      }
      case 'sendDocument':
        return sendDocument(params, parts);
      case 'setMyCommands':
      case 'deleteMyCommands':
        return true;
      default:
        throw new ApiError(404, 'Not Found');
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
    if (method === 'getUpdates') return getUpdates(params, res);
    try {
      reply(res, 200, { ok: true, result: call(method, params, parts) });
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
    async postFile(user, place, file, caption, kind = 'document') {
      const data = Buffer.from(file.data);
      const extra: Json = caption === undefined ? {} : { caption };
      if (kind === 'photo') {
        const big = storeFile(data, 'photos', file.name);
        extra.photo = [{ ...storeFile(data.subarray(0, Math.min(16, data.length)), 'photos', file.name), width: 90, height: 90 }, { ...big, width: 800, height: 600 }];
      } else if (kind === 'voice') extra.voice = { ...storeFile(data, 'voice', file.name), duration: 1, mime_type: file.mime };
      else extra.document = { ...storeFile(data, 'documents', file.name), file_name: file.name, mime_type: file.mime };
      queue({ message: messageFrom(user, place, caption ?? '', extra) });
    },
    queue,
    messageFrom,
    deliveries: (updateId) => delivered.get(updateId) ?? 0,
    botMessages(place): BotMessage[] {
      return sent.filter(inPlace(place)).map((m) => ({ text: m.text, edits: m.edits }));
    },
    botFiles: (place) => files.filter(inPlace(place)).map((f) => f.name),
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

