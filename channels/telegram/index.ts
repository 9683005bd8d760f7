/**
 * The Telegram channel (Bot API through grammY's Api client): long polling with our own
 * getUpdates loop, or a webhook; private chats, groups, supergroups and forum topics;
 * markdown rendered as Telegram HTML; typing, streaming edits and files both ways.
 *
 * Ids: a message is `<chat id>:<message_id>` (stable across redeliveries), the account is
 * the bot's id, a forum topic is the thread (`message_thread_id`).
 */
import { stat } from 'node:fs/promises';
import { Api, InputFile } from 'grammy';
import { readImageHeaderOfFile, type ImageHeader } from '../../src/media/dimensions.ts';
import type { Update } from 'grammy/types';
import type { Logger } from 'pino';
import {
  SendError,
  type Channel,
  type ChannelContext,
  type FileSender,
  type ListenLink,
  type MessageEditor,
  type MessageLimit,
  type OutboundFile,
  type OutboundMessage,
  type Push,
  type TypingIndicator,
} from '../../src/channel.ts';
import type { ConversationRef } from '../../src/conversation.ts';
import type { TelegramConfig } from './config.ts';
import { apiFailure, describeError, grammySignal, isMarkupError, isNotModified, migratedTo, toSendError } from './errors.ts';
import { telegramMessageId, type BotIdentity } from './inbound.ts';
import { createIntake } from './intake.ts';
import { MigrationStore } from './migrations.ts';
import { poll, type PollState } from './poll.ts';
import { OffsetStore } from './offset.ts';
import { measure, rendered, TELEGRAM_LIMIT } from './render.ts';
import { serveWebhook } from './webhook.ts';
import { botApiFetch } from './transport.ts';

/** Bots may upload files up to 50 MB. */
const MAX_UPLOAD = 50 * 1024 * 1024;
export { MAX_DOWNLOAD } from './intake.ts';

export type TelegramChannel = Channel & MessageLimit & TypingIndicator & MessageEditor & FileSender & { readonly livenessTimeoutMs?: number };

