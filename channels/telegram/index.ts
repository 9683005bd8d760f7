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
import type { TelegramConfig } from '../../src/config/schema.ts';
import { describeError, grammySignal, isMarkupError, isNotModified, toSendError } from './errors.ts';
import { messageOf, normalise, telegramMessageId, type BotIdentity } from './inbound.ts';
import { poll, type PollState } from './poll.ts';
import { OffsetStore } from './offset.ts';
import { measure, plainText, renderHtml, TELEGRAM_LIMIT } from './render.ts';
import { serveWebhook } from './webhook.ts';

/** Bots may upload files up to 50 MB. */
const MAX_UPLOAD = 50 * 1024 * 1024;

export type TelegramChannel = Channel & MessageLimit & TypingIndicator & MessageEditor & FileSender & { readonly livenessTimeoutMs?: number };

export function createTelegramChannel(config: TelegramConfig, ctx: ChannelContext): TelegramChannel {
  const token = config.token;
  const apiRoot = (config.api_root ?? 'https://api.telegram.org').replace(/\/+$/, '');
  // getUpdates is held up to poll_timeout_seconds; a request taking far longer than that is hung.
  const api = new Api(token, { apiRoot, timeoutSeconds: Math.max(60, config.poll_timeout_seconds + 30) });
  // Uploads of up to 50 MB may take a while on a slow link.
  const uploads = new Api(token, { apiRoot, timeoutSeconds: 600 });
  const log: Logger = ctx.log;
  // A token is "<bot id>:<secret>": the account is known before getMe answers.
  let account = /^(\d+):/.exec(token)?.[1] ?? '';
  let me: BotIdentity | undefined;
  const state: PollState = { offset: undefined };
  const offsets = new OffsetStore({ state: ctx.state, bot: account, log, ...(ctx.storage ? { storage: ctx.storage } : {}) });
  // A poll returns at least every poll_timeout_seconds; allow a margin for a slow network.
  const livenessMs = Math.round(config.poll_timeout_seconds * 1000 * 1.2 + 5000);

  async function identify(signal: AbortSignal): Promise<BotIdentity> {
    if (me) return me;
    const user = await api.getMe(grammySignal(signal)).catch((error: unknown) => {
      throw new Error(`getMe failed: ${describeError(error, token)}`);
    });
    me = { id: user.id, username: user.username, firstName: user.first_name };
    account = String(user.id);
    log.info({ bot: `@${user.username}`, id: user.id }, 'signed in to Telegram');
    return me;
  }

  /** Normalises, downloads files, pushes. Rejects only when `push` does (the update is then not confirmed). */
  async function handle(update: Update, push: Push, listening: AbortSignal): Promise<void> {
    if (!me) return;
    let normalised;
    try {
      const message = messageOf(update);
      if (!message) return;
      normalised = normalise(message, me, { channel: ctx.name, account, assistantName: ctx.assistantName });
    } catch (error) {
      log.error({ reason: describeError(error, token), update: update.update_id }, 'could not read an update; skipped');
      return;
    }
    if (!normalised) return;
    const { message: inbound, files } = normalised;
    const attachments = await Promise.all(
      files.map((file) =>
        ctx.attachments.save({
          channel: ctx.name,
          messageId: inbound.id,
          kind: file.kind,
          ...(file.name === undefined ? {} : { name: file.name }),
          ...(file.mime === undefined ? {} : { mime: file.mime }),
          ...(file.size === undefined ? {} : { size: file.size }),
          // a shutdown cuts a download short (the file is noted as not saved; the push is refused anyway)
          download: (signal) => download(file.fileId, AbortSignal.any([signal, listening])),
        }),
      ),
    );
    await push(attachments.length > 0 ? { ...inbound, attachments } : inbound);
  }

  async function download(fileId: string, signal: AbortSignal): Promise<Uint8Array> {
    try {
      const file = await api.getFile(fileId, grammySignal(signal));
      if (!file.file_path) throw new Error('Telegram gave no file path');
      const response = await fetch(`${apiRoot}/file/bot${token}/${file.file_path}`, { signal });
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      return new Uint8Array(await response.arrayBuffer());
    } catch (error) {
      // eslint-disable-next-line preserve-caught-error -- grammY's error would carry the token (see describeError)
      throw new Error(`download failed: ${describeError(error, token)}`);
    }
  }

  const chatId = (chat: string): number | string => (/^-?\d+$/.test(chat) ? Number(chat) : chat);
  const threadOf = (ref: ConversationRef): { message_thread_id?: number } =>
    ref.thread !== undefined && /^\d+$/.test(ref.thread) ? { message_thread_id: Number(ref.thread) } : {};
  /** In groups a reply quotes the message it answers; in a private chat that is only clutter. */
  const replyOf = (message: OutboundMessage): { reply_parameters?: { message_id: number; allow_sending_without_reply: boolean } } => {
    const id = message.replyTo === undefined || !message.chat.startsWith('-') ? undefined : telegramMessageId(message.replyTo);
    return id === undefined ? {} : { reply_parameters: { message_id: id, allow_sending_without_reply: true } };
  };

  /** Sends as HTML; when Telegram cannot parse it, the same part again as plain text. */
  async function withFallback<T>(what: string, call: (html: boolean) => Promise<T>): Promise<T> {
    try {
      return await call(true);
    } catch (error) {
      if (!isMarkupError(error)) throw toSendError(error, what, token);
      log.warn({ reason: describeError(error, token) }, `${what}: Telegram rejected the formatting; sending plain text`);
      try {
        return await call(false);
      } catch (retryError) {
        throw toSendError(retryError, what, token);
      }
    }
  }

  async function post(message: OutboundMessage): Promise<number> {
    const sent = await withFallback('sendMessage', (html) =>
      api.sendMessage(chatId(message.chat), html ? renderHtml(message.text) : plainText(message.text), {
        ...(html ? { parse_mode: 'HTML' as const } : {}),
        ...threadOf(message),
        ...replyOf(message),
      }),
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
      await withFallback('editMessageText', (html) =>
        api.editMessageText(chatId(ref.chat), id, html ? renderHtml(text) : plainText(text), html ? { parse_mode: 'HTML' } : {}).catch((error: unknown) => {
          if (isNotModified(error)) return true; // the same text again: nothing to do
          throw error;
        }),
      );
    },

    async typing(ref: ConversationRef): Promise<void> {
      try {
        await api.sendChatAction(chatId(ref.chat), 'typing', threadOf(ref));
      } catch (error) {
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
      try {
        await uploads.sendDocument(chatId(ref.chat), new InputFile(file.path, file.name), threadOf(ref));
      } catch (error) {
        throw toSendError(error, 'sendDocument', token);
      }
    },
  };
  return channel;
}
