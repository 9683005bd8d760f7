/**
 * The Matrix channel (client-server API through matrix-js-sdk's MatrixClient, our own /sync
 * loop — see sync.ts for why): DMs and rooms, threads, invites from allowed senders, markdown
 * rendered as Matrix HTML, typing, streaming by edits (m.replace) and files both ways.
 * Encrypted rooms are read and answered, encrypted, with `encryption` on (the default; e2ee.ts);
 * with it off, never silent — the people in one are told once with a plain notice, and the log
 * and status show it (intake.ts).
 *
 * Ids: a message is its event id (globally unique, stable across redeliveries), the account is
 * the bot's user id, the chat is the room id, a thread is its root event id.
 */
import { createHash } from 'node:crypto';
import { readFile, stat } from 'node:fs/promises';
import { extname } from 'node:path';
import {
  SendError,
  type Channel,
  type ChannelContext,
  type FileSender,
  type ListenLink,
  type LivenessWatched,
  type StatusNotes,
  type MessageEditor,
  type MessageLimit,
  type OutboundFile,
  type OutboundMessage,
  type Push,
  type TypingIndicator,
} from '../../src/channel.ts';
import type { MatrixConfig } from './config.ts';
import type { ConversationRef } from '../../src/conversation.ts';
import { readImageHeaderOfFile } from '../../src/media/dimensions.ts';
import { MatrixApi } from './client.ts';
import { encryptAttachment, type EncryptedFile } from './attachment-crypto.ts';
import type { SyncKeys } from './crypto.ts';
import { ChannelE2ee } from './e2ee.ts';
import { describeError, matrixFailure, toSendError } from './errors.ts';
import { Intake, type MatrixStats } from './intake.ts';
import { BoundedMap } from '../../src/bounded-map.ts';
import { editContent, fileContent, imageContent, MATRIX_LIMIT, measure, relation, textContent, type Content } from './render.ts';
import { Rooms } from './rooms.ts';
import { SessionStore, SyncTokenStore } from './state.ts';
import { FIRST_SYNC_TIMEOUT_MS, localSlack, runSync, type SyncResponse } from './sync.ts';

export interface MatrixChannelOptions {
  /** How long the homeserver may hold a /sync open. @default 30000 */
  readonly syncTimeoutMs?: number;
  /** How long an undecryptable message waits for its key before the person is told (encryption on). @default 15000 */
  readonly undecryptableWaitMs?: number;
}

export type MatrixChannel = Channel & MessageLimit & TypingIndicator & MessageEditor & FileSender & LivenessWatched & StatusNotes & { readonly stats: MatrixStats; readonly maxFileBytes: number };

/** Files the bot uploads are read into memory: keep them reasonable. */
const MAX_UPLOAD = 100 * 1024 * 1024;
/** How long the homeserver's media config (its upload limit) is trusted before it is asked again. */
const UPLOAD_LIMIT_TTL_MS = 60 * 60_000;

const megabytes = (bytes: number): string => `${(bytes / 1024 / 1024).toFixed(bytes < 10 * 1024 * 1024 ? 1 : 0)} MB`;
const MIME: Record<string, string> = {
  '.txt': 'text/plain',
  '.md': 'text/markdown',
  '.csv': 'text/csv',
  '.json': 'application/json',
  '.pdf': 'application/pdf',
  '.png': 'image/png',
  '.jpg': 'image/jpeg',
  '.jpeg': 'image/jpeg',
  '.gif': 'image/gif',
  '.webp': 'image/webp',
  '.svg': 'image/svg+xml',
  '.mp3': 'audio/mpeg',
  '.ogg': 'audio/ogg',
  '.mp4': 'video/mp4',
  '.zip': 'application/zip',
  '.html': 'text/html',
};

/**
 * A transaction id for a message: the same reply part again (the outbox retrying after a
 * response was lost) is the same transaction, which the homeserver answers with the event it
 * already made instead of posting twice. Without the inbound id it answers, a random one.
 */
