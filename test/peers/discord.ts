/**
 * A local Discord for discord.js: the REST API (the routes discord.js and the adapter call)
 * and a gateway WebSocket speaking the real protocol — HELLO, IDENTIFY → READY + GUILD_CREATE,
 * heartbeats (op 1 / op 11), MESSAGE_CREATE dispatches with increasing sequence numbers,
 * RESUME → replay of missed dispatches → RESUMED, INVALID_SESSION. One guild with a text
 * channel and a public thread in it; DMs with alice, bob and mallory. Every payload it sends
 * and every body it parses is typed with discord-api-types (v10), so tsc rejects a shape that
 * drifts from Discord's.
 *
 * As strict as Discord where the adapter meets a limit:
 * - privileged intents (discord/discord-api-docs, developers/topics/opcodes-and-status-codes.mdx,
 *   "Gateway Close Event Codes": 4014 Disallowed intent(s), not reconnectable): an IDENTIFY
 *   asking for the Message Content intent when the application has it off is closed with 4014;
 *   a session without that intent gets empty `content` / attachments except in DMs and messages
 *   mentioning the bot (developers/events/gateway.mdx, "Message Content Intent");
 * - uploads: at most 10 MiB per file (developers/reference.mdx, "Uploading Files"), a larger one
 *   is refused with 413 and JSON error 40005 "Request entity too large";
 * - rate limits per route and global (see discord-ratelimit.ts), with a counter of requests
 *   that arrived for a channel while a wait the peer announced with a 429 was running;
 * - forwarded messages (developers/resources/message.mdx, "Message Reference Types" FORWARD and
 *   "Message Snapshot Object"): empty `content`, the text in `message_snapshots[0].message`.
 *
 * Fault hooks: drop the socket (the client resumes), take the gateway down and bring it back
 * (optionally refusing the resume, so what was sent meanwhile is only reachable over REST),
 * stop acking heartbeats on the current connection (a zombie), and answer the next message
 * POST with a 429 carrying the headers @discordjs/rest reads.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import {
  ChannelType,
  GatewayCloseCodes,
  GatewayDispatchEvents,
  GatewayIntentBits,
  GatewayOpcodes,
  MessageFlags,
  MessageReferenceType,
  MessageType,
  RESTJSONErrorCodes,
  type APIAttachment,
  type APIDMChannel,
  type APIGuildMember,
  type APIMessage,
  type APIMessageReference,
  type APITextChannel,
  type APIThreadChannel,
  type APIUser,
  type GatewayDispatchPayload,
  type GatewayGuildCreateDispatchData,
  type GatewayHeartbeatAck,
  type GatewayHello,
  type GatewayInvalidSession,
  type GatewayMessageCreateDispatchData,
  type GatewayReadyDispatchData,
  type GatewaySendPayload,
  type RESTError,
  type RESTGetAPIGatewayBotResult,
  type RESTPatchAPIChannelMessageJSONBody,
  type RESTPostAPIChannelMessageJSONBody,
} from 'discord-api-types/v10';
import { WebSocketServer, type WebSocket } from 'ws';
import sharp from 'sharp';
import type { BotMessage, ChatPeer, PeerUser, Place } from '../contracts/chat-channel.ts';
import { imageDimensions } from '../support/photos.ts';
import { RateLimiter, type BucketRoute, type DiscordRateLimits } from './discord-ratelimit.ts';

export type { DiscordRateLimits } from './discord-ratelimit.ts';

/** What the bot posted, as recorded for assertions. */
export interface BotRecord {
  readonly id: string;
  readonly channelId: string;
  content: string;
  edits: number;
  readonly files: string[];
  /**
   * The attachments as Discord stored them (resources/message.mdx, "Attachment Object":
   * `content_type` the media type, `width` / `height` "if image or video"), and whether a
   * client shows each inline as an image: an image/* content_type and a file name with an
   * image extension (Discord clients pick the preview by the name's extension — observed client
   * behaviour; the API docs do not state it).
   */
  readonly attachments: ReadonlyArray<{ readonly filename: string; readonly contentType: string | undefined; readonly width?: number; readonly height?: number; readonly inline: boolean }>;
  /** The message it answers (message_reference), if any. */
  readonly reference?: string;
  readonly allowedMentions?: unknown;
}

interface Session {
  readonly id: string;
  seq: number;
  readonly events: GatewayDispatchPayload[];
  conn: Conn | undefined;
  resumable: boolean;
  /** The intents it identified with. */
  readonly intents: number;
}

interface Conn {
  readonly ws: WebSocket;
  session: Session | undefined;
  live: boolean;
  acking: boolean;
}

