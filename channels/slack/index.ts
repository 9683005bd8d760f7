/**
 * The Slack channel, on Bolt: Socket Mode (app_token) or the HTTP Events API (signing_secret;
 * when both are configured, Socket Mode), replies with chat.postMessage in mrkdwn. One Bolt App
 * per channel (app.ts) with its receiver — socket.ts, or Bolt's HTTPReceiver (http.ts) — and
 * `app.client` for every Web API call.
 *
 * - account = the bot's user id (U…) from auth.test: unique per app and workspace, and what
 *   <@…> mentions of the bot carry. (The team id would make two bots in one workspace share
 *   conversation keys.)
 * - chat = the channel id (C…, G…, D…); thread = thread_ts, see inbound.ts for which
 *   messages get one. Replies go to `thread_ts = message.thread`.
 * - id = `<channel>:<ts>`, stable across redeliveries and across the message / app_mention
 *   pair of one mention.
 * - Ack within Slack's 3 seconds: the intake journals the raw event (the channel's state, in
 *   the database beside the inbox) and the receivers answer Slack once that is committed
 *   (socket.ts: envelope ack; http.ts: HTTP 200), see app.ts; names, thread lookups and file
 *   downloads run after, then the push (intake.ts). What is journaled but not pushed when a
 *   listen ends is pushed by the next one.
 * - auth.test once per process, by the first listen; a failure rejects that listen (the
 *   supervisor retries it). Bolt never calls auth.test itself (app.ts).
 * - No typing indicator: Slack has none for bots using the Events API.
 * - Streaming: chat.postMessage, then chat.update at most every 1.2 s (Slack's
 *   chat.update is a tier-3 method: ~50 calls a minute).
 * - Rate limits (https://api.slack.com/docs/rate-limits): a 429 of any call becomes a
 *   SendError with Retry-After (errors.ts); chat.postMessage's limit is per channel (scope
 *   'chat'), every other method's tier limit covers the workspace (scope 'channel').
 * - Files out: files.getUploadURLExternal → POST the bytes → files.completeUploadExternal.
 */
import type { Channel, ChannelContext, FileSender, ListenLink, LivenessWatched, MessageEditor, MessageLimit, OutboundFile, OutboundMessage, Push } from '../../src/channel.ts';
import { SendError } from '../../src/channel.ts';
import type { ConversationRef } from '../../src/conversation.ts';
import type { SlackConfig } from './config.ts';
import { nameForImage, readImageHeader } from '../../src/media/dimensions.ts';
import { readOutboundFile } from '../../src/outbound/file.ts';
import { createBoltApp } from './app.ts';
import { toSendError } from './errors.ts';
import { eventsReceiver, serveEvents } from './http.ts';
import type { SlackIdentity } from './inbound.ts';
import { BotThreads, Intake } from './intake.ts';
import { measureMrkdwn, renderMrkdwn } from './render.ts';
import { SocketReceiver } from './socket.ts';

export type SlackChannel = Channel & MessageLimit & MessageEditor & FileSender & Partial<LivenessWatched>;

/** Tuning for tests; the daemon uses the defaults. */
export interface SlackChannelOptions {
  /** How long Socket Mode waits for a pong to its pings before reconnecting. @default 5000 */
  readonly clientPingTimeoutMs?: number;
  /** Socket Mode: no frame, ping or pong for this long → the connection is abandoned. @default 12000 */
  readonly silenceMs?: number;
  /** Waits between tries of a refused push or a failed thread lookup. @default intake.ts RETRY_MS */
  readonly retryMs?: readonly number[];
}

/** Slack's guidance: keep a message's text within 4,000 characters (longer ones get truncated). */
export const slackMessageLimit = 4000;