export function transactionId(kind: string, message: OutboundMessage): string | undefined {
  if (message.replyTo === undefined) return undefined;
  const digest = createHash('sha256').update(JSON.stringify([kind, message.chat, message.thread ?? '', message.replyTo, message.text])).digest('base64url');
  return `sb-${digest.slice(0, 32)}`;
}

/** A file event's content with its encrypted file in `file` instead of `url` (spec: encrypted attachments). */
function withEncryptedFile(content: Content, file: EncryptedFile): Content {
  const { url: _url, ...rest } = content;
  return { ...rest, file };
}

export function createMatrixChannel(config: MatrixConfig, ctx: ChannelContext, options: MatrixChannelOptions = {}): MatrixChannel {
  const log = ctx.log;
  const account = { homeserver: config.homeserver.replace(/\/+$/, ''), userId: config.user_id };
  const legacy = { dir: ctx.stateDir, log };
  const api = new MatrixApi(config, log, new SessionStore(ctx.state, account, legacy));
  const rooms = new Rooms();
  const tokens = new SyncTokenStore(ctx.state, account, legacy);
  const senders = new BoundedMap<string, boolean>(5000);
  const threadLatest = new BoundedMap<string, string>(1000);
  const stats: MatrixStats = { encryptedEvents: 0, invitesAccepted: 0, invitesIgnored: 0 };
  const syncTimeoutMs = options.syncTimeoutMs ?? 30_000;
  // A sync returns at least every syncTimeoutMs and is cut off locally a little after that; the
  // first one of a listen may take up to FIRST_SYNC_TIMEOUT_MS.
  const livenessMs = Math.max(2 * (syncTimeoutMs + localSlack(syncTimeoutMs)), FIRST_SYNC_TIMEOUT_MS) + 30_000;
  let displayName: string | undefined;
  /** The homeserver's `m.upload.size` (undefined: it does not say), and when it was read (performance.now()). */
  let uploadLimit: { readonly bytes: number | undefined; readonly at: number } | undefined;
  const e2ee = config.encryption
    ? new ChannelE2ee({
        api,
        state: ctx.state,
        rooms,
        log,
        passwordLogin: config.access_token === undefined,
        ...(options.undecryptableWaitMs === undefined ? {} : { waitMs: options.undecryptableWaitMs }),
        tell: async (roomId, text, txnId) => {
          await post(roomId, (html) => ({ ...textContent(text, { html }), msgtype: 'm.notice' }), txnId, 'send');
        },
      })
    : undefined;
  const intake = new Intake({ api, ctx, config, rooms, log, stats, senders, threadLatest, displayName: () => displayName, ...(e2ee ? { e2ee } : {}) });

  /** Signs in when the outbox sends before listen did (pending replies after a restart). */
  const ready = (): Promise<void> => api.connect(AbortSignal.timeout(30_000)).catch((error: unknown) => {
    throw toSendError(error, 'sign-in', api.token);
  });

  /** Sends one event; when the server finds it too large, the same text without its HTML. */
  async function post(roomId: string, build: (html: boolean) => Content, txnId: string | undefined, what: string): Promise<string> {
    await ready();
    // In an encrypted room (encryption on) the event goes out encrypted, as m.room.encrypted.
    const seal = async (content: Content): Promise<{ readonly type: string; readonly content: Content }> => (e2ee ? e2ee.seal(roomId, 'm.room.message', content) : { type: 'm.room.message', content });
    let eventId: string;
    try {
      const sealed = await seal(build(true));
      eventId = await api.send(roomId, sealed.content, txnId, sealed.type);
    } catch (error) {
      if (matrixFailure(error)?.errcode !== 'M_TOO_LARGE') throw toSendError(error, what, api.token);
      log.warn({ room: roomId }, `${what}: the homeserver found the message too large; sending it without HTML`);
      try {
        const sealed = await seal(build(false));
        eventId = await api.send(roomId, sealed.content, txnId === undefined ? undefined : `${txnId}-plain`, sealed.type);
      } catch (retryError) {
        throw toSendError(retryError, what, api.token);
      }
    }
    senders.setNewest(eventId, true);
    return eventId;
  }

  function relationFor(message: ConversationRef & { replyTo?: string }): Content | undefined {
    return relation({
      thread: message.thread,
      replyTo: message.replyTo,
      latest: message.thread === undefined ? undefined : (message.replyTo ?? threadLatest.get(message.thread)),
      direct: rooms.isDirect(message.chat),
    });
  }

  async function sendText(message: OutboundMessage, kind: 'send' | 'draft'): Promise<string> {
    const relates = relationFor(message);
    const eventId = await post(message.chat, (html) => ({ ...textContent(message.text, { html }), ...(relates ? { 'm.relates_to': relates } : {}) }), transactionId(kind, message), kind === 'send' ? 'send' : 'sendDraft');
    if (message.thread !== undefined) threadLatest.setNewest(message.thread, eventId);
    void api.typing(message.chat, false).catch(() => undefined); // the reply is here: stop "typing…"
    return eventId;
  }

  /** The homeserver's upload limit, read from its media config before uploading (again after an hour). */
  async function homeserverUploadLimit(): Promise<number | undefined> {
    if (uploadLimit && performance.now() - uploadLimit.at < UPLOAD_LIMIT_TTL_MS) return uploadLimit.bytes;
    try {
      uploadLimit = { bytes: await api.uploadLimit(), at: performance.now() };
    } catch (error) {
      log.debug({ reason: describeError(error, api.token) }, 'could not read the media config; uploading without knowing the limit');
    }
    return uploadLimit?.bytes;
  }

  /** Tells the person a file was too large to send (instead of failing the reply: they would never know). */
  async function describeTooLarge(ref: ConversationRef, file: OutboundFile, size: number, limit: number | undefined, by: string): Promise<void> {
    log.warn({ room: ref.chat, file: file.name, size, limit }, `sendFile: ${file.name} is too large for ${by}; described to the person instead`);
    const text = `(I meant to send you ${file.name} (${megabytes(size)}), but it is too large for ${by}${limit === undefined ? '' : `, which takes files up to ${megabytes(limit)}`}, so it was not sent.)`;
    const relates = relationFor(ref);
    await post(ref.chat, (html) => ({ ...textContent(text, { html }), ...(relates ? { 'm.relates_to': relates } : {}) }), undefined, 'sendFile');
  }

  const channel: MatrixChannel = {
    name: ctx.name,
    maxMessageLength: MATRIX_LIMIT,
    measure,
    typingIntervalMs: 20_000, // typing is announced for 30 s each time
    editIntervalMs: 1000,
    livenessTimeoutMs: livenessMs,
    stats,

    get maxFileBytes(): number {
      return Math.min(MAX_UPLOAD, uploadLimit?.bytes ?? MAX_UPLOAD);
    },

    statusNotes(): string[] {
      const encrypted = rooms.encrypted();
      if (e2ee) return encrypted.length === 0 ? [] : [`end-to-end encryption on: ${encrypted.length} encrypted room${encrypted.length === 1 ? '' : 's'}`];
      if (encrypted.length === 0) return [];
      const told = encrypted.filter((id) => intake.told(id)).length;
      return [
        `${encrypted.length} encrypted room${encrypted.length === 1 ? '' : 's'} not supported (${encrypted.slice(0, 3).join(', ')}${encrypted.length > 3 ? ', …' : ''}); ${stats.encryptedEvents} encrypted message${stats.encryptedEvents === 1 ? '' : 's'} unread; ` +
          (told === 0 ? 'nobody there told yet' : `the people ${told === encrypted.length ? 'there' : `in ${told} of them`} were told once (a plain notice)`),
      ];
    },

    async listen(push: Push, signal: AbortSignal, link: ListenLink): Promise<void> {
      await api.connect(signal);
      // The crypto state is read afresh at each listen: another node may have used it meanwhile.
      if (e2ee) await e2ee.start((roomId, event) => intake.late(roomId, event, push));
      displayName = (await api.displayName()) ?? displayName;
      for (const room of config.rooms) {
        if (signal.aborted) return;
        try {
          const id = await api.join(room, signal);
          log.info({ room, id }, 'joined a configured room');
        } catch (error) {
          if (signal.aborted) return;
          log.warn({ room, reason: describeError(error, api.token) }, 'could not join a configured room');
        }
      }
      if (signal.aborted) return;
      const handle = async (response: SyncResponse, context: { readonly initial: boolean; readonly since: string | undefined }): Promise<void> => {
        if (e2ee) await e2ee.receive(response as SyncResponse & SyncKeys); // room keys first: then the events can be read
        await intake.handle(response, context, push);
        if (e2ee) await e2ee.afterSync(); // stored before the sync token is
      };
      await runSync({ api, log, tokens, timeoutMs: syncTimeoutMs, livenessMs, handle }, signal, link);
    },

    async send(message: OutboundMessage): Promise<void> {
      await sendText(message, 'send');
    },

    async sendDraft(message: OutboundMessage): Promise<string> {
      return sendText(message, 'draft');
    },

    async edit(ref: ConversationRef, messageId: string, text: string): Promise<void> {
      if (!messageId.startsWith('$')) throw new SendError(`edit: ${messageId} is not a Matrix event id`, { permanent: true });
      // A 429 (Synapse: 0.2/s per user, bursts of 10) is a SendError scoped to the whole channel: the
      // runtime's flood gate (src/runtime/flood.ts) then holds every call until the wait has passed.
      await post(ref.chat, (html) => editContent(messageId, text, { html }), undefined, 'edit');
    },

    async typing(ref: ConversationRef): Promise<void> {
      try {
        await ready();
        await api.typing(ref.chat, true);
      } catch (error) {
        log.debug({ reason: describeError(error, api.token) }, 'typing indicator not shown'); // best effort
      }
    },

    async sendFile(ref: ConversationRef, file: OutboundFile): Promise<void> {
      const size = await stat(file.path).then(
        (s) => s.size,
        () => undefined,
      );
      if (size === undefined) throw new SendError(`sendFile: ${file.name} does not exist`, { permanent: true });
      if (size > MAX_UPLOAD) return describeTooLarge(ref, file, size, MAX_UPLOAD, 'this channel');
      await ready();
      const limit = await homeserverUploadLimit();
      if (limit !== undefined && size > limit) return describeTooLarge(ref, file, size, limit, 'this homeserver');
      // The bytes say whether it is an image (src/media/dimensions.ts reads the header, no decoding), not the name.
      const image = await readImageHeaderOfFile(file.path);
      const mime = image?.mime ?? MIME[extname(file.name).toLowerCase()] ?? 'application/octet-stream';
      // In an encrypted room (encryption on) the bytes are encrypted before they leave (attachment-crypto.ts).
      const sealed = e2ee && rooms.isEncrypted(ref.chat) ? encryptAttachment(await readFile(file.path)) : undefined;
      let url: string;
      try {
        url = await api.upload(sealed ? new Uint8Array(sealed.data) : new Uint8Array(await readFile(file.path)), file.name, sealed ? 'application/octet-stream' : mime);
      } catch (error) {
        if (matrixFailure(error)?.errcode !== 'M_TOO_LARGE') throw toSendError(error, 'upload', api.token);
        uploadLimit = undefined; // the config was stale (or a proxy in front has a lower limit): ask again next time
        return describeTooLarge(ref, file, size, undefined, 'this homeserver');
      }
      const relates = relationFor(ref);
      const plain = image ? imageContent({ name: file.name, url, mime, size, width: image.width, height: image.height }) : fileContent({ name: file.name, url, mime, size });
      const content = sealed ? withEncryptedFile(plain, { ...sealed.keys, url }) : plain;
      await post(ref.chat, () => ({ ...content, ...(relates ? { 'm.relates_to': relates } : {}) }), undefined, 'sendFile');
    },
  };
  return channel;
}
