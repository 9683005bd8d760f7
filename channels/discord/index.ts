/**
 * The Discord channel: discord.js for the gateway (it identifies, heartbeats, resumes a
 * dropped session and replays what was missed), @discordjs/rest for everything sent.
 *
 * Messages are taken from the raw MESSAGE_CREATE dispatches (the same JSON REST returns,
 * independent of discord.js's caches) and handled one at a time by the {@link Intake}: a
 * channel's position only moves past a message once `push` resolved. When a session cannot
 * be resumed (and after a restart or a takeover: positions are saved in ctx.state), READY starts a new
 * one and every channel that had traffic is caught up over REST from its position. Ids are
 * Discord's message ids, so a message pushed twice is still one message to the inbox.
 *
 * Conversations: DMs are direct (chat = DM channel id); a guild text channel is its own chat;
 * a thread is chat = parent channel id, thread = thread id, and replies go into the thread.
 */
import { createHash } from 'node:crypto';
import { stat } from 'node:fs/promises';
import { Client, Events, GatewayCloseCodes, GatewayDispatchEvents, GatewayIntentBits, Partials, REST, Routes, type RawFile } from 'discord.js';
import {
  type Channel,
  type ChannelContext,
  type FileSender,
  type ListenLink,
  type LivenessWatched,
  type MessageEditor,
  type MessageLimit,
  type OutboundFile,
  type OutboundMessage,
  type Push,
  SendError,
  type StatusNotes,
  type TypingIndicator,
} from '../../src/channel.ts';
import type { DiscordConfig } from './config.ts';
import type { ConversationRef } from '../../src/conversation.ts';
import { cacheOptions, startDirectChannelSweeper } from './caches.ts';
import { toSendError } from './errors.ts';
import { makeDestroyFinal } from './gateway.ts';
import type { BotIdentity, ChannelInfo, RawMessage, RawUser } from './inbound.ts';
import { Intake } from './intake.ts';
import { chunkContent, DISCORD_LIMIT, measureDiscord, renderDiscord } from './render.ts';
import { nameForImage, readImageHeader } from '../../src/media/dimensions.ts';
import { readOutboundFile } from '../../src/outbound/file.ts';
import { BoundedMap, BoundedSet } from '../../src/bounded-map.ts';

export type DiscordChannel = Channel & MessageLimit & TypingIndicator & MessageEditor & FileSender & LivenessWatched & StatusNotes;

export interface DiscordChannelOptions {
  /** Rate-limit waits up to this long are waited out inside the REST client; longer ones reject (the outbox retries). @default 2000 */
  readonly rateLimitWaitMs?: number;
  /** No heartbeat ack or dispatch for this long: the supervisor restarts the listen. @default 150000 */
  readonly livenessTimeoutMs?: number;
  /** Largest file uploaded. @default 10 MiB */
  readonly maxFileBytes?: number;
}

/**
 * Discord's upload limit per file for a bot: "The default limit is 10 MiB for all users", raised
 * only by a server's boost tier (discord/discord-api-docs, developers/reference.mdx, "Uploading
 * Files"); a larger file is refused with 413 / 40005 "Request entity too large".
 */
export const DISCORD_MAX_FILE_BYTES = 10 * 1024 * 1024;

const DEFAULT_API = 'https://discord.com/api';
/** A reply never pings anyone (no @everyone, no role, not even the person answered). */
const NO_MENTIONS = { parse: [], replied_user: false } as const;
/** How long a stopping listen waits for discord.js to close the gateway connection. */
const DESTROY_WAIT_MS = 1500;

