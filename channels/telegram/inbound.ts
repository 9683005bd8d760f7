/**
 * Telegram message → InboundMessage: ids, conversation refs (chat, forum topic), sender,
 * whether the bot was addressed, mention stripping and the files that came with it.
 * Pure functions, no I/O: the channel downloads the files this describes.
 */
import type { Message, MessageEntity, PhotoSize } from 'grammy/types';
import type { Attachment, InboundMessage } from '../../src/channel.ts';
import { expectShape, isRecord, MalformedPayload } from '../../src/inbound/malformed.ts';

/** Who the bot is (from getMe). */
export interface BotIdentity {
  readonly id: number;
  /** Without the "@". */
  readonly username: string;
  readonly firstName: string;
}

/** A file a message carries, before it is downloaded. */
export interface FileRef {
  readonly kind: Attachment['kind'];
  readonly fileId: string;
  readonly name?: string;
  readonly mime?: string;
  readonly size?: number;
}

export interface Normalised {
  readonly message: InboundMessage;
  readonly files: readonly FileRef[];
}

export interface NormaliseOptions {
  /** Channel instance name. */
  readonly channel: string;
  /** The bot account id (conversation keys). */
  readonly account: string;
  /** The agent's name: a group message starting with it is addressed to the bot. */
  readonly assistantName: string;
  /**
   * The most bytes a file may have to be downloaded (the attachment limit, capped by the 20 MB
   * getFile allows): a photo's largest size within it is taken. @default no limit
   */
  readonly maxFileBytes?: number;
}

/**
 * The platform id of a message: stable across redeliveries (unlike update_id, which a webhook
 * retry keeps but a re-sent getUpdates batch after a restart may not), unique per bot.
 */
export const messageId = (chatId: number | string, messageIdInChat: number | string): string => `${chatId}:${messageIdInChat}`;

/** The message_id part of an id made by {@link messageId}. */
export function telegramMessageId(id: string): number | undefined {
  const n = Number(id.slice(id.lastIndexOf(':') + 1));
  return Number.isSafeInteger(n) && n > 0 ? n : undefined;
}

/**
 * The message an update carries (an update body as Telegram sends it, not yet trusted), or
 * undefined for an update that carries none (edits, anything not a JSON object). Throws
 * {@link MalformedPayload} when `message` is there but is not an object.
 */
export function messageOf(update: unknown): Message | undefined {
  if (!isRecord(update) || update.message === undefined) return undefined;
  if (!isRecord(update.message)) throw new MalformedPayload('update.message', 'must be an object');
  return update.message as unknown as Message;
}

const userShape = { id: 'number', 'is_bot?': 'boolean', 'first_name?': 'string', 'last_name?': 'string', 'username?': 'string' };
const fileShape = { file_id: 'string', 'file_size?': 'number', 'file_name?': 'string', 'mime_type?': 'string' };

/** Checks every field {@link normalise} reads; throws {@link MalformedPayload} naming the first that does not fit. */
function checkMessage(msg: unknown): asserts msg is Message {
  const m = expectShape(msg, 'message', {
    message_id: 'number|string',
    date: 'number',
    chat: 'object',
    'from?': 'object',
    'text?': 'string',
    'caption?': 'string',
    'entities?': 'array',
    'caption_entities?': 'array',
    'is_topic_message?': 'boolean',
    'message_thread_id?': 'number',
    'reply_to_message?': 'object',
    'photo?': 'array',
  });
  expectShape(m.chat, 'message.chat', { id: 'number|string', type: 'string' });
  if (m.from !== undefined) expectShape(m.from, 'message.from', userShape);
  for (const key of ['entities', 'caption_entities'] as const) {
    for (const [i, entity] of ((m[key] ?? []) as unknown[]).entries()) {
      const e = expectShape(entity, `message.${key}.${i}`, { type: 'string', offset: 'number', length: 'number', 'user?': 'object' });
      if (e.type === 'text_mention') expectShape(e.user, `message.${key}.${i}.user`, userShape);
    }
  }
  if (m.reply_to_message !== undefined) {
    const reply = expectShape(m.reply_to_message, 'message.reply_to_message', { 'from?': 'object' });
    if (reply.from !== undefined) expectShape(reply.from, 'message.reply_to_message.from', userShape);
  }
  for (const [i, photo] of ((m.photo ?? []) as unknown[]).entries()) expectShape(photo, `message.photo.${i}`, { ...fileShape, width: 'number', height: 'number' });
  for (const key of ['document', 'voice', 'audio', 'video', 'video_note', 'sticker'] as const) {
    if (m[key] !== undefined) expectShape(m[key], `message.${key}`, key === 'sticker' ? { ...fileShape, 'is_animated?': 'boolean', 'is_video?': 'boolean' } : fileShape);
  }
}

/**
 * Normalises a message, or returns undefined for what the bot never answers (bots, service
 * messages). Throws {@link MalformedPayload} for a message that lacks a field it reads or has
 * one of the wrong type (the channel logs and skips it).
 */
