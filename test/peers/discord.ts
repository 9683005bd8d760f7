/**
 * A local Discord for discord.js: the REST API (the routes discord.js and the adapter call)
 * and a gateway WebSocket speaking the real protocol — HELLO, IDENTIFY → READY + GUILD_CREATE,
 * heartbeats (op 1 / op 11), MESSAGE_CREATE dispatches with increasing sequence numbers,
 * RESUME → replay of missed dispatches → RESUMED, INVALID_SESSION. One guild with a text
 * channel and a public thread in it; DMs with alice, bob and mallory.
 *
 * Fault hooks: drop the socket (the client resumes), take the gateway down and bring it back
 * (optionally refusing the resume, so what was sent meanwhile is only reachable over REST),
 * stop acking heartbeats on the current connection (a zombie), and answer the next message
 * POST with a 429 carrying the headers @discordjs/rest reads.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { WebSocketServer, type WebSocket } from 'ws';
import type { BotMessage, ChatPeer, PeerUser, Place } from '../contracts/chat-channel.ts';

interface ApiUser {
  readonly id: string;
  readonly username: string;
  readonly global_name: string | null;
  readonly discriminator: '0';
  readonly avatar: null;
  readonly bot?: boolean;
}

type ApiMessage = Record<string, unknown> & { id: string; channel_id: string; author: ApiUser; content: string };

/** What the bot posted, as recorded for assertions. */
export interface BotRecord {
  readonly id: string;
  readonly channelId: string;
  content: string;
  edits: number;
  readonly files: string[];
  /** The message it answers (message_reference), if any. */
  readonly reference?: string;
  readonly allowedMentions?: unknown;
}

interface Session {
  readonly id: string;
  seq: number;
  readonly events: Array<{ op: 0; t: string; s: number; d: unknown }>;
  conn: Conn | undefined;
  resumable: boolean;
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
  rateLimited: number;
  nonceReuses: number;
}

export interface DiscordPeer extends ChatPeer {
  /** As ChatPeer's, and `replyTo` makes the post a reply to that message (message_reference + referenced_message). */
  post(user: PeerUser, place: Place, text: string, options?: { mention?: boolean; replyTo?: string }): Promise<void>;
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
  /** The next `count` message POSTs get a 429 asking to wait `retryAfterSeconds`. */
  rateLimitNext(retryAfterSeconds?: number, count?: number): void;
}

const EPOCH = 1_420_070_400_000n;
const TOKEN = 'peer-bot-token.discord';
const GUILD = '200000000000000001';
const GROUP = '300000000000000001';
const THREAD = '300000000000000002';
const user = (id: string, username: string, bot = false): ApiUser => ({ id, username, global_name: bot ? null : username[0]!.toUpperCase() + username.slice(1), discriminator: '0', avatar: null, ...(bot ? { bot: true } : {}) });
const BOT = user('900000000000000001', 'testbot', true);
const USERS: Record<PeerUser, ApiUser> = { alice: user('100000000000000001', 'alice'), bob: user('100000000000000002', 'bob'), mallory: user('100000000000000003', 'mallory') };
const DMS: Record<PeerUser, string> = { alice: '400000000000000001', bob: '400000000000000002', mallory: '400000000000000003' };