export function createDiscordChannel(config: DiscordConfig, ctx: ChannelContext, options: DiscordChannelOptions = {}): DiscordChannel {
  const api = (config.api_base ?? DEFAULT_API).replace(/\/+$/, '');
  const log = ctx.log;
  const rateLimitWaitMs = options.rateLimitWaitMs ?? 2000;
  const maxFileBytes = options.maxFileBytes ?? DISCORD_MAX_FILE_BYTES;
  const rest = new REST({ api, version: '10', rejectOnRateLimit: (limit) => Math.max(limit.timeToReset, limit.retryAfter) > rateLimitWaitMs });
  rest.setToken(config.token);
  rest.on('rateLimited', (limit) => log.debug({ route: limit.route, waitMs: limit.timeToReset, global: limit.global }, 'Discord rate limit'));

  /** Messages the bot sent (a reply to one addresses the bot). */
  const sent = new BoundedSet<string>(10_000);
  /** Parts sent so far per answered message: the first part references it; nonces tell parts apart. */
  const partsSent = new BoundedMap<string, number>(10_000);
  const channelInfos = new Map<string, ChannelInfo>();
  let client: Client | undefined;
  /** Set while Discord refuses the Message Content intent (close 4014); cleared by the next READY. */
  let intentRefused: string | undefined;

  async function channelInfo(id: string): Promise<ChannelInfo> {
    const known = channelInfos.get(id);
    if (known) return known;
    const cached = client?.channels.cache.get(id);
    let info: ChannelInfo;
    if (cached) {
      const parentId = 'parentId' in cached ? cached.parentId : null;
      info = parentId ? { type: cached.type, parentId } : { type: cached.type };
    } else {
      const raw = (await rest.get(Routes.channel(id))) as { type: number; parent_id?: string | null };
      info = raw.parent_id ? { type: raw.type, parentId: raw.parent_id } : { type: raw.type };
    }
    if (channelInfos.size > 5000) channelInfos.clear();
    channelInfos.set(id, info);
    return info;
  }

  const intake = new Intake({
    name: ctx.name,
    log,
    attachments: ctx.attachments,
    rest,
    state: ctx.state,
    stateDir: ctx.stateDir,
    ...(ctx.storage ? { storage: ctx.storage } : {}),
    channelInfo,
    sentByBot: (id) => sent.has(id),
  });

  async function post(target: string, body: Record<string, unknown>, files?: RawFile[]): Promise<string> {
    const created = (await rest.post(Routes.channelMessages(target), { body, ...(files ? { files } : {}) })) as { id: string };
    sent.add(created.id);
    return created.id;
  }

  /** Sends a reply part (cut further only if it is somehow still over the limit); returns the first message id. */
  async function deliver(message: OutboundMessage, what: string): Promise<string | undefined> {
    const target = message.thread ?? message.chat;
    const chunks = chunkContent(renderDiscord(message.text)).filter((chunk) => chunk.trim() !== '');
    let first: string | undefined;
    for (const content of chunks) {
      const replyTo = message.replyTo;
      const part = replyTo === undefined ? 0 : (partsSent.get(replyTo) ?? 0);
      const body = {
        content,
        allowed_mentions: NO_MENTIONS,
        ...(replyTo !== undefined && part === 0 ? { message_reference: { message_id: replyTo, fail_if_not_exists: false } } : {}),
        // a re-sent part (a retry after a lost response) is recognised by Discord instead of posted twice
        ...(replyTo === undefined ? {} : { nonce: nonceOf(target, replyTo, part, content), enforce_nonce: true }),
      };
      try {
        const id = await post(target, body);
        first ??= id;
      } catch (error) {
        throw toSendError(error, what);
      }
      if (replyTo !== undefined) {
        partsSent.setNewest(replyTo, part + 1); // the map forgets the oldest replies first
      }
    }
    return first;
  }

  return {
    name: ctx.name,
    maxMessageLength: DISCORD_LIMIT,
    measure: measureDiscord,
    typingIntervalMs: 8000,
    editIntervalMs: 1200,
    livenessTimeoutMs: options.livenessTimeoutMs ?? 150_000,
    maxFileBytes,

    statusNotes: () => (intentRefused === undefined ? [] : [intentRefused]),

    async listen(push: Push, signal: AbortSignal, link: ListenLink): Promise<void> {
      if (signal.aborted) return;
      await intake.load(); // not at construction: the last owner may have moved them since
      if (signal.aborted) return;
      const discord = new Client({
        intents: [GatewayIntentBits.Guilds, GatewayIntentBits.GuildMessages, GatewayIntentBits.MessageContent, GatewayIntentBits.DirectMessages],
        partials: [Partials.Channel, Partials.Message],
        rest: { api },
        // users, members, messages and DM channels limited: see caches.ts
        ...cacheOptions(),
      });
      client = discord;
      const stopSweeping = startDirectChannelSweeper(discord);
      const run = intake.start(push, signal);
      let fatal!: (error: Error) => void;
      const failed = new Promise<never>((_, reject) => (fatal = reject));

      discord.on(Events.Debug, (message) => {
        if (message.includes('Heartbeat acknowledged')) link.alive();
        if (!message.startsWith('Provided token')) log.debug({ discord: message }, 'discord.js');
      });
      discord.on(Events.Warn, (message) => log.warn({ discord: message }, 'discord.js warning'));
      discord.on(Events.Error, (error) => log.warn({ err: error }, 'discord.js error'));
      // discord.js retries a lost gateway every ~0.5 s: warn once per outage, not on every try
      let failing = false;
      discord.on(Events.ShardError, (error) => {
        // a close that ends the session for good is reported once by ShardDisconnect below: nothing is retried here
        if (failing || FINAL_ERRORS.test(error.message)) log.debug({ err: error }, 'gateway connection error');
        else log.warn({ err: error.message }, 'gateway connection error; retrying');
        failing = true;
      });
      discord.on(Events.ShardReconnecting, () => {
        if (!signal.aborted) log.info('gateway connection lost; reconnecting');
      });
      discord.on(Events.ShardResume, (_, replayed) => {
        failing = false;
        log.info({ replayed }, 'gateway session resumed');
      });
      discord.on(Events.ShardDisconnect, (event) => {
        if (event.code === GatewayCloseCodes.DisallowedIntents) {
          // once per outage, not at every restart of the supervisor's backoff
          if (intentRefused === undefined) log.error(INTENT_FIX);
          intentRefused = INTENT_FIX;
        }
        fatal(new Error(closeReason(event.code)));
      });
      discord.once(Events.ClientReady, (ready) => {
        log.info({ bot: ready.user.id, name: ready.user.username }, 'connected to Discord');
        link.ready();
      });
      discord.ws.on(GatewayDispatchEvents.Ready, (data: { user: RawUser }) => {
        failing = false;
        if (intentRefused !== undefined) log.info('Discord accepted the Message Content intent');
        intentRefused = undefined;
        link.alive();
        run.identify(identity(data.user, ctx.assistantName));
        run.catchUp(log); // a new session: whatever was sent since the last one is not replayed
      });
      discord.ws.on(GatewayDispatchEvents.MessageCreate, (data: RawMessage) => {
        link.alive();
        run.received(data);
      });

      const aborted = new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
      try {
        const login = discord.login(config.token);
        makeDestroyFinal(discord);
        await Promise.race([login.then(() => aborted), aborted, failed, run.failed]);
      } finally {
        stopSweeping();
        const saved = run.stop();
        if (client === discord) client = undefined;
        const destroyed = discord.destroy().catch((error: unknown) => log.debug({ err: error }, 'discord.js destroy failed'));
        await Promise.race([destroyed, new Promise((resolve) => setTimeout(resolve, DESTROY_WAIT_MS).unref())]);
        discord.removeAllListeners();
        discord.ws.removeAllListeners();
        await saved; // the next owner starts from them
      }
    },

    async send(message: OutboundMessage): Promise<void> {
      await deliver(message, 'send');
    },

    async sendDraft(message: OutboundMessage): Promise<string> {
      const id = await deliver(message.text.trim() === '' ? { ...message, text: '…' } : message, 'send draft');
      return id!;
    },

    async edit(ref: ConversationRef, messageId: string, text: string): Promise<void> {
      const content = chunkContent(renderDiscord(text))[0]!;
      try {
        await rest.patch(Routes.channelMessage(ref.thread ?? ref.chat, messageId), {
          body: { content: content.trim() === '' ? '…' : content, allowed_mentions: NO_MENTIONS },
        });
      } catch (error) {
        throw toSendError(error, 'edit');
      }
    },

    async typing(ref: ConversationRef): Promise<void> {
      try {
        await rest.post(Routes.channelTyping(ref.thread ?? ref.chat));
      } catch (error) {
        // a rate limit on typing is a wait for the whole chat, like one on a send (the runtime holds it)
        throw toSendError(error, 'typing');
      }
    },

    async sendFile(ref: ConversationRef, file: OutboundFile): Promise<void> {
      const size = await stat(file.path).then((info) => info.size, () => undefined);
      if (size !== undefined && size > maxFileBytes) {
        // Discord would refuse it (413 / 40005) after the whole upload: say so without sending it
        throw new SendError(`send file: ${file.name} is ${size} bytes; Discord accepts at most ${maxFileBytes} bytes per file`, { permanent: true });
      }
      const data = await readOutboundFile(file);
      // An image is previewed inline when its content_type is image/… and its name has the image's
      // extension: both are set from the bytes (the model may name a PNG "plot" or "plot.dat").
      const image = readImageHeader(data);
      const name = image ? nameForImage(file.name, image) : file.name;
      const upload = image ? { name, data, contentType: image.mime } : { name, data };
      try {
        await post(ref.thread ?? ref.chat, { allowed_mentions: NO_MENTIONS, attachments: [{ id: 0, filename: name }] }, [upload]);
      } catch (error) {
        throw toSendError(error, 'send file');
      }
    },
  };
}