export function createTelegramChannel(config: TelegramConfig, ctx: ChannelContext): TelegramChannel {
  const token = config.token;
  const apiRoot = (config.api_root ?? 'https://api.telegram.org').replace(/\/+$/, '');
  // Both clients' calls go over one pool of our node:http client, not grammY's node-fetch (transport.ts).
  const fetch = botApiFetch();
  // getUpdates is held up to poll_timeout_seconds; a request taking far longer than that is hung.
  const api = new Api(token, { apiRoot, timeoutSeconds: Math.max(60, config.poll_timeout_seconds + 30), fetch });
  // Uploads of up to 50 MB may take a while on a slow link.
  const uploads = new Api(token, { apiRoot, timeoutSeconds: 600, fetch });
  const log: Logger = ctx.log;
  // A token is "<bot id>:<secret>": the account is known before getMe answers.
  let account = /^(\d+):/.exec(token)?.[1] ?? '';
  let me: BotIdentity | undefined;
  const state: PollState = { offset: undefined };
  const offsets = new OffsetStore({ state: ctx.state, bot: account, log, ...(ctx.storage ? { storage: ctx.storage } : {}) });
  const migrations = new MigrationStore(ctx.state);
  // A poll returns at least every poll_timeout_seconds; allow a margin for a slow network.
  const livenessMs = Math.round(config.poll_timeout_seconds * 1000 * 1.2 + 5000);
  // An update → a pushed message (intake.ts); it reads who the bot is once identify() has asked.
  const handle = createIntake({ ctx, api, apiRoot, token, migrations, log, moved: (from, to) => moved(from, to), identity: () => ({ me, account }) });

  async function identify(signal: AbortSignal): Promise<BotIdentity> {
    if (me) return me;
    const user = await api.getMe(grammySignal(signal)).catch((error: unknown) => {
      throw new Error(`getMe failed: ${describeError(error, token)}`);
    });
    me = { id: user.id, username: user.username, firstName: user.first_name };
    account = String(user.id);
    log.info({ bot: `@${user.username}`, id: user.id }, 'signed in to Telegram');
    if (!user.can_read_all_group_messages) warnPrivacyMode(user.username);
    return me;
  }

  /**
   * Privacy mode (on for every new bot: https://core.telegram.org/bots/features#privacy-mode):
   * in groups Telegram delivers only commands, @mentions of the bot and replies to it. What the
   * runtime does with the rest — keeping unaddressed messages as context for the next turn,
   * taking a message that starts with the bot's name as addressed, answering everything when
   * mention_only = false — never happens then. Said once, when the bot signs in.
   */
  function warnPrivacyMode(username: string): void {
    const lost = [
      'what people say around the bot is not kept as context',
      `a message that starts with its name ("${ctx.assistantName}, …") does not reach it`,
      ...(config.mention_only ? [] : ['mention_only = false cannot answer the other group messages']),
    ];
    log.warn(
      { bot: `@${username}`, can_read_all_group_messages: false },
      `privacy mode is on: in groups Telegram delivers to the bot only commands, @mentions of it and replies to it, so ${lost.join('; ')}. ` +
        `To fix: in Telegram, @BotFather → /setprivacy → @${username} → Disable; then remove the bot from each group and add it again (Telegram applies the change to a group only when the bot rejoins it)`,
    );
  }

  /** Records that group `from` became supergroup `to`; says so once. */
  async function moved(from: string, to: string): Promise<void> {
    if (await migrations.record(from, to)) log.info({ chat: from, supergroup: to }, 'the group was upgraded to a supergroup; its conversation continues there');
  }
  const chatId = (chat: string): number | string => (/^-?\d+$/.test(chat) ? Number(chat) : chat);



  /**
   * Calls `call` with the chat a conversation's messages go to: the supergroup its group became,
   * when it did — learnt from the service message, or from the 400 with migrate_to_chat_id that
   * a write to the old id gets (then the call is made again there).
   */
  async function inChat<T>(ref: ConversationRef, call: (chat: number | string) => Promise<T>): Promise<T> {
    const target = await migrations.target(ref.chat);
    try {
      return await call(chatId(target));
    } catch (error) {
      const to = migratedTo(error);
      if (to === undefined) throw error;
      await moved(ref.chat, String(to));
      return await call(to);
    }
  }
  const threadOf = (ref: ConversationRef): { message_thread_id?: number } =>
    ref.thread !== undefined && /^\d+$/.test(ref.thread) ? { message_thread_id: Number(ref.thread) } : {};
  /** In groups a reply quotes the message it answers (when in the chat it goes to); in a private chat that is only clutter. */
  const replyOf = (message: OutboundMessage, chat: number | string): { reply_parameters?: { message_id: number; allow_sending_without_reply: boolean } } => {
    const inChat = message.replyTo?.startsWith(`${chat}:`) ?? false;
    const id = message.replyTo === undefined || !inChat || !message.chat.startsWith('-') ? undefined : telegramMessageId(message.replyTo);
    return id === undefined ? {} : { reply_parameters: { message_id: id, allow_sending_without_reply: true } };
  };

  /**
   * Sends as HTML; when Telegram cannot parse it, the same part again as plain text. `html`
   * false: plain text at once (a draft whose HTML is over Telegram's 32 KiB of raw text —
   * the outbox's parts never are, see render.ts `measure`).
   */
  async function withFallback<T>(what: string, call: (html: boolean) => Promise<T>, html = true): Promise<T> {
    try {
      return await call(html);
    } catch (error) {
  if (!html || !isMarkupError(error)) throw toSendError(error, what, token);
      log.warn({ reason: describeError(error, token) }, `${what}: Telegram rejected the formatting; sending plain text`);
      try {
        return await call(false);
      } catch (retryError) {
        throw toSendError(retryError, what, token);
      }
    }
  }

  async function post(message: OutboundMessage): Promise<number> {
    const part = rendered(message.text);
    const sent = await withFallback('sendMessage', (html) =>
      inChat(message, (chat) =>
        api.sendMessage(chat, html ? part.html : part.plain(), {
          ...(html ? { parse_mode: 'HTML' as const } : {}),
          ...threadOf(message),
          ...replyOf(message, chat),
        }),
      ),
      part.fitsRaw,
    );
    return sent.message_id;
  }

  const channel: TelegramChannel = {
    name: ctx.name,
    maxMessageLength: TELEGRAM_LIMIT,
    measure,
    typingIntervalMs: 4000, // Telegram shows "typing…" for about 5 s
    editIntervalMs: 1000, // about one edit per second per chat is tolerated
    ...(config.webhook ? {} : { livenessTimeoutMs: livenessMs }),

    async listen(push: Push, signal: AbortSignal, link: ListenLink): Promise<void> {
      await identify(signal);
      await migrations.reload(); // groups moved to supergroups, as this node or the last owner recorded them
      const handleUpdate = (update: Update): Promise<void> => handle(update, push, signal);
      if (config.webhook) {
        await serveWebhook({ api, token, config: config.webhook, livenessMs, log, handle: handleUpdate }, signal, link);
        return;
      }
      // Polling: a webhook left set would make getUpdates fail with 409.
      await api.deleteWebhook({ drop_pending_updates: false }, grammySignal(signal)).catch((error: unknown) => {
        if (!signal.aborted) throw new Error(`deleteWebhook failed: ${describeError(error, token)}`);
      });
      if (signal.aborted) return;
      // Where the last poller (this node before a restart, or another before a takeover) left off.
      const saved = await offsets.load();
      if (saved !== undefined && (state.offset === undefined || saved > state.offset)) state.offset = saved;
      link.ready();
      await poll(
        { api, token, timeoutSeconds: config.poll_timeout_seconds, server: apiRoot, livenessMs, log, state, save: (offset) => offsets.save(offset), handle: handleUpdate },
        signal,
        link,
      );
    },

    async send(message: OutboundMessage): Promise<void> {
      await post(message);
    },

    async sendDraft(message: OutboundMessage): Promise<string> {
      return String(await post(message));
    },

    async edit(ref: ConversationRef, messageId: string, text: string): Promise<void> {
      const id = Number(messageId);
      if (!Number.isSafeInteger(id)) throw new SendError(`editMessageText: bad message id ${messageId}`, { permanent: true });
      const part = rendered(text);
      await withFallback(
        'editMessageText',
        (html) =>
          inChat(ref, (chat) => api.editMessageText(chat, id, html ? part.html : part.plain(), html ? { parse_mode: 'HTML' } : {})).catch((error: unknown) => {
            if (isNotModified(error)) return true; // the same text again: nothing to do
            throw error;
          }),
        part.fitsRaw,
      );
    },

    async typing(ref: ConversationRef): Promise<void> {
      try {
        await inChat(ref, (chat) => api.sendChatAction(chat, 'typing', threadOf(ref)));
      } catch (error) {
        // Flood control covers chat actions too: the wait is the runtime's to honour, like a send's.
        if (apiFailure(error)?.error_code === 429) throw toSendError(error, 'sendChatAction', token);
        log.debug({ reason: describeError(error, token) }, 'typing indicator not shown'); // best effort
      }
    },

    async sendFile(ref: ConversationRef, file: OutboundFile): Promise<void> {
      const size = await stat(file.path).then(
        (s) => s.size,
        () => undefined,
      );
      if (size === undefined) throw new SendError(`sendDocument: ${file.name} does not exist`, { permanent: true });
      if (size > MAX_UPLOAD) throw new SendError(`sendDocument: ${file.name} is over Telegram's 50 MB limit for bots`, { permanent: true });
      const method = uploadMethod(await readImageHeaderOfFile(file.path), size);
      try {
        await inChat(ref, async (chat): Promise<unknown> => {
          const input = new InputFile(file.path, file.name);
          if (method === 'sendPhoto') return uploads.sendPhoto(chat, input, threadOf(ref));
          if (method === 'sendAnimation') return uploads.sendAnimation(chat, input, threadOf(ref));
          return uploads.sendDocument(chat, input, threadOf(ref));
        });
      } catch (error) {
        throw toSendError(error, method, token);
      }
    },
  };
  return channel;
}