export function createSlackChannel(config: SlackConfig, ctx: ChannelContext, options: SlackChannelOptions = {}): SlackChannel {
  const token = config.bot_token;
  const threads = new BotThreads();
  let identity: SlackIdentity | undefined;
  /** The listen running now: where the App's listener pushes to. */
  let current: { readonly intake: Intake; readonly push: Push } | undefined;
  const apiOrigin = config.api_url === undefined ? undefined : new URL(config.api_url).origin;
  const socketMode = config.app_token !== undefined;

  const receiver = socketMode
    ? new SocketReceiver({
        appToken: config.app_token!,
        apiUrl: config.api_url,
        log: ctx.log,
        ...(options.clientPingTimeoutMs === undefined ? {} : { clientPingTimeoutMs: options.clientPingTimeoutMs }),
        ...(options.silenceMs === undefined ? {} : { silenceMs: options.silenceMs }),
      })
    : eventsReceiver(config.signing_secret!, ctx.log);
  const app = createBoltApp({
    botToken: token,
    apiUrl: config.api_url,
    receiver,
    log: ctx.log,
    identity: () => identity,
    async onMessage(event) {
      // Between listens nothing can be stored: unacknowledged, Slack delivers it again.
      if (!current) throw new Error('the Slack channel is not listening');
      await current.intake.handle(event, current.push);
    },
  });
  const web = app.client;

  /** auth.test, once per process (retried by the supervisor when it fails). */
  async function identify(signal: AbortSignal): Promise<SlackIdentity> {
    if (identity) return identity;
    const auth = await abortable(web.auth.test({ token }), signal);
    if (!auth.user_id || !auth.team_id) throw new Error('auth.test did not say who the bot is');
    identity = {
      userId: auth.user_id,
      teamId: auth.team_id,
      ...(auth.bot_id ? { botId: auth.bot_id } : {}),
      names: [...new Set([auth.user, ctx.assistantName].filter((name): name is string => typeof name === 'string' && name.trim() !== ''))],
    };
    ctx.log.info({ team: auth.team_id, bot: auth.user_id, mode: socketMode ? 'socket' : 'http' }, 'slack bot identified');
    return identity;
  }

  /** Posts rendered text; returns the message's ts. */
  async function post(ref: ConversationRef, markdown: string, what: string): Promise<string> {
    const text = renderMrkdwn(markdown);
    try {
      const result = await web.chat.postMessage({ token, channel: ref.chat, text: text.trim() === '' ? '…' : text, ...(ref.thread ? { thread_ts: ref.thread } : {}) });
      if (ref.thread) threads.mark(ref.chat, ref.thread);
      if (!result.ts) throw new SendError(`${what}: Slack did not return the message's ts`);
      return result.ts;
    } catch (error) {
      throw toSendError(error, what, 'chat');
    }
  }

  const channel: SlackChannel = {
    name: ctx.name,
    maxMessageLength: slackMessageLimit,
    measure: measureMrkdwn,
    editIntervalMs: 1200,
    ...(socketMode ? { livenessTimeoutMs: 60_000 } : {}),

    async listen(push: Push, signal: AbortSignal, link: ListenLink): Promise<void> {
      const me = await identify(signal);
      if (signal.aborted) return;
      const session = {
        push,
        intake: new Intake({
          channel: ctx.name,
          identity: me,
          web,
          botToken: token,
          fileOrigins: (url) => url.origin === apiOrigin || (url.protocol === 'https:' && (url.hostname === 'slack.com' || url.hostname.endsWith('.slack.com'))),
          attachments: ctx.attachments,
          threads,
          log: ctx.log,
          journal: ctx.state,
          signal,
          ...(options.retryMs === undefined ? {} : { retryMs: options.retryMs }),
        }),
      };
      current = session;
      try {
        // Events journaled (acknowledged) by an earlier listen and not pushed yet — queued before
        // the receiver takes a new event, so a chat's messages reach the inbox in the order said.
        // A journal that cannot be read fails this listen (the supervisor tries again).
        await session.intake.replay(push);
        if (receiver instanceof SocketReceiver) await receiver.start(signal, link);
        else await serveEvents(receiver, { listen: config.listen, log: ctx.log }, signal, link);
      } finally {
        if (current === session) current = undefined;
      }
    },

    async send(message: OutboundMessage): Promise<void> {
      if (message.text.trim() === '') return;
      await post(message, message.text, 'chat.postMessage');
    },

    sendDraft(message: OutboundMessage): Promise<string> {
      return post(message, message.text, 'chat.postMessage (draft)');
    },

    async edit(ref: ConversationRef, messageId: string, text: string): Promise<void> {
      const rendered = renderMrkdwn(text);
      try {
        await web.chat.update({ token, channel: ref.chat, ts: messageId, text: rendered.trim() === '' ? '…' : rendered });
      } catch (error) {
        throw toSendError(error, 'chat.update', 'channel');
      }
    },

    async sendFile(ref: ConversationRef, file: OutboundFile): Promise<void> {
      const data = await readOutboundFile(file);
      // Slack types a file by its name's extension (https://api.slack.com/types/file, "File types"):
      // an image the model named "plot" or "plot.dat" gets its real extension, so it shows inline.
      const image = readImageHeader(data);
      const filename = image ? nameForImage(file.name, image) : file.name;
      try {
        const slot = await web.files.getUploadURLExternal({ token, filename, length: data.length });
        if (!slot.upload_url || !slot.file_id) throw new SendError('files.getUploadURLExternal gave no upload URL');
        // The upload URL is pre-signed: no token goes with the bytes.
        const uploaded = await fetch(slot.upload_url, { method: 'POST', body: data, headers: { 'content-type': image?.mime ?? 'application/octet-stream' }, signal: AbortSignal.timeout(120_000) });
        await uploaded.body?.cancel();
        if (uploaded.status === 429) {
          const seconds = Number.parseInt(uploaded.headers.get('retry-after') ?? '', 10);
          throw new SendError('file upload: rate limited by Slack', { retryAfterMs: (Number.isFinite(seconds) && seconds >= 0 ? seconds : 1) * 1000, scope: 'channel' });
        }
        if (!uploaded.ok) throw new SendError(`file upload: HTTP ${uploaded.status}`, { permanent: uploaded.status >= 400 && uploaded.status < 500 });
        await web.files.completeUploadExternal({
          token,
          files: [{ id: slot.file_id, title: filename }],
          channel_id: ref.chat,
          ...(ref.thread ? { thread_ts: ref.thread } : {}),
        });
        if (ref.thread) threads.mark(ref.chat, ref.thread);
      } catch (error) {
        throw toSendError(error, 'file upload', 'channel');
      }
    },
  };
  return channel;
}

function abortable<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise((resolve, reject) => {
    const onAbort = (): void => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error);
      },
    );
  });
}
