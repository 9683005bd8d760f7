/**
 * A local Slack for Bolt (its WebClient) and @slack/socket-mode: the Web API (POST /api/<method>,
 * form or JSON bodies, Bearer or `token` auth), Socket Mode (apps.connections.open → a ws://
 * URL; hello, events_api envelopes that wait for the app's ack and are redelivered with
 * retry_attempt on the next connection when un-acked, ping frames, disconnect envelopes) and
 * the HTTP Events API (signed POSTs to the bot's listener, retried with X-Slack-Retry-Num on
 * anything but 200). One workspace: alice, bob and mallory, a DM with each, and one public
 * channel holding the designated test thread.
 *
 * Places: the DM; the group = the channel's top level and every thread rooted there except
 * the test thread (a bot replies to a mention in a thread under it); the thread = the test
 * thread (a parent message in the channel; people post into it with thread_ts).
 *
 * Fault hooks: drop the socket, go silent (socket open, no pings, pongs or events), send a
 * disconnect envelope, lose the next ack and drop the socket, 429 the next chat.postMessage,
 * refuse the next auth.test calls.
 */
import { createHmac } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { WebSocketServer, type WebSocket } from 'ws';
import type { BotMessage, ChatPeer, PeerUser, Place } from '../contracts/chat-channel.ts';

const TEAM = 'T0TEAM';
const APP = 'A0APP';
const BOT_USER = 'U0BOT';
const BOT_ID = 'B0BOT';
const BOT_NAME = 'testbot';
const GROUP = 'C0GENERAL';
const USERS: Record<PeerUser, string> = { alice: 'U0ALICE', bob: 'U0BOB', mallory: 'U0MALLORY' };
const DMS: Record<PeerUser, string> = { alice: 'D0ALICE', bob: 'D0BOB', mallory: 'D0MALLORY' };

interface StoredMessage {
  readonly ts: string;
  readonly channel: string;
  readonly user: string;
  text: string;
  readonly thread_ts?: string;
  readonly bot_id?: string;
  edits: number;
}

export interface EnvelopeRecord {
  readonly id: string;
  readonly eventId: string;
  readonly event: Record<string, unknown>;
  deliveries: number;
  acked: boolean;
}

export interface SlackPeerStats {
  connections: number;
  acks: number;
  /** Envelopes sent again (retry_attempt > 0). */
  redeliveries: number;
  pings: number;
  rateLimited: number;
  /** HTTP event POSTs and the status each got. */
  readonly httpDeliveries: Array<{ readonly eventId: string; readonly retry: number; readonly status: number }>;
}

export interface SlackPeer extends ChatPeer {
  readonly apiUrl: string;
  readonly botToken: string;
  readonly appToken: string;
  readonly signingSecret: string;
  readonly botUserId: string;
  readonly stats: SlackPeerStats;
  /** Web API methods the peer does not know, as called. */
  readonly unknownMethods: string[];
  /** Every Web API call, in order. */
  readonly calls: Array<{ readonly method: string; readonly body: Record<string, string> }>;
  channelId(place: Place): string;
  /** The bot's messages in a place as posted (raw mrkdwn). */
  rawBotMessages(place: Place): readonly string[];
  /** A `[channels.slack]` section for the HTTP Events API (listener on a random port). */
  httpConfigSection(): string;
  /** Events go to this URL as signed POSTs (HTTP mode) instead of Socket Mode; undefined = Socket Mode. */
  useHttp(url: string | undefined): void;
  /** POSTs one Events API body to the HTTP listener, signed (or not), as a retry (or not). */
  sendHttpEvent(body: Record<string, unknown>, options?: { retryNum?: number; badSignature?: boolean; timestamp?: number }): Promise<{ status: number; body: string }>;
  /** An event_callback body as Slack would POST it for a person's message. */
  eventBody(user: PeerUser, place: Place, text: string): Record<string, unknown>;
  envelopes(): readonly EnvelopeRecord[];
  /** Open Socket Mode connections that are not silent. */
  liveSockets(): number;
  /** Cuts every socket without a close frame. */
  dropSocket(): void;
  /** Current sockets stay open but get no pings, pongs or events any more. */
  goSilent(): void;
  /** Sends `{type: "disconnect"}` (refresh_requested) on the current sockets. */
  sendDisconnect(): void;
  /** The next ack is lost and the socket dropped right after it (the envelope stays un-acked). */
  dropOnNextAck(): void;
  /** While on, acks are lost on the way (envelopes stay un-acked and are redelivered on the next connection). */
  loseAcks(on: boolean): void;
  /** The next `count` chat.postMessage calls get a 429 with Retry-After. */
  rateLimitNextPost(retryAfterSeconds?: number, count?: number): void;
  /** The next `count` auth.test calls are answered `invalid_auth` (kept across `reset()` until used). */
  refuseAuth(count: number): void;
}