export interface DiscordPeerStats {
  /** Gateway connection attempts, refused ones included. */
  attempts: number;
  connections: number;
  identifies: number;
  resumes: number;
  invalidSessions: number;
  replayed: number;
  heartbeats: number;
  /** 429 answers (forced, route buckets and global). */
  rateLimited: number;
  nonceReuses: number;
  /** Gateway connections closed with 4014 (an intent the application does not have). */
  disallowedIntents: number;
  /** Requests refused with 413 / 40005 (a file over the upload limit). */
  tooLarge: number;
}

export interface DiscordPeerOptions {
  /** @default 1000 */
  readonly heartbeatIntervalMs?: number;
  /**
   * Whether the application has the privileged Message Content intent switched on in the
   * developer portal. Off: an IDENTIFY asking for it is closed with 4014. @default true
   */
  readonly messageContentIntent?: boolean;
  /** Largest file per upload (Discord: 10 MiB unless the guild's boost tier raises it). @default 10 MiB */
  readonly maxUploadBytes?: number;
  /** Rate limits (defaults: Discord's; see discord-ratelimit.ts). Tests compress the windows. */
  readonly rateLimits?: DiscordRateLimits;
}

export interface DiscordPeer extends ChatPeer {
  /** As ChatPeer's, and `replyTo` makes the post a reply to that message (message_reference + referenced_message). */
  post(user: PeerUser, place: Place, text: string, options?: { mention?: boolean; replyTo?: string }): Promise<void>;
  /**
   * A person forwards a message into `place`, as Discord sends it: empty `content`, flag
   * HAS_SNAPSHOT, message_reference of type FORWARD, the text (and files) in message_snapshots.
   */
  forward(user: PeerUser, place: Place, original: { text: string; file?: { name: string; mime: string; data: Uint8Array } }): Promise<void>;
  readonly apiBase: string;
  readonly token: string;
  readonly botId: string;
  readonly stats: DiscordPeerStats;
  /** `METHOD /path` of every REST call the peer does not know. */
  readonly unknownRoutes: string[];
  /** Channel id of a place (the DM channel, the group text channel, the thread). */
  channelId(place: Place): string;
  /** What the bot posted in a place, with the details the platform saw. */
  botRecords(place: Place): readonly BotRecord[];
  /** Whether a gateway session is connected and live. */
  connected(): boolean;
  /** Closes the gateway socket(s): 4000 (unknown error) or 1006 (abrupt); the client resumes. */
  dropConnection(code?: 4000 | 1006): void;
  /** Drops the sockets and refuses new gateway connections until {@link gatewayUp}. */
  gatewayDown(): void;
  /** Accepts connections again; with `refuseResume` the next RESUME gets INVALID_SESSION (d: false). */
  gatewayUp(options?: { refuseResume?: boolean }): void;
  /** The current connection stops acknowledging heartbeats (a zombie connection). */
  zombie(): void;
  /** The next `count` message POSTs find their channel's bucket empty for `retryAfterSeconds` (a 429). */
  rateLimitNext(retryAfterSeconds?: number, count?: number): void;
  /** Switches the application's Message Content intent in the "developer portal" (for the next IDENTIFY). */
  setMessageContentIntent(allowed: boolean): void;
  /**
   * REST requests for a channel (any route under /channels/{id}) that arrived while a wait the
   * peer had announced for that channel — a route 429 for it, or a global 429 — was still
   * running: what a client that honours rate limits never sends. Cumulative; reset() clears it.
   */
  callsInsideWait(place: Place | string): number;
}

const EPOCH = 1_420_070_400_000n;
const TOKEN = 'peer-bot-token.discord';
const GUILD = '200000000000000001';
const GROUP = '300000000000000001';
const THREAD = '300000000000000002';
const MIB = 1024 * 1024;
/** No flag set: 0 is a valid value of every flags enum, which TypeScript's numeric enums do not admit as a literal. */
const NO_FLAGS = 0 as never;
const user = (id: string, username: string, bot = false): APIUser => ({ id, username, global_name: bot ? null : username[0]!.toUpperCase() + username.slice(1), discriminator: '0', avatar: null, ...(bot ? { bot: true } : {}) });
const BOT = user('900000000000000001', 'testbot', true);
const USERS: Record<PeerUser, APIUser> = { alice: user('100000000000000001', 'alice'), bob: user('100000000000000002', 'bob'), mallory: user('100000000000000003', 'mallory') };
const DMS: Record<PeerUser, string> = { alice: '400000000000000001', bob: '400000000000000002', mallory: '400000000000000003' };

