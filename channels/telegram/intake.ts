/**
 * A Telegram update → a pushed message: normalised (inbound.ts), a group's upgrade to a
 * supergroup recorded before the update is confirmed, files downloaded into the attachment
 * store, then `push`. Long polling and the webhook (poll.ts, webhook.ts) both hand updates here.
 */
import type { Api } from 'grammy';
import type { Update } from 'grammy/types';
import type { Logger } from 'pino';
import type { ChannelContext, Push } from '../../src/channel.ts';
import { describeError, grammySignal } from './errors.ts';
import { messageOf, normalise, type BotIdentity } from './inbound.ts';
import type { MigrationStore } from './migrations.ts';
import { withAttachments } from '../../src/inbound/with-attachments.ts';

/**
 * Telegram's Bot API serves bots files up to 20 MB (getFile; tdlib/telegram-bot-api Client.h
 * MAX_DOWNLOAD_FILE_SIZE = 20 << 20, "Bad Request: file is too big"). A server run with --local
 * lifts it but hands out paths on its own disk instead of downloads, which this channel does not read.
 */
export const MAX_DOWNLOAD = 20 * 1024 * 1024;

export interface IntakeDeps {
  readonly ctx: ChannelContext;
  readonly api: Api;
  readonly apiRoot: string;
  readonly token: string;
  readonly migrations: MigrationStore;
  readonly log: Logger;
  /** Records that group `from` became supergroup `to` (index.ts: a send learns it too). */
  moved(from: string, to: string): Promise<void>;
  /** Who the bot is (undefined until getMe answered: updates are then skipped) and its account id. */
  identity(): { readonly me: BotIdentity | undefined; readonly account: string };
}

/** The update handler of one channel instance. */
export function createIntake(deps: IntakeDeps): (update: Update, push: Push, listening: AbortSignal) => Promise<void> {
  const { ctx, api, apiRoot, token, migrations, log, moved } = deps;

  /** Normalises, downloads files, pushes. Rejects only when `push` does, or a group's move cannot be stored (the update is then not confirmed). */
  async function handle(update: Update, push: Push, listening: AbortSignal): Promise<void> {
    const { me, account } = deps.identity();
    if (!me) return;
    let normalised;
    try {
      const message = messageOf(update);
      if (!message) return;
      normalised = normalise(message, me, { channel: ctx.name, account, assistantName: ctx.assistantName, maxFileBytes: Math.min(ctx.attachments.maxBytes, MAX_DOWNLOAD) });
    } catch (error) {
      log.error({ reason: describeError(error, token), update: update.update_id }, 'could not read an update; skipped');
      return;
    }
    // The service messages of a group's upgrade (checked by normalise, which skips them): the move is recorded before it is confirmed.
    const service = messageOf(update);
    if (service && typeof service.migrate_to_chat_id === 'number') await moved(String(service.chat.id), String(service.migrate_to_chat_id));
    if (service && typeof service.migrate_from_chat_id === 'number') await moved(String(service.migrate_from_chat_id), String(service.chat.id));
    if (!normalised) return;
    const { message: normal, files } = normalised;
    // A supergroup a group became continues the group's conversation.
    const chat = await migrations.conversationChat(normal.chat);
    const inbound = chat === normal.chat ? normal : { ...normal, chat };
    const withFiles = await withAttachments(ctx.attachments, inbound, files, (file) => ({
      kind: file.kind,
      ...(file.name === undefined ? {} : { name: file.name }),
      ...(file.mime === undefined ? {} : { mime: file.mime }),
      ...(file.size === undefined ? {} : { size: file.size }),
      // a shutdown cuts a download short (the file is noted as not saved; the push is refused anyway)
      download: (signal) => download(file.fileId, file.size, AbortSignal.any([signal, listening])),
    }));
    await push(withFiles);
  }

  async function download(fileId: string, size: number | undefined, signal: AbortSignal): Promise<Uint8Array> {
    const tooBig = (bytes: number | undefined): Error =>
      new Error(`${bytes === undefined ? 'it is' : `${(bytes / 1024 / 1024).toFixed(1)} MB is`} over the 20 MB Telegram lets bots download (getFile); ask for a smaller file or a link`);
    // Not even asked for: Telegram would refuse it, whatever max_attachment_mb allows.
    if (size !== undefined && size > MAX_DOWNLOAD) throw tooBig(size);
    try {
      const file = await api.getFile(fileId, grammySignal(signal));
      if (!file.file_path) throw new Error('Telegram gave no file path');
      const response = await fetch(`${apiRoot}/file/bot${token}/${file.file_path}`, { signal });
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      return new Uint8Array(await response.arrayBuffer());
    } catch (error) {
      if (/file is too big/i.test(describeError(error, token))) throw tooBig(size);
      // eslint-disable-next-line preserve-caught-error -- grammY's error would carry the token (see describeError)
      throw new Error(`download failed: ${describeError(error, token)}`);
    }
  }


  return handle;
}