interface Conn {
  readonly ws: WebSocket;
  silent: boolean;
  /** Slack stops delivering on a connection it asked to disconnect. */
  retiring: boolean;
  readonly pinger: NodeJS.Timeout;
}

export async function startSlackPeer(options: { pingIntervalMs?: number } = {}): Promise<SlackPeer> {
  const botToken = 'xoxb-peer-bot-token';
  const appToken = 'xapp-peer-app-token';
  const signingSecret = 'peer-signing-secret';
  const pingIntervalMs = options.pingIntervalMs ?? 2000;

  let clock = 0;
  const nextTs = (): string => {
    clock = Math.max(clock + 1, Date.now() * 1000);
    return `${Math.floor(clock / 1_000_000)}.${String(clock % 1_000_000).padStart(6, '0')}`;
  };
  let counter = 0;
  const nextId = (prefix: string): string => `${prefix}${(++counter).toString(36).toUpperCase().padStart(6, '0')}`;

  let messages: StoredMessage[] = [];
  let botPosts: StoredMessage[] = [];
  let botUploads: Array<{ channel: string; thread?: string; name: string }> = [];
  const uploads = new Map<string, { name: string; length: number; data?: Buffer }>();
  const files = new Map<string, { name: string; mime: string; data: Uint8Array }>();
  let envelopes: EnvelopeRecord[] = [];
  const conns = new Set<Conn>();
  const tickets = new Set<string>();
  const unknownMethods: string[] = [];
  const calls: Array<{ method: string; body: Record<string, string> }> = [];
  const stats: SlackPeerStats = { connections: 0, acks: 0, redeliveries: 0, pings: 0, rateLimited: 0, httpDeliveries: [] };
  let limited: { seconds: number; count: number } | undefined;
  let authRefusals = 0;
  let loseNextAck = false;
  let losingAcks = false;
  let httpUrl: string | undefined;
  const timers = new Set<NodeJS.Timeout>();

  const threadParent: StoredMessage = { ts: nextTs(), channel: GROUP, user: USERS.alice, text: 'Test thread', edits: 0 };
  messages.push(threadParent);

  const channelId = (place: Place): string => (place.kind === 'dm' ? DMS[place.user] : GROUP);
  const inPlace = (place: Place, channel: string, thread: string | undefined): boolean => {
    if (channel !== channelId(place)) return false;
    if (place.kind === 'thread') return thread === threadParent.ts;
    if (place.kind === 'group') return thread !== threadParent.ts;
    return true;
  };

  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      handle(req, res, Buffer.concat(chunks)).catch((error: unknown) => json(res, 500, { ok: false, error: String(error) }));
    });
  });
  const wss = new WebSocketServer({ noServer: true, autoPong: false });
  server.on('upgrade', (req: IncomingMessage, socket: Socket, head: Buffer) => {
    const url = new URL(req.url ?? '/', 'http://peer');
    const ticket = url.searchParams.get('ticket') ?? '';
    socket.on('error', () => undefined); // a client that gives up may reset before the refusal is out
    if (url.pathname !== '/link/' || !tickets.delete(ticket)) {
      socket.end('HTTP/1.1 401 Unauthorized\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => open(ws));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  // ---- Socket Mode ----
  function open(ws: WebSocket): void {
    const conn: Conn = {
      ws,
      silent: false,
      retiring: false,
      pinger: setInterval(() => {
        if (!conn.silent && ws.readyState === ws.OPEN) ws.ping(Buffer.from(String(Date.now())));
      }, pingIntervalMs),
    };
    conns.add(conn);
    stats.connections++;
    ws.on('ping', (data) => {
      stats.pings++;
      if (!conn.silent && ws.readyState === ws.OPEN) ws.pong(data);
    });
    ws.on('message', (data) => onAck(conn, String(data)));
    ws.on('close', () => {
      clearInterval(conn.pinger);
      conns.delete(conn);
    });
    ws.on('error', () => undefined);
    ws.send(JSON.stringify({ type: 'hello', num_connections: conns.size, debug_info: { host: 'peer', build_number: 1, approximate_connection_time: 18060 }, connection_info: { app_id: APP } }));
    for (const envelope of envelopes) if (!envelope.acked) deliver(envelope, conn);
  }

  function onAck(conn: Conn, data: string): void {
    if (conn.silent || losingAcks) return;
    let id: unknown;
    try {
      id = (JSON.parse(data) as { envelope_id?: unknown }).envelope_id;
    } catch {
      return;
    }
    const envelope = envelopes.find((e) => e.id === id);
    if (!envelope) return;
    if (loseNextAck) {
      loseNextAck = false;
      conn.ws.terminate();
      return;
    }
    if (!envelope.acked) stats.acks++;
    envelope.acked = true;
  }

  const liveConn = (): Conn | undefined => [...conns].reverse().find((c) => !c.silent && !c.retiring && c.ws.readyState === c.ws.OPEN);

  function deliver(envelope: EnvelopeRecord, conn = liveConn()): void {
    if (!conn) return; // waits for the next connection
    const attempt = envelope.deliveries++;
    if (attempt > 0) stats.redeliveries++;
    conn.ws.send(
      JSON.stringify({
        envelope_id: envelope.id,
        type: 'events_api',
        accepts_response_payload: false,
        retry_attempt: attempt,
        retry_reason: attempt > 0 ? 'timeout' : '',
        payload: callback(envelope.event, envelope.eventId),
      }),
    );
  }

  function callback(event: Record<string, unknown>, eventId: string): Record<string, unknown> {
    return {
      token: 'legacy-verification-token',
      team_id: TEAM,
      api_app_id: APP,
      event,
      type: 'event_callback',
      event_id: eventId,
      event_time: Math.floor(Date.now() / 1000),
      authorizations: [{ enterprise_id: null, team_id: TEAM, user_id: BOT_USER, is_bot: true, is_enterprise_install: false }],
      is_ext_shared_channel: false,
    };
  }

  /** Delivers an event the way the bot is connected (socket or HTTP). */
  async function emit(event: Record<string, unknown>): Promise<void> {
    const eventId = nextId('Ev');
    if (httpUrl === undefined) {
      const envelope: EnvelopeRecord = { id: `env-${nextId('')}`, eventId, event, deliveries: 0, acked: false };
      envelopes.push(envelope);
      deliver(envelope);
      return;
    }
    const body = callback(event, eventId);
    const first = await sendHttpEvent(body);
    if (first.status !== 200) retryHttp(body, 1);
  }

  function retryHttp(body: Record<string, unknown>, retry: number): void {
    if (retry > 3) return;
    const timer = setTimeout(() => {
      timers.delete(timer);
      void sendHttpEvent(body, { retryNum: retry }).then((r) => r.status !== 200 && retryHttp(body, retry + 1), () => retryHttp(body, retry + 1));
    }, 200 * retry);
    timers.add(timer);
  }

  async function sendHttpEvent(body: Record<string, unknown>, opts: { retryNum?: number; badSignature?: boolean; timestamp?: number } = {}): Promise<{ status: number; body: string }> {
    if (httpUrl === undefined) throw new Error('useHttp(url) first');
    const raw = JSON.stringify(body);
    const timestamp = String(opts.timestamp ?? Math.floor(Date.now() / 1000));
    const signature = `v0=${createHmac('sha256', opts.badSignature ? 'not-the-secret' : signingSecret).update(`v0:${timestamp}:${raw}`).digest('hex')}`;
    const headers: Record<string, string> = { 'content-type': 'application/json', 'x-slack-request-timestamp': timestamp, 'x-slack-signature': signature };
    if (opts.retryNum) Object.assign(headers, { 'x-slack-retry-num': String(opts.retryNum), 'x-slack-retry-reason': 'http_error' });
    try {
      const response = await fetch(httpUrl, { method: 'POST', headers, body: raw, signal: AbortSignal.timeout(10_000) });
      const text = await response.text();
      stats.httpDeliveries.push({ eventId: String(body.event_id ?? ''), retry: opts.retryNum ?? 0, status: response.status });
      return { status: response.status, body: text };
    } catch (error) {
      stats.httpDeliveries.push({ eventId: String(body.event_id ?? ''), retry: opts.retryNum ?? 0, status: 0 });
      throw error;
    }
  }

  // ---- people ----
  function personMessage(user: PeerUser, place: Place, text: string, mention: boolean, extra: Record<string, unknown> = {}): { message: StoredMessage; event: Record<string, unknown> } {
    const channel = channelId(place);
    const thread = place.kind === 'thread' ? threadParent.ts : undefined;
    const message: StoredMessage = { ts: nextTs(), channel, user: USERS[user], text: mention ? `<@${BOT_USER}> ${text}` : text, edits: 0, ...(thread ? { thread_ts: thread } : {}) };
    const event = {
      type: 'message',
      channel,
      user: message.user,
      text: message.text,
      ts: message.ts,
      event_ts: message.ts,
      team: TEAM,
      channel_type: place.kind === 'dm' ? 'im' : 'channel',
      ...(thread ? { thread_ts: thread, parent_user_id: threadParent.user } : {}),
      ...extra,
    };
    return { message, event };
  }

  async function postPerson(user: PeerUser, place: Place, text: string, mention: boolean, extra: Record<string, unknown> = {}): Promise<void> {
    const { message, event } = personMessage(user, place, text, mention, extra);
    messages.push(message);
    await emit(event);
    if (mention && place.kind !== 'dm') {
      const { type: _type, channel_type: _channelType, ...rest } = event;
      await emit({ ...rest, type: 'app_mention' });
    }
  }

  // ---- Web API ----
  async function handle(req: IncomingMessage, res: ServerResponse, raw: Buffer): Promise<void> {
    const url = new URL(req.url ?? '/', base);
    if (req.method === 'POST' && url.pathname.startsWith('/upload/')) {
      const upload = uploads.get(url.pathname.slice('/upload/'.length));
      if (!upload) return void res.writeHead(404).end();
      let data = raw;
      if ((req.headers['content-type'] ?? '').startsWith('multipart/form-data')) {
        const form = await new Response(raw, { headers: { 'content-type': req.headers['content-type']! } }).formData();
        const part = [...form.values()].find((value) => typeof value !== 'string');
        data = part ? Buffer.from(await (part as Blob).arrayBuffer()) : Buffer.alloc(0);
      }
      upload.data = data;
      return void res.writeHead(200, { 'content-type': 'text/plain' }).end(`OK - ${data.length}`);
    }
    if (req.method === 'GET' && url.pathname.startsWith('/files-pri/')) {
      const file = files.get(url.pathname.split('/')[2] ?? '');
      if (req.headers.authorization !== `Bearer ${botToken}`) return void res.writeHead(200, { 'content-type': 'text/html' }).end('<html>sign in</html>');
      if (!file) return void res.writeHead(404).end();
      return void res.writeHead(200, { 'content-type': file.mime, 'content-length': file.data.length }).end(Buffer.from(file.data));
    }
    const method = /^\/api\/([\w.]+)$/.exec(url.pathname)?.[1];
    if (req.method !== 'POST' || !method) return void res.writeHead(404).end();
    const type = req.headers['content-type'] ?? '';
    const body: Record<string, string> = type.includes('application/json')
      ? Object.fromEntries(Object.entries(JSON.parse(raw.toString('utf8') || '{}') as Record<string, unknown>).map(([k, v]) => [k, typeof v === 'string' ? v : JSON.stringify(v)]))
      : Object.fromEntries(new URLSearchParams(raw.toString('utf8')));
    calls.push({ method, body });
    const token = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1] ?? body.token;
    const wanted = method === 'apps.connections.open' ? appToken : botToken;
    if (token !== wanted) return json(res, 200, { ok: false, error: token ? 'invalid_auth' : 'not_authed' });
    const answer = api(method, body, res);
    if (answer) json(res, 200, answer);
  }

  function api(method: string, body: Record<string, string>, res: ServerResponse): Record<string, unknown> | undefined {
    const known = (channel: string | undefined): boolean => channel === GROUP || Object.values(DMS).includes(channel ?? '');
    switch (method) {
      case 'auth.test':
        if (authRefusals > 0) {
          authRefusals--;
          return { ok: false, error: 'invalid_auth' };
        }
        return { ok: true, url: 'https://peer.slack.com/', team: 'Peer', user: BOT_NAME, team_id: TEAM, user_id: BOT_USER, bot_id: BOT_ID, is_enterprise_install: false };
      case 'apps.connections.open': {
        const ticket = nextId('tk');
        tickets.add(ticket);
        return { ok: true, url: `${base.replace('http:', 'ws:')}/link/?ticket=${ticket}&app_id=${APP}` };
      }
      case 'chat.postMessage': {
        if (limited && limited.count > 0) {
          limited.count--;
          stats.rateLimited++;
          json(res, 429, { ok: false, error: 'ratelimited' }, { 'retry-after': String(limited.seconds) });
          return undefined;
        }
        if (!known(body.channel)) return { ok: false, error: 'channel_not_found' };
        if (!body.text) return { ok: false, error: 'no_text' };
        if (body.text.length > 40_000) return { ok: false, error: 'msg_too_long' };
        const message: StoredMessage = { ts: nextTs(), channel: body.channel!, user: BOT_USER, bot_id: BOT_ID, text: body.text, edits: 0, ...(body.thread_ts ? { thread_ts: body.thread_ts } : {}) };
        messages.push(message);
        botPosts.push(message);
        // Slack echoes the bot's own message to it as an event, as it does every message in a channel it is in.
        void emit({ type: 'message', channel: message.channel, user: BOT_USER, bot_id: BOT_ID, app_id: APP, text: message.text, ts: message.ts, event_ts: message.ts, team: TEAM, channel_type: message.channel === GROUP ? 'channel' : 'im', ...(message.thread_ts ? { thread_ts: message.thread_ts } : {}) });
        return { ok: true, channel: message.channel, ts: message.ts, message: { type: 'message', user: BOT_USER, bot_id: BOT_ID, text: message.text, ts: message.ts } };
      }
      case 'chat.update': {
        const message = messages.find((m) => m.channel === body.channel && m.ts === body.ts);
        if (!message) return { ok: false, error: 'message_not_found' };
        if (message.user !== BOT_USER) return { ok: false, error: 'cant_update_message' };
        if (!body.text) return { ok: false, error: 'no_text' };
        message.text = body.text;
        message.edits++;
        return { ok: true, channel: message.channel, ts: message.ts, text: message.text };
      }
      case 'conversations.replies': {
        if (!known(body.channel)) return { ok: false, error: 'channel_not_found' };
        const thread = messages.filter((m) => m.channel === body.channel && (m.ts === body.ts || m.thread_ts === body.ts));
        if (thread.length === 0) return { ok: false, error: 'thread_not_found' };
        return { ok: true, has_more: false, messages: thread.map((m) => ({ type: 'message', user: m.user, text: m.text, ts: m.ts, ...(m.thread_ts ? { thread_ts: m.thread_ts } : {}), ...(m.bot_id ? { bot_id: m.bot_id } : {}) })) };
      }
      case 'conversations.info':
        if (!known(body.channel)) return { ok: false, error: 'channel_not_found' };
        return { ok: true, channel: body.channel === GROUP ? { id: GROUP, name: 'general', is_channel: true, is_member: true } : { id: body.channel, is_im: true } };
      case 'users.info': {
        const name = (Object.keys(USERS) as PeerUser[]).find((u) => USERS[u] === body.user);
        if (!name) return { ok: false, error: 'user_not_found' };
        const real = name[0]!.toUpperCase() + name.slice(1);
        return { ok: true, user: { id: body.user, team_id: TEAM, name, real_name: real, profile: { display_name: name, real_name: real } } };
      }
      case 'files.getUploadURLExternal': {
        const length = Number(body.length);
        if (!body.filename || !Number.isFinite(length)) return { ok: false, error: 'invalid_arguments' };
        const id = nextId('F');
        uploads.set(id, { name: body.filename, length });
        return { ok: true, upload_url: `${base}/upload/${id}`, file_id: id };
      }
      case 'files.completeUploadExternal': {
        const list = JSON.parse(body.files ?? '[]') as Array<{ id: string; title?: string }>;
        const done = list.map((f) => ({ f, upload: uploads.get(f.id) }));
        if (done.some(({ upload }) => !upload?.data)) return { ok: false, error: 'file_not_found' };
        if (body.channel_id && !known(body.channel_id)) return { ok: false, error: 'channel_not_found' };
        for (const { upload } of done) if (body.channel_id) botUploads.push({ channel: body.channel_id, ...(body.thread_ts ? { thread: body.thread_ts } : {}), name: upload!.name });
        return { ok: true, files: done.map(({ f, upload }) => ({ id: f.id, name: upload!.name, title: f.title ?? upload!.name })) };
      }
      default:
        unknownMethods.push(method);
        return { ok: false, error: 'unknown_method' };
    }
  }

  function json(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
    res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', ...headers }).end(JSON.stringify(body));
  }

  const peer: SlackPeer = {
    channel: 'slack',
    limit: 4000,
    users: USERS,
    hasTyping: false,
    apiUrl: `${base}/api/`,
    botToken,
    appToken,
    signingSecret,
    botUserId: BOT_USER,
    stats,
    unknownMethods,
    calls,
    channelId,
    configSection: () => `[channels.slack]\nbot_token = "${botToken}"\napp_token = "${appToken}"\napi_url = "${base}/api/"\n`,
    httpConfigSection: () => `[channels.slack]\nbot_token = "${botToken}"\nsigning_secret = "${signingSecret}"\nlisten = "127.0.0.1:0"\napi_url = "${base}/api/"\n`,
    useHttp: (url) => void (httpUrl = url),
    sendHttpEvent,
    eventBody: (user, place, text) => {
      const { message, event } = personMessage(user, place, text, false);
      messages.push(message);
      return callback(event, nextId('Ev'));
    },
    async post(user, place, text, opts = {}) {
      await postPerson(user, place, text, opts.mention === true);
    },
    async postFile(user, place, file, caption) {
      const id = nextId('F');
      files.set(id, { name: file.name, mime: file.mime, data: file.data });
      const shared = { id, name: file.name, title: file.name, mimetype: file.mime, filetype: file.name.split('.').pop(), size: file.data.length, mode: 'hosted', url_private: `${base}/files-pri/${id}/${file.name}`, url_private_download: `${base}/files-pri/${id}/download/${file.name}` };
      await postPerson(user, place, caption ?? '', false, { subtype: 'file_share', files: [shared], upload: true });
    },
    botMessages: (place) => botPosts.filter((m) => inPlace(place, m.channel, m.thread_ts)).map((m): BotMessage => ({ text: visibleText(m.text), edits: m.edits })),
    rawBotMessages: (place) => botPosts.filter((m) => inPlace(place, m.channel, m.thread_ts)).map((m) => m.text),
    botFiles: (place) => botUploads.filter((u) => inPlace(place, u.channel, u.thread)).map((u) => u.name),
    typing: () => 0,
    envelopes: () => envelopes,
    liveSockets: () => [...conns].filter((c) => !c.silent && c.ws.readyState === c.ws.OPEN).length,
    dropSocket() {
      for (const conn of conns) conn.ws.terminate();
    },
    goSilent() {
      for (const conn of conns) conn.silent = true;
    },
    sendDisconnect() {
      for (const conn of conns) {
        conn.retiring = true;
        if (conn.ws.readyState === conn.ws.OPEN) conn.ws.send(JSON.stringify({ type: 'disconnect', reason: 'refresh_requested', debug_info: { host: 'peer' } }));
      }
    },
    dropOnNextAck: () => void (loseNextAck = true),
    loseAcks: (on) => void (losingAcks = on),
    rateLimitNextPost: (seconds = 1, count = 1) => void (limited = { seconds, count }),
    refuseAuth: (count) => void (authRefusals = count),
    reset() {
      messages = [threadParent];
      botPosts = [];
      botUploads = [];
      envelopes = [];
      calls.length = 0;
      unknownMethods.length = 0;
      stats.httpDeliveries.length = 0;
      Object.assign(stats, { connections: 0, acks: 0, redeliveries: 0, pings: 0, rateLimited: 0 });
      limited = undefined;
      loseNextAck = false;
      losingAcks = false;
      httpUrl = undefined;
    },
    async close() {
      for (const timer of timers) clearTimeout(timer);
      for (const conn of conns) conn.ws.terminate();
      wss.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  return peer;
}

/** What Slack shows for a message's mrkdwn: markup hidden, entities decoded, links as their labels. */
export function visibleText(mrkdwn: string): string {
  return mrkdwn
    .split(/(```[\s\S]*?```)/)
    .map((part) => {
      if (part.startsWith('```') && part.endsWith('```') && part.length >= 6) return part.slice(3, -3).replace(/^\n/, '').replace(/\n$/, '');
      return part
        .replace(/`([^`\n]+)`/g, '$1')
        .replace(/<([^<>|]+)\|([^<>]*)>/g, '$2')
        .replace(/<([^<>]+)>/g, (_w, target: string) => (target.startsWith('@') || target.startsWith('#') ? target : target.startsWith('!') ? `@${target.slice(1)}` : target.replace(/^mailto:/, '')))
        .replace(/(^|[\s(])([*_~])(?=\S)([^\n]*?\S)\2(?=$|[\s).,:;!?])/g, '$1$3');
    })
    .join('')
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&amp;/g, '&');
}