/**
 * Bot API, sendPhoto (https://core.telegram.org/bots/api#sendphoto): "The photo must be at most
 * 10 MB in size. The photo's width and height must not exceed 10000 in total. Width and height
 * ratio must be at most 20." (the same in TDLib's inputMessagePhoto, tdlib/td td_api.tl; over
 * them Telegram answers PHOTO_INVALID_DIMENSIONS / PHOTO_SAVE_FILE_INVALID).
 */
export const PHOTO_LIMITS = { maxBytes: 10 * 1024 * 1024, maxWidthPlusHeight: 10_000, maxRatio: 20 } as const;

/**
 * How a file goes out: a JPEG or PNG within sendPhoto's limits as a photo (shown inline,
 * re-encoded by Telegram); a GIF as an animation (sendAnimation: "GIF or H.264/MPEG-4 AVC video
 * without sound", up to 50 MB); everything else — WebP (which Telegram shows as a sticker-like
 * file), an image over the photo limits, a PDF — as a document, byte for byte. The kind comes
 * from the bytes (src/media/sniff.ts), never from the name.
 */
export function uploadMethod(header: ImageHeader | undefined, size: number): 'sendPhoto' | 'sendAnimation' | 'sendDocument' {
  if (!header) return 'sendDocument';
  if (header.format === 'gif') return 'sendAnimation';
  if (header.format !== 'jpeg' && header.format !== 'png') return 'sendDocument';
  const { width, height } = header;
  const fits = size <= PHOTO_LIMITS.maxBytes && width + height <= PHOTO_LIMITS.maxWidthPlusHeight && Math.max(width, height) <= PHOTO_LIMITS.maxRatio * Math.min(width, height);
  return fits ? 'sendPhoto' : 'sendDocument';
}