export async function startDiscordPeer(options: DiscordPeerOptions = {}): Promise<DiscordPeer> {
  const heartbeatInterval = options.heartbeatIntervalMs ?? 1000;
  const maxUploadBytes = options.maxUploadBytes ?? 10 * MIB;
  let messageContentIntent = options.messageContentIntent ?? true;
  const limiter = new RateLimiter(options.rateLimits);
  const now = (): string => new Date().toISOString();
  let last = 0n;
  const snowflake = (): string => {
    let id = (BigInt(Date.now()) - EPOCH) << 22n;
    if (id <= last) id = last + 1n;
    last = id;
    return id.toString();
  };

  const groupChannel: APITextChannel = {
    id: GROUP, type: ChannelType.GuildText, guild_id: GUILD, name: 'general', position: 0, permission_overwrites: [], parent_id: null, nsfw: false, topic: null, rate_limit_per_user: 0, last_message_id: null, flags: NO_FLAGS,
  };
  const threadChannel: APIThreadChannel = {
    id: THREAD, type: ChannelType.PublicThread, guild_id: GUILD, parent_id: GROUP, owner_id: USERS.alice.id, name: 'test-thread', last_message_id: null, message_count: 0, member_count: 2, rate_limit_per_user: 0, flags: NO_FLAGS, total_message_sent: 0,
    thread_metadata: { archived: false, auto_archive_duration: 1440, archive_timestamp: now(), locked: false },
  };
  type PeerChannel = APITextChannel | APIThreadChannel | APIDMChannel;
  const channels = new Map<string, PeerChannel>([
    [GROUP, groupChannel],
    [THREAD, threadChannel],
    ...(Object.keys(DMS) as PeerUser[]).map((name): [string, APIDMChannel] => [DMS[name], { id: DMS[name], type: ChannelType.DM, recipients: [USERS[name]], last_message_id: null, flags: NO_FLAGS, name: null }]),
  ]);
  const guildChannel = (id: string): boolean => id === GROUP || id === THREAD;

  const messages = new Map<string, APIMessage[]>();
  const records: BotRecord[] = [];
  const typingCounts = new Map<string, number>();
  const files = new Map<string, { data: Uint8Array; mime: string }>();
  const nonces = new Map<string, APIMessage>();
  const sessions = new Map<string, Session>();
  const conns = new Set<Conn>();
  const unknownRoutes: string[] = [];
  const stats: DiscordPeerStats = { attempts: 0, connections: 0, identifies: 0, resumes: 0, invalidSessions: 0, replayed: 0, heartbeats: 0, rateLimited: 0, nonceReuses: 0, disallowedIntents: 0, tooLarge: 0 };
  let current: Session | undefined;
  let down = false;
  let refuseResume = false;
  let forced: { seconds: number; count: number } | undefined;
  /** The chat contract's flood test: the next call of any route to this channel empties its bucket for that long. */
  const floodNext = new Map<string, number>();

  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      handle(req, res, Buffer.concat(chunks)).catch((error: unknown) => send(res, 500, { message: String(error), code: 0 }));
    });
  });
  const wss = new WebSocketServer({ noServer: true });
  server.on('upgrade', (req: IncomingMessage, socket: Socket, head: Buffer) => {
    stats.attempts++;
    // a client that gives up (a channel stopping) may reset the connection before this answer is out
    socket.on('error', () => undefined);
    if (down) {
      socket.end('HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => open(ws));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  const base = `http://127.0.0.1:${port}`;

  // ---- gateway ----
  function open(ws: WebSocket): void {
    const conn: Conn = { ws, session: undefined, live: false, acking: true };
    conns.add(conn);
    stats.connections++;
    frame(conn, { op: GatewayOpcodes.Hello, d: { heartbeat_interval: heartbeatInterval }, s: null, t: null } satisfies GatewayHello);
    ws.on('message', (data) => {
      let payload: GatewaySendPayload;
      try {
        payload = JSON.parse(String(data)) as GatewaySendPayload;
      } catch {
        return void ws.close(GatewayCloseCodes.DecodeError, 'Error while decoding payload.');
      }
      onFrame(conn, payload);
    });
    ws.on('close', (code) => {
      conns.delete(conn);
      const session = conn.session;
      if (session && session.conn === conn) {
        session.conn = undefined;
        if (code === 1000 || code === 1001) session.resumable = false; // a clean close ends the session
      }
    });
  }

  function frame(conn: Conn, payload: GatewayHello | GatewayHeartbeatAck | GatewayInvalidSession | GatewayDispatchPayload): void {
    if (conn.ws.readyState === conn.ws.OPEN) conn.ws.send(JSON.stringify(payload));
  }

  /** Privileged intents (developers/events/gateway.mdx, "Privileged Intents"); the peer's application has only Message Content, when switched on. */
  const PRIVILEGED = GatewayIntentBits.GuildMembers | GatewayIntentBits.GuildPresences | GatewayIntentBits.MessageContent;

  function onFrame(conn: Conn, payload: GatewaySendPayload): void {
    switch (payload.op) {
      case GatewayOpcodes.Heartbeat:
        stats.heartbeats++;
        if (conn.acking) frame(conn, { op: GatewayOpcodes.HeartbeatAck } as GatewayHeartbeatAck);
        return;
      case GatewayOpcodes.Identify: {
        const d = payload.d;
        if (d.token !== TOKEN) return void conn.ws.close(GatewayCloseCodes.AuthenticationFailed, 'Authentication failed.');
        const granted = messageContentIntent ? GatewayIntentBits.MessageContent : 0;
        if ((d.intents & PRIVILEGED & ~granted) !== 0) {
          // opcodes-and-status-codes.mdx: 4014 "Disallowed intent(s)", reconnect: false
          stats.disallowedIntents++;
          return void conn.ws.close(GatewayCloseCodes.DisallowedIntents, 'Disallowed intent(s).');
        }
        stats.identifies++;
        if (current) current.resumable = false;
        const session: Session = { id: `session-${stats.identifies}-${snowflake()}`, seq: 0, events: [], conn, resumable: true, intents: d.intents };
        sessions.set(session.id, session);
        current = session;
        conn.session = session;
        conn.live = true;
        frame(conn, { op: GatewayOpcodes.Dispatch, t: GatewayDispatchEvents.Ready, s: ++session.seq, d: ready(session) });
        frame(conn, { op: GatewayOpcodes.Dispatch, t: GatewayDispatchEvents.GuildCreate, s: ++session.seq, d: guild() });
        return;
      }
      case GatewayOpcodes.Resume: {
        const d = payload.d;
        const session = sessions.get(d.session_id);
        if (refuseResume || !session || !session.resumable || d.token !== TOKEN) {
          refuseResume = false;
          stats.invalidSessions++;
          if (session) session.resumable = false;
          frame(conn, { op: GatewayOpcodes.InvalidSession, d: false } as GatewayInvalidSession);
          return;
        }
        stats.resumes++;
        if (session.conn && session.conn !== conn) session.conn.ws.terminate();
        session.conn = conn;
        conn.session = session;
        for (const event of session.events) {
          if (event.s > d.seq) {
            stats.replayed++;
            frame(conn, event);
          }
        }
        frame(conn, { op: GatewayOpcodes.Dispatch, t: GatewayDispatchEvents.Resumed, s: ++session.seq, d: undefined } as GatewayDispatchPayload);
        conn.live = true;
        return;
      }
      default:
        return; // presence updates, member requests…: not needed
    }
  }

  function dispatch(payload: Omit<GatewayDispatchPayload, 's' | 'op'>): void {
    const session = current;
    if (!session) return;
    const event = { op: GatewayOpcodes.Dispatch, ...payload, s: ++session.seq } as GatewayDispatchPayload;
    session.events.push(event);
    if (session.events.length > 5000) session.events.shift();
    if (session.conn?.live) frame(session.conn, event);
  }

  const ready = (session: Session): GatewayReadyDispatchData => ({
    v: 10, user: { ...BOT, verified: true, flags: NO_FLAGS, mfa_enabled: false }, guilds: [{ id: GUILD, unavailable: true }], session_id: session.id,
    resume_gateway_url: `ws://127.0.0.1:${port}/resume`, shard: [0, 1], application: { id: BOT.id, flags: NO_FLAGS, flags_new: '0' },
  });

  const member = (who: APIUser): APIGuildMember => ({ user: who, roles: [], joined_at: now(), deaf: false, mute: false, flags: NO_FLAGS });

  const guild = (): GatewayGuildCreateDispatchData => ({
    id: GUILD, name: 'Peer Guild', icon: null, splash: null, discovery_splash: null, banner: null, description: null, owner_id: USERS.alice.id, afk_channel_id: null, afk_timeout: 300,
    verification_level: 0, default_message_notifications: 0, explicit_content_filter: 0, mfa_level: 0, nsfw_level: 0, premium_tier: 0, premium_progress_bar_enabled: false,
    roles: [{ id: GUILD, name: '@everyone', permissions: '1071698660929', position: 0, color: 0, colors: { primary_color: 0, secondary_color: null, tertiary_color: null }, hoist: false, managed: false, mentionable: false, flags: NO_FLAGS, icon: null, unicode_emoji: null }],
    emojis: [], stickers: [], features: [], application_id: null, system_channel_id: null, system_channel_flags: NO_FLAGS, rules_channel_id: null, vanity_url_code: null,
    preferred_locale: 'en-US' as GatewayGuildCreateDispatchData['preferred_locale'], public_updates_channel_id: null, hub_type: null, safety_alerts_channel_id: null, incidents_data: null,
    region: 'us-west', unavailable: false, member_count: 4, large: false, joined_at: now(), members: [member(BOT)], channels: [groupChannel], threads: [threadChannel],
    presences: [], voice_states: [], stage_instances: [], guild_scheduled_events: [], soundboard_sounds: [],
  });

  // ---- messages ----
  function create(channelId: string, author: APIUser, content: string, extra: Partial<APIMessage> = {}): APIMessage {
    const message: APIMessage = {
      id: snowflake(), channel_id: channelId, author, content, timestamp: now(), edited_timestamp: null, tts: false, mention_everyone: false,
      mentions: [], mention_roles: [], attachments: [], embeds: [], pinned: false, type: MessageType.Default, flags: NO_FLAGS, components: [], ...extra,
    };
    const list = messages.get(channelId) ?? [];
    list.push(message);
    messages.set(channelId, list);
    const channel = channels.get(channelId);
    if (channel) channel.last_message_id = message.id;
    return message;
  }

  /**
   * MESSAGE_CREATE to the current session. Without the Message Content intent a session gets
   * empty content, attachments and snapshots except in DMs and messages that mention the bot or
   * that it sent (developers/events/gateway.mdx, "Message Content Intent").
   */
  function announce(message: APIMessage): void {
    const channel = channels.get(message.channel_id)!;
    const intents = current?.intents ?? 0;
    const readable =
      (intents & GatewayIntentBits.MessageContent) !== 0 || channel.type === ChannelType.DM || message.author.id === BOT.id || message.mentions.some((mentioned) => mentioned.id === BOT.id);
    const data: GatewayMessageCreateDispatchData = {
      ...message,
      ...(readable ? {} : { content: '', attachments: [], embeds: [], components: [], ...(message.message_snapshots ? { message_snapshots: [] } : {}) }),
      ...(guildChannel(message.channel_id) ? { guild_id: GUILD, member: { roles: [], joined_at: now(), nick: null, deaf: false, mute: false, flags: NO_FLAGS } } : {}),
    };
    dispatch({ t: GatewayDispatchEvents.MessageCreate, d: data });
  }

  const channelOf = (place: Place): string => (place.kind === 'dm' ? DMS[place.user] : place.kind === 'group' ? GROUP : THREAD);

  function storeFile(channelId: string, upload: { name: string; mime: string; data: Uint8Array; width?: number; height?: number }): APIAttachment {
    const id = snowflake();
    files.set(`${channelId}/${id}/${upload.name}`, { data: upload.data, mime: upload.mime });
    const url = `${base}/attachments/${channelId}/${id}/${encodeURIComponent(upload.name)}`;
    const size = upload.width && upload.height ? { width: upload.width, height: upload.height } : {};
    return { id, filename: upload.name, size: upload.data.length, ...(upload.mime ? { content_type: upload.mime } : {}), url, proxy_url: url, ...size };
  }

  // ---- REST ----
  function send(res: ServerResponse, status: number, body?: unknown, headers: Record<string, string> = {}): void {
    if (body === undefined) {
      res.writeHead(status, headers); // a 204 carries no content type
      res.end();
      return;
    }
    res.writeHead(status, { 'content-type': 'application/json', ...headers });
    res.end(JSON.stringify(body));
  }

  const apiError = (message: string, code: RESTJSONErrorCodes | 0): RESTError => ({ message, code });
  const formError = (field: string, message: string): RESTError => ({ message: 'Invalid Form Body', code: RESTJSONErrorCodes.InvalidFormBodyOrContentType, errors: { [field]: { _errors: [{ code: 'BASE_TYPE_INVALID', message }] } } });

  /** Which rate-limit bucket a request falls in (the routes the adapter calls that have one). */
  function bucketOf(method: string, rest: string): BucketRoute | undefined {
    if (method === 'POST' && rest === '/messages') return 'messages';
    if (method === 'PATCH' && /^\/messages\/\d+$/.test(rest)) return 'edits';
    if (method === 'POST' && rest === '/typing') return 'typing';
    return undefined;
  }

  async function handle(req: IncomingMessage, res: ServerResponse, raw: Buffer): Promise<void> {
    const url = new URL(req.url ?? '/', base);
    const method = req.method ?? 'GET';
    const file = /^\/attachments\/(.+)$/.exec(url.pathname);
    if (file && method === 'GET') {
      const stored = files.get(decodeURIComponent(file[1]!));
      if (!stored) return send(res, 404, apiError('Not Found', 0));
      res.writeHead(200, { 'content-type': stored.mime, 'content-length': String(stored.data.length) });
      res.end(stored.data);
      return;
    }
    const api = /^\/api\/v\d+(\/.*)$/.exec(url.pathname);
    if (!api) return unknown(res, method, url.pathname);
    if (req.headers.authorization !== `Bot ${TOKEN}`) return send(res, 401, apiError('401: Unauthorized', 0));
    const path = api[1]!;
    const channelMatch = /^\/channels\/(\d+)(\/.*)?$/.exec(path);
    const channelId = channelMatch?.[1];
    const rest = channelMatch?.[2] ?? '';
    const bucket = channelId === undefined ? undefined : bucketOf(method, rest);
    const flooding = channelId === undefined ? undefined : floodNext.get(channelId);
    if (bucket !== undefined && channelId !== undefined && flooding !== undefined) {
      floodNext.delete(channelId);
      limiter.exhaust(bucket, channelId, flooding);
    }
    if (bucket === 'messages' && channelId !== undefined && forced && forced.count > 0) {
      forced.count--;
      limiter.exhaust('messages', channelId, forced.seconds * 1000);
    }
    const verdict = limiter.check(bucket, channelId);
    stats.rateLimited = limiter.limited;
    if (!verdict.ok) return send(res, 429, verdict.body, verdict.headers);
    for (const [name, value] of Object.entries(verdict.headers)) res.setHeader(name, value);

    if (method === 'GET' && (path === '/gateway/bot' || path === '/gateway')) {
      const info: RESTGetAPIGatewayBotResult = { url: `ws://127.0.0.1:${port}/gateway`, shards: 1, session_start_limit: { total: 1000, remaining: 999, reset_after: 86_400_000, max_concurrency: 1 } };
      return send(res, 200, info);
    }
    if (method === 'GET' && path === '/users/@me') return send(res, 200, BOT);
    if (channelId !== undefined) {
      const channel = channels.get(channelId);
      if (!channel) return send(res, 404, apiError('Unknown Channel', RESTJSONErrorCodes.UnknownChannel));
      if (method === 'GET' && rest === '') return send(res, 200, channel);
      if (method === 'POST' && rest === '/typing') {
        typingCounts.set(channelId, (typingCounts.get(channelId) ?? 0) + 1);
        return send(res, 204);
      }
      if (method === 'GET' && rest === '/messages') return send(res, 200, list(channelId, url.searchParams));
      if (method === 'POST' && rest === '/messages') return postMessage(req, res, channelId, raw);
      const one = /^\/messages\/(\d+)$/.exec(rest);
      if (one) {
        const message = messages.get(channelId)?.find((candidate) => candidate.id === one[1]);
        if (!message) return send(res, 404, apiError('Unknown Message', RESTJSONErrorCodes.UnknownMessage));
        if (method === 'GET') return send(res, 200, message);
        if (method === 'PATCH') {
          if (message.author.id !== BOT.id) return send(res, 403, apiError('Cannot edit a message authored by another user', RESTJSONErrorCodes.CannotEditMessageAuthoredByAnotherUser));
          const body = JSON.parse(raw.toString('utf8')) as RESTPatchAPIChannelMessageJSONBody;
          if (typeof body.content === 'string') {
            if (body.content.length > 2000) return send(res, 400, formError('content', 'Must be 2000 or fewer in length.'));
            message.content = body.content;
            message.edited_timestamp = now();
            const record = records.find((r) => r.id === message.id);
            if (record) {
              record.content = body.content;
              record.edits++;
            }
          }
          return send(res, 200, message);
        }
      }
    }
    return unknown(res, method, url.pathname);
  }

  function unknown(res: ServerResponse, method: string, path: string): void {
    unknownRoutes.push(`${method} ${path}`);
    send(res, 404, apiError('404: Not Found', 0));
  }

  function list(channelId: string, query: URLSearchParams): APIMessage[] {
    const limit = Math.min(100, Math.max(1, Number(query.get('limit') ?? 50)));
    const all = messages.get(channelId) ?? [];
    const after = query.get('after');
    const picked = after ? all.filter((message) => BigInt(message.id) > BigInt(after)).slice(0, limit) : all.slice(-limit);
    return [...picked].reverse(); // newest first, as Discord answers
  }

  async function postMessage(req: IncomingMessage, res: ServerResponse, channelId: string, raw: Buffer): Promise<void> {
    let body: RESTPostAPIChannelMessageJSONBody;
    const uploads: Array<{ name: string; mime: string; data: Uint8Array }> = [];
    const type = req.headers['content-type'] ?? '';
    if (type.startsWith('multipart/form-data')) {
      const form = await new Response(new Uint8Array(raw), { headers: { 'content-type': type } }).formData();
      body = JSON.parse(String(form.get('payload_json') ?? '{}')) as RESTPostAPIChannelMessageJSONBody;
      for (const [key, value] of form.entries()) {
        if (/^files\[\d+\]$/.test(key) && typeof value !== 'string') uploads.push({ name: value.name, mime: value.type, data: new Uint8Array(await value.arrayBuffer()) });
      }
    } else {
      body = JSON.parse(raw.toString('utf8') || '{}') as RESTPostAPIChannelMessageJSONBody;
    }
    // reference.mdx, "Uploading Files": the limit applies to each file; opcodes-and-status-codes.mdx: 40005
    if (uploads.some((upload) => upload.data.length > maxUploadBytes)) {
      stats.tooLarge++;
      return send(res, 413, apiError('Request entity too large', RESTJSONErrorCodes.RequestEntityTooLarge));
    }
    const content = typeof body.content === 'string' ? body.content : '';
    if (content.length > 2000) return send(res, 400, formError('content', 'Must be 2000 or fewer in length.'));
    if (content === '' && uploads.length === 0) return send(res, 400, apiError('Cannot send an empty message', RESTJSONErrorCodes.CannotSendAnEmptyMessage));
    const nonceKey = body.enforce_nonce === true && body.nonce !== undefined ? `${channelId}:${String(body.nonce)}` : undefined;
    const earlier = nonceKey ? nonces.get(nonceKey) : undefined;
    if (earlier) {
      stats.nonceReuses++;
      return send(res, 200, earlier);
    }
    const referenceId = body.message_reference?.message_id;
    const referenced = referenceId ? messages.get(channelId)?.find((message) => message.id === referenceId) : undefined;
    // Discord reads an image's size (Attachment Object: width / height "if image or video").
    const measured = await Promise.all(uploads.map(async (upload) => {
      const meta = upload.mime.startsWith('image/') ? await sharp(upload.data).metadata().catch(() => undefined) : undefined;
      return meta?.width && meta.height ? { ...upload, width: meta.width, height: meta.height } : upload;
    }));
    const attachments = measured.map((upload) => storeFile(channelId, upload));
    const reference: APIMessageReference | undefined = referenced
      ? { type: MessageReferenceType.Default, message_id: referenced.id, channel_id: channelId, ...(guildChannel(channelId) ? { guild_id: GUILD } : {}) }
      : undefined;
    const message = create(channelId, BOT, content, {
      attachments,
      ...(body.nonce === undefined ? {} : { nonce: body.nonce }),
      ...(referenced && reference ? { type: MessageType.Reply, message_reference: reference, referenced_message: referenced } : {}),
    });
    if (nonceKey) nonces.set(nonceKey, message);
    records.push({
      id: message.id, channelId, content, edits: 0, files: uploads.map((upload) => upload.name),
      attachments: attachments.map((a) => ({
        filename: a.filename, contentType: a.content_type, ...(a.width ? { width: a.width } : {}), ...(a.height ? { height: a.height } : {}),
        inline: (a.content_type ?? '').startsWith('image/') && /\.(png|jpe?g|gif|webp)$/i.test(a.filename),
      })),
      ...(referenced ? { reference: referenced.id } : {}), ...(body.allowed_mentions === undefined ? {} : { allowedMentions: body.allowed_mentions }),
    });
    send(res, 200, message);
    announce(message);
  }

  return {
    channel: 'discord',
    limit: 2000,
    users: { alice: USERS.alice.id, bob: USERS.bob.id, mallory: USERS.mallory.id },
    hasTyping: true,
    apiBase: `${base}/api`,
    token: TOKEN,
    botId: BOT.id,
    stats,
    unknownRoutes,
    configSection: () => `[channels.discord]\ntoken = "${TOKEN}"\napi_base = "${base}/api"\n`,
    channelId: channelOf,

    async post(who, place, text, postOptions = {}) {
      const channelId = channelOf(place);
      const mention = postOptions.mention === true && place.kind !== 'dm';
      const referenced = postOptions.replyTo ? messages.get(channelId)?.find((message) => message.id === postOptions.replyTo) : undefined;
      announce(
        create(channelId, USERS[who], mention ? `<@${BOT.id}> ${text}` : text, {
          ...(mention ? { mentions: [BOT] } : {}),
          ...(referenced ? { type: MessageType.Reply, message_reference: { type: MessageReferenceType.Default, message_id: referenced.id, channel_id: channelId }, referenced_message: referenced } : {}),
        }),
      );
    },

    async forward(who, place, original) {
      const channelId = channelOf(place);
      // the forwarded message, somewhere the bot may not see (another DM)
      const source = create(DMS.bob, USERS.bob, original.text, original.file ? { attachments: [storeFile(DMS.bob, original.file)] } : {});
      announce(
        create(channelId, USERS[who], '', {
          flags: MessageFlags.HasSnapshot,
          message_reference: { type: MessageReferenceType.Forward, message_id: source.id, channel_id: source.channel_id },
          message_snapshots: [
            {
              message: {
                content: source.content, attachments: source.attachments, embeds: [], components: [], timestamp: source.timestamp, edited_timestamp: null,
                flags: NO_FLAGS, mentions: [], mention_roles: [], type: MessageType.Default,
              },
            },
          ],
        }),
      );
    },

    async postFile(who, place, upload, caption = '') {
      const channelId = channelOf(place);
      // An image's attachment carries its size in pixels ("height?/width?: height/width of file (if image)",
      // https://discord.com/developers/docs/resources/message#attachment-object); one that does not decode has none.
      const size = upload.mime.startsWith('image/') ? await imageDimensions(upload.data) : undefined;
      announce(create(channelId, USERS[who], caption, { attachments: [{ ...storeFile(channelId, upload), ...size }] }));
    },

    botMessages: (place): BotMessage[] => records.filter((r) => r.channelId === channelOf(place)).map((r) => ({ text: visibleText(r.content), edits: r.edits })),
    botFiles: (place) => records.filter((r) => r.channelId === channelOf(place)).flatMap((r) => r.files),
    botRecords: (place) => records.filter((r) => r.channelId === channelOf(place)),
    typing: (place) => typingCounts.get(channelOf(place)) ?? 0,
    connected: () => current?.conn?.live === true && current.conn.ws.readyState === current.conn.ws.OPEN,
    callsInsideWait: (place) => limiter.callsInsideWait(typeof place === 'string' ? place : channelOf(place)),
    flood: {
      waitNext: (place, ms) => void floodNext.set(channelOf(place), ms),
      callsInsideWait: (place) => limiter.callsInsideWait(channelOf(place)),
    },

    dropConnection(code = 4000) {
      for (const conn of conns) {
        if (code === 1006) conn.ws.terminate();
        else conn.ws.close(code, 'peer dropped the connection');
      }
    },
    gatewayDown() {
      down = true;
      for (const conn of conns) conn.ws.terminate();
    },
    gatewayUp(upOptions = {}) {
      refuseResume = upOptions.refuseResume === true;
      down = false;
    },
    zombie() {
      for (const conn of conns) conn.acking = false;
    },
    rateLimitNext(retryAfterSeconds = 0.2, count = 1) {
      forced = { seconds: retryAfterSeconds, count };
    },
    setMessageContentIntent(allowed) {
      messageContentIntent = allowed;
    },

    reset() {
      messages.clear();
      records.length = 0;
      typingCounts.clear();
      files.clear();
      nonces.clear();
      unknownRoutes.length = 0;
      down = false;
      refuseResume = false;
      forced = undefined;
      floodNext.clear();
      limiter.reset();
    },

    async close() {
      for (const conn of conns) conn.ws.terminate();
      wss.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** Discord markdown as people see it: markers gone, text kept. */
export function visibleText(content: string): string {
  return content
    .split('\n')
    .filter((line) => !/^ {0,3}(`{3,}|~{3,})[\w+-]*\s*$/.test(line))
    .map((line) => line.replace(/^#{1,3}\s+/, '').replace(/^-#\s+/, '').replace(/^>\s?/, ''))
    .join('\n')
    .replace(/`([^`\n]+)`/g, '$1')
    .replace(/\*\*([^*\n]+)\*\*/g, '$1')
    .replace(/__([^_\n]+)__/g, '$1')
    .replace(/~~([^~\n]+)~~/g, '$1')
    .replace(/\|\|([^|\n]+)\|\|/g, '$1')
    .replace(/(^|[^\w*])\*([^*\n]+)\*(?!\w)/g, '$1$2')
    .replace(/(^|\W)_([^_\n]+)_(?!\w)/g, '$1$2')
    .replace(/\[([^\]\n]+)\]\((https?:[^)\s]+)\)/g, '$1')
    .replace(/\\([*_`~|\\[\]()#>-])/g, '$1');
}