function identity(user: RawUser, assistantName: string): BotIdentity {
  const names = [user.username, user.global_name, assistantName].filter((name): name is string => typeof name === 'string' && name.trim() !== '');
  return { id: user.id, names: [...new Set(names)] };
}

/** Discord's nonce (≤ 25 characters), the same for the same part of the same reply. */
function nonceOf(target: string, replyTo: string, part: number, content: string): string {
  return createHash('sha256').update(`${target}\n${replyTo}\n${part}\n${content}`).digest('base64url').slice(0, 25);
}

/**
 * discord.js's errors for the gateway closes it does not reconnect after (@discordjs/ws
 * WebSocketShard: 4004, 4010–4014); discord/discord-api-docs, developers/topics/
 * opcodes-and-status-codes.mdx, "Gateway Close Event Codes": reconnect false.
 */
const FINAL_ERRORS = /Authentication failed|Invalid shard|Sharding is required|invalid API version|invalid intents|disallowed intents/i;

/**
 * The one line an operator needs when the Message Content intent is off: Discord closes the
 * gateway with 4014 (a privileged intent the application does not have) and the bot would
 * otherwise read no messages at all.
 */
const INTENT_FIX =
  'Discord refused the Message Content intent (gateway close 4014, disallowed intents): the bot cannot read messages. ' +
  'Turn it on in the Discord developer portal → your application → Bot → Privileged Gateway Intents → MESSAGE CONTENT INTENT; ' +
  'the channel retries with backoff and connects once it is on';

/** Why Discord ended the gateway connection for good, in words an operator can act on. */
function closeReason(code: number): string {
  const reasons: Record<number, string> = {
    4004: 'the bot token is invalid',
    4010: 'invalid shard',
    4011: 'sharding is required',
    4012: 'invalid API version',
    4013: 'invalid intents',
    4014: 'disallowed intents: the Message Content intent is off for this application in the Discord developer portal',
  };
  return `Discord closed the gateway connection for good (code ${code}${reasons[code] ? `: ${reasons[code]}` : ''})`;
}