export async function startDiscordPeer(options: { heartbeatIntervalMs?: number } = {}): Promise<DiscordPeer> {
  const heartbeatInterval = options.heartbeatIntervalMs ?? 1000;
  const now = (): string => new Date().toISOString();
  let last = 0n;
  const snowflake = (): string => {
    let id = (BigInt(Date.now()) - EPOCH) << 22n;
    if (id <= last) id = last + 1n;
    last = id;
    return id.toString();
  };

  const groupChannel = { id: GROUP, type: 0, guild_id: GUILD, name: 'general', position: 0, permission_overwrites: [], parent_id: null, nsfw: false, topic: null, rate_limit_per_user: 0, last_message_id: null, flags: 0 };
  const threadChannel = {
    id: THREAD, type: 11, guild_id: GUILD, parent_id: GROUP, owner_id: USERS.alice.id, name: 'test-thread', last_message_id: null, message_count: 0, member_count: 2, rate_limit_per_user: 0, flags: 0, total_message_sent: 0,
    thread_metadata: { archived: false, auto_archive_duration: 1440, archive_timestamp: now(), locked: false },
  };
  const channels = new Map<string, Record<string, unknown>>([
    [GROUP, groupChannel],
    [THREAD, threadChannel],
    ...(Object.keys(DMS) as PeerUser[]).map((name): [string, Record<string, unknown>] => [DMS[name], { id: DMS[name], type: 1, recipients: [USERS[name]], last_message_id: null, flags: 0 }]),
  ]);
  const guildChannel = (id: string): boolean => id === GROUP || id === THREAD;

  const messages = new Map<string, ApiMessage[]>();
  const records: BotRecord[] = [];
  const typingCounts = new Map<string, number>();
  const files = new Map<string, { data: Uint8Array; mime: string }>();
  const nonces = new Map<string, ApiMessage>();
  const sessions = new Map<string, Session>();
  const conns = new Set<Conn>();
  const unknownRoutes: string[] = [];
  const stats: DiscordPeerStats = { attempts: 0, connections: 0, identifies: 0, resumes: 0, invalidSessions: 0, replayed: 0, heartbeats: 0, rateLimited: 0, nonceReuses: 0 };
  let current: Session | undefined;
  let down = false;
  let refuseResume = false;
  let limited: { seconds: number; count: number } | undefined;

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
    ws.send(JSON.stringify({ op: 10, d: { heartbeat_interval: heartbeatInterval }, s: null, t: null }));
    ws.on('message', (data) => {
      let payload: { op: number; d: Record<string, unknown> | null };
      try {
        payload = JSON.parse(String(data)) as typeof payload;
      } catch {
        return void ws.close(4002, 'Error while decoding payload.');
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

  function frame(conn: Conn, payload: unknown): void {
    if (conn.ws.readyState === conn.ws.OPEN) conn.ws.send(JSON.stringify(payload));
  }

  function onFrame(conn: Conn, payload: { op: number; d: Record<string, unknown> | null }): void {
    const d = payload.d ?? {};
    switch (payload.op) {
      case 1:
        stats.heartbeats++;
        if (conn.acking) frame(conn, { op: 11, d: null, s: null, t: null });
        return;
      case 2: {
        if (d.token !== TOKEN) return void conn.ws.close(4004, 'Authentication failed.');
        stats.identifies++;
        if (current) current.resumable = false;
        const session: Session = { id: `session-${stats.identifies}-${snowflake()}`, seq: 0, events: [], conn, resumable: true };
        sessions.set(session.id, session);
        current = session;
        conn.session = session;
        conn.live = true;
        frame(conn, { op: 0, t: 'READY', s: ++session.seq, d: ready(session) });
        frame(conn, { op: 0, t: 'GUILD_CREATE', s: ++session.seq, d: guild() });
        return;
      }
      case 6: {
        const session = sessions.get(String(d.session_id));
        if (refuseResume || !session || !session.resumable || d.token !== TOKEN) {
          refuseResume = false;
          stats.invalidSessions++;
          if (session) session.resumable = false;
          frame(conn, { op: 9, d: false, s: null, t: null });
          return;
        }
        stats.resumes++;
        if (session.conn && session.conn !== conn) session.conn.ws.terminate();
        session.conn = conn;
        conn.session = session;
        const seq = Number(d.seq);
        for (const event of session.events) {
          if (event.s > seq) {
            stats.replayed++;
            frame(conn, event);
          }
        }
        frame(conn, { op: 0, t: 'RESUMED', s: ++session.seq, d: { _trace: ['peer'] } });
        conn.live = true;
        return;
      }
      default:
        return; // presence updates, member requests…: not needed
    }
  }

  function dispatch(t: string, d: unknown): void {
    const session = current;
    if (!session) return;
    const event = { op: 0 as const, t, s: ++session.seq, d };
    session.events.push(event);
    if (session.events.length > 5000) session.events.shift();
    if (session.conn?.live) frame(session.conn, event);
  }

  const ready = (session: Session): unknown => ({
    v: 10, user: { ...BOT, verified: true, flags: 0, mfa_enabled: false }, guilds: [{ id: GUILD, unavailable: true }], session_id: session.id, session_type: 'normal',
    resume_gateway_url: `ws://127.0.0.1:${port}/resume`, shard: [0, 1], application: { id: BOT.id, flags: 0 },
    private_channels: [], relationships: [], presences: [], user_settings: {}, guild_join_requests: [], geo_ordered_rtc_regions: [], _trace: ['peer'],
  });

  const guild = (): unknown => ({
    id: GUILD, name: 'Peer Guild', icon: null, owner_id: USERS.alice.id, afk_timeout: 300, verification_level: 0, default_message_notifications: 0, explicit_content_filter: 0,
    roles: [{ id: GUILD, name: '@everyone', permissions: '1071698660929', position: 0, color: 0, hoist: false, managed: false, mentionable: false, flags: 0 }],
    emojis: [], stickers: [], features: [], mfa_level: 0, system_channel_id: null, premium_tier: 0, preferred_locale: 'en-US', nsfw_level: 0, unavailable: false,
    member_count: 4, large: false, joined_at: now(), members: [{ user: BOT, roles: [], joined_at: now(), deaf: false, mute: false, flags: 0 }],
    channels: [groupChannel], threads: [threadChannel], presences: [], voice_states: [], stage_instances: [], guild_scheduled_events: [], soundboard_sounds: [],
  });

  // ---- messages ----
  function create(channelId: string, author: ApiUser, content: string, extra: Partial<ApiMessage> = {}): ApiMessage {
    const message: ApiMessage = {
      id: snowflake(), channel_id: channelId, author, content, timestamp: now(), edited_timestamp: null, tts: false, mention_everyone: false,
      mentions: [], mention_roles: [], attachments: [], embeds: [], pinned: false, type: 0, flags: 0, components: [], ...extra,
    };
    const list = messages.get(channelId) ?? [];
    list.push(message);
    messages.set(channelId, list);
    const channel = channels.get(channelId);
    if (channel) channel.last_message_id = message.id;
    return message;
  }

  function announce(message: ApiMessage): void {
    const channel = channels.get(message.channel_id)!;
    dispatch('MESSAGE_CREATE', {
      ...message,
      channel_type: channel.type,
      ...(guildChannel(message.channel_id) ? { guild_id: GUILD, member: { roles: [], joined_at: now(), nick: null, deaf: false, mute: false, flags: 0 } } : {}),
    });
  }

  const channelOf = (place: Place): string => (place.kind === 'dm' ? DMS[place.user] : place.kind === 'group' ? GROUP : THREAD);

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

  const formError = (field: string, message: string): unknown => ({ message: 'Invalid Form Body', code: 50035, errors: { [field]: { _errors: [{ code: 'BASE_TYPE_INVALID', message }] } } });

  async function handle(req: IncomingMessage, res: ServerResponse, raw: Buffer): Promise<void> {
    const url = new URL(req.url ?? '/', base);
    const method = req.method ?? 'GET';
    const file = /^\/attachments\/(.+)$/.exec(url.pathname);
    if (file && method === 'GET') {
      const stored = files.get(decodeURIComponent(file[1]!));
      if (!stored) return send(res, 404, { message: 'Not Found', code: 0 });
      res.writeHead(200, { 'content-type': stored.mime, 'content-length': String(stored.data.length) });
      res.end(stored.data);
      return;
    }
    const api = /^\/api\/v\d+(\/.*)$/.exec(url.pathname);
    if (!api) return unknown(res, method, url.pathname);
    if (req.headers.authorization !== `Bot ${TOKEN}`) return send(res, 401, { message: '401: Unauthorized', code: 0 });
    const path = api[1]!;
    let m: RegExpExecArray | null;
    if (method === 'GET' && (path === '/gateway/bot' || path === '/gateway')) {
      return send(res, 200, { url: `ws://127.0.0.1:${port}/gateway`, shards: 1, session_start_limit: { total: 1000, remaining: 999, reset_after: 86_400_000, max_concurrency: 1 } });
    }
    if (method === 'GET' && path === '/users/@me') return send(res, 200, BOT);
    if ((m = /^\/channels\/(\d+)(\/.*)?$/.exec(path))) {
      const channelId = m[1]!;
      const rest = m[2] ?? '';
      const channel = channels.get(channelId);
      if (!channel) return send(res, 404, { message: 'Unknown Channel', code: 10003 });
      if (method === 'GET' && rest === '') return send(res, 200, channel);
      if (method === 'POST' && rest === '/typing') {
        typingCounts.set(channelId, (typingCounts.get(channelId) ?? 0) + 1);
        return send(res, 204);
      }
      if (method === 'GET' && rest === '/messages') return send(res, 200, list(channelId, url.searchParams));
      if (method === 'POST' && rest === '/messages') return postMessage(req, res, channelId, raw);
      if ((m = /^\/messages\/(\d+)$/.exec(rest))) {
        const message = messages.get(channelId)?.find((candidate) => candidate.id === m![1]);
        if (!message) return send(res, 404, { message: 'Unknown Message', code: 10008 });
        if (method === 'GET') return send(res, 200, message);
        if (method === 'PATCH') {
          if (message.author.id !== BOT.id) return send(res, 403, { message: 'Cannot edit a message authored by another user', code: 50005 });
          const body = JSON.parse(raw.toString('utf8')) as { content?: string };
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
    send(res, 404, { message: '404: Not Found', code: 0 });
  }

  function list(channelId: string, query: URLSearchParams): ApiMessage[] {
    const limit = Math.min(100, Math.max(1, Number(query.get('limit') ?? 50)));
    const all = messages.get(channelId) ?? [];
    const after = query.get('after');
    const picked = after ? all.filter((message) => BigInt(message.id) > BigInt(after)).slice(0, limit) : all.slice(-limit);
    return [...picked].reverse(); // newest first, as Discord answers
  }

  async function postMessage(req: IncomingMessage, res: ServerResponse, channelId: string, raw: Buffer): Promise<void> {
    if (limited && limited.count > 0) {
      limited.count--;
      stats.rateLimited++;
      const seconds = limited.seconds;
      return send(res, 429, { message: 'You are being rate limited.', retry_after: seconds, global: false }, {
        'retry-after': String(seconds), 'x-ratelimit-limit': '5', 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': String(Date.now() / 1000 + seconds),
        'x-ratelimit-reset-after': String(seconds), 'x-ratelimit-bucket': 'peer-channel-messages', 'x-ratelimit-scope': 'user',
      });
    }
    let body: Record<string, unknown>;
    const uploads: Array<{ name: string; mime: string; data: Uint8Array }> = [];
    const type = req.headers['content-type'] ?? '';
    if (type.startsWith('multipart/form-data')) {
      const form = await new Response(new Uint8Array(raw), { headers: { 'content-type': type } }).formData();
      body = JSON.parse(String(form.get('payload_json') ?? '{}')) as Record<string, unknown>;
      for (const [key, value] of form.entries()) {
        if (/^files\[\d+\]$/.test(key) && typeof value !== 'string') uploads.push({ name: value.name, mime: value.type, data: new Uint8Array(await value.arrayBuffer()) });
      }
    } else {
      body = JSON.parse(raw.toString('utf8') || '{}') as Record<string, unknown>;
    }
    const content = typeof body.content === 'string' ? body.content : '';
    if (content.length > 2000) return send(res, 400, formError('content', 'Must be 2000 or fewer in length.'));
    if (content === '' && uploads.length === 0) return send(res, 400, { message: 'Cannot send an empty message', code: 50006 });
    const nonceKey = body.enforce_nonce === true && body.nonce !== undefined ? `${channelId}:${String(body.nonce)}` : undefined;
    const earlier = nonceKey ? nonces.get(nonceKey) : undefined;
    if (earlier) {
      stats.nonceReuses++;
      return send(res, 200, earlier);
    }
    const referenceId = (body.message_reference as { message_id?: string } | undefined)?.message_id;
    const referenced = referenceId ? messages.get(channelId)?.find((message) => message.id === referenceId) : undefined;
    const attachments = uploads.map((upload) => {
      const id = snowflake();
      files.set(`${channelId}/${id}/${upload.name}`, upload);
      return { id, filename: upload.name, size: upload.data.length, content_type: upload.mime, url: `${base}/attachments/${channelId}/${id}/${encodeURIComponent(upload.name)}`, proxy_url: `${base}/attachments/${channelId}/${id}/${encodeURIComponent(upload.name)}` };
    });
    const message = create(channelId, BOT, content, {
      attachments,
      ...(body.nonce === undefined ? {} : { nonce: body.nonce }),
      ...(referenced ? { type: 19, message_reference: { type: 0, message_id: referenced.id, channel_id: channelId, ...(guildChannel(channelId) ? { guild_id: GUILD } : {}) }, referenced_message: referenced } : {}),
    });
    if (nonceKey) nonces.set(nonceKey, message);
    records.push({
      id: message.id, channelId, content, edits: 0, files: uploads.map((upload) => upload.name),
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
          ...(referenced ? { type: 19, message_reference: { type: 0, message_id: referenced.id, channel_id: channelId }, referenced_message: referenced } : {}),
        }),
      );
    },

    async postFile(who, place, upload, caption = '') {
      const channelId = channelOf(place);
      const id = snowflake();
      files.set(`${channelId}/${id}/${upload.name}`, { data: upload.data, mime: upload.mime });
      const url = `${base}/attachments/${channelId}/${id}/${encodeURIComponent(upload.name)}`;
      announce(create(channelId, USERS[who], caption, { attachments: [{ id, filename: upload.name, size: upload.data.length, content_type: upload.mime, url, proxy_url: url }] }));
    },

    botMessages: (place): BotMessage[] => records.filter((r) => r.channelId === channelOf(place)).map((r) => ({ text: visibleText(r.content), edits: r.edits })),
    botFiles: (place) => records.filter((r) => r.channelId === channelOf(place)).flatMap((r) => r.files),
    botRecords: (place) => records.filter((r) => r.channelId === channelOf(place)),
    typing: (place) => typingCounts.get(channelOf(place)) ?? 0,
    connected: () => current?.conn?.live === true && current.conn.ws.readyState === current.conn.ws.OPEN,

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
      limited = { seconds: retryAfterSeconds, count };
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
      limited = undefined;
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