export function normalise(msg: Message, bot: BotIdentity, options: NormaliseOptions): Normalised | undefined {
  checkMessage(msg);
  const from = msg.from;
  if (!from || from.is_bot) return undefined; // the bot itself, other bots, anonymous admins (GroupAnonymousBot)
  const files = filesOf(msg, options.maxFileBytes);
  const raw = msg.text ?? msg.caption ?? '';
  if (raw === '' && files.length === 0) return undefined; // joins, pins, topic creation…: nothing to answer
  const entities = msg.entities ?? msg.caption_entities ?? [];
  const direct = msg.chat.type === 'private';
  const id = messageId(msg.chat.id, msg.message_id);
  const text = cleanText(raw, entities, bot);
  const addressed = direct || isAddressed(msg, raw, entities, bot, options.assistantName);
  const name = [from.first_name, from.last_name].filter(Boolean).join(' ') || from.username;
  const thread = msg.is_topic_message && msg.message_thread_id !== undefined ? String(msg.message_thread_id) : undefined;
  const message: InboundMessage = {
    channel: options.channel,
    account: options.account,
    chat: String(msg.chat.id),
    ...(thread === undefined ? {} : { thread }),
    id,
    sender: name ? { id: String(from.id), name } : { id: String(from.id) },
    text,
    timestamp: msg.date * 1000,
    direct,
    addressed,
  };
  return { message, files };
}

const entityText = (text: string, entity: MessageEntity): string => text.slice(entity.offset, entity.offset + entity.length);
const same = (a: string, b: string): boolean => a.toLowerCase() === b.toLowerCase();

function isAddressed(msg: Message, text: string, entities: readonly MessageEntity[], bot: BotIdentity, assistantName: string): boolean {
  for (const entity of entities) {
    if (entity.type === 'mention' && same(entityText(text, entity), `@${bot.username}`)) return true;
    if (entity.type === 'text_mention' && entity.user.id === bot.id) return true;
    if (entity.type === 'bot_command' && same(entityText(text, entity).split('@')[1] ?? '', bot.username)) return true;
  }
  // In a forum topic every message "replies" to the topic's creation message: that is not a reply to the bot.
  const reply = msg.reply_to_message;
  if (reply && reply.from?.id === bot.id && !reply.forum_topic_created) return true;
  return [bot.firstName, assistantName].some((name) => name.trim() !== '' && startsWithName(text, name.trim()));
}

/** "Testbot, what's up?" / "testbot: hi" / "Testbot" — but not "Testbots are…". */
function startsWithName(text: string, name: string): boolean {
  const head = text.trimStart();
  if (!same(head.slice(0, name.length), name)) return false;
  const next = head.charAt(name.length);
  return next === '' || /[\s,.:;!?]/.test(next);
}

/** Drops a leading @mention of the bot and turns `/cmd@bot` into `/cmd`. */
function cleanText(text: string, entities: readonly MessageEntity[], bot: BotIdentity): string {
  let result = text;
  // right to left, so earlier offsets stay valid
  for (const entity of [...entities].sort((a, b) => b.offset - a.offset)) {
    const part = entityText(result, entity);
    if (entity.type === 'bot_command' && part.includes('@') && same(part.split('@')[1]!, bot.username)) {
      result = result.slice(0, entity.offset) + part.split('@')[0] + result.slice(entity.offset + entity.length);
    }
  }
  const mention = entities.find((e) => e.type === 'mention' && same(entityText(text, e), `@${bot.username}`));
  if (mention && text.slice(0, mention.offset).trim() === '') {
    result = result.slice(mention.offset + mention.length).replace(/^[\s,:;]+/, '');
  }
  return result.trim();
}

/**
 * The files a message carries. Of a photo, Telegram sends every size it made (PhotoSize[]:
 * thumbnails in boxes of 90 to 2560 px, https://core.telegram.org/api/files#image-thumbnail-types);
 * the largest whose file_size is within `maxBytes` is taken (a size that states none counts as
 * within), else the largest, which is then described as over the limit.
 */
export function filesOf(msg: Message, maxBytes = Number.POSITIVE_INFINITY): FileRef[] {
  const files: FileRef[] = [];
  const add = (kind: FileRef['kind'], file: { file_id: string; file_size?: number; file_name?: string; mime_type?: string } | undefined, mime?: string): void => {
    if (!file) return;
    files.push({
      kind,
      fileId: file.file_id,
      ...(file.file_name ? { name: file.file_name } : {}),
      ...(file.mime_type || mime ? { mime: file.mime_type ?? mime } : {}),
      ...(file.file_size === undefined ? {} : { size: file.file_size }),
    });
  };
  if (msg.photo && msg.photo.length > 0) {
    const larger = (a: PhotoSize, b: PhotoSize): PhotoSize => (b.width * b.height > a.width * a.height || (b.width * b.height === a.width * a.height && (b.file_size ?? 0) > (a.file_size ?? 0)) ? b : a);
    const fitting = msg.photo.filter((size) => (size.file_size ?? 0) <= maxBytes);
    add('photo', (fitting.length > 0 ? fitting : msg.photo).reduce(larger), 'image/jpeg');
  }
  add('file', msg.document); // animations come with a document too
  add('voice', msg.voice, 'audio/ogg');
  add('audio', msg.audio);
  add('video', msg.video);
  add('video', msg.video_note, 'video/mp4');
  if (msg.sticker && !msg.sticker.is_animated && !msg.sticker.is_video) add('sticker', msg.sticker, 'image/webp');
  return files;
}
