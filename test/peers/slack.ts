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
 * refuse the next auth.test calls, fail the next conversations.replies, slow users.info down,
 * send files as Slack Connect stubs.
 *
 * As strict as Slack where the channel's correctness depends on it:
 * - The 3-second ack (https://api.slack.com/apis/events-api#responding, "Responding to
 *   events"; #retries, "Retries"): an event not acknowledged within 3 s — HTTP: no 2xx
 *   answer; Socket Mode: no `{envelope_id}` back (https://api.slack.com/apis/connections/socket-implement,
 *   "Acknowledge events") — is sent again: at once, after 1 minute, after 5 minutes, then Slack
 *   gives up (`stats.lost`). HTTP retries carry `X-Slack-Retry-Num` (1–3) and
 *   `X-Slack-Retry-Reason` (`http_timeout` when no answer came in time, `http_error` for a
 *   non-2xx answer, `connection_failed`); Socket Mode envelopes carry `retry_attempt` and
 *   `retry_reason`. A timed-out HTTP request is not cancelled: its late answer still counts,
 *   but the retry has gone already. `ackTimeoutMs` / `retryDelaysMs` compress this for tests.
 * - Rate limits (https://api.slack.com/docs/rate-limits): chat.postMessage "1 message per
 *   second per channel", bursts allowed for a short while (Slack does not publish the burst:
 *   5 here); chat.update is Tier 3 ("50+ per minute", per method per workspace). Past a limit:
 *   HTTP 429 with `Retry-After: <seconds>` and `{ok:false, error:"ratelimited"}`. Every 429
 *   announces a wait for its chat (chat.postMessage: that channel; chat.update: every channel
 *   of the workspace); `callsInsideWait(chat)` counts the calls that still reached that chat
 *   before the wait was over.
 * - Slack Connect files (https://api.slack.com/types/file, "Slack Connect" /
 *   `file_access: "check_file_info"`): an event's file object may be a stub
 *   `{id, mode: "file_access", file_access: "check_file_info", created: 0, timestamp: 0, user: ""}`
 *   without names or URLs; files.info (https://api.slack.com/methods/files.info) gives the
 *   whole object.
 *
 * Shapes are typed by Slack's own typings: events by @slack/types (GenericMessageEvent,
 * FileShareMessageEvent, AppMentionEvent), the Events API body by Bolt's EnvelopedEvent, Web
 * API answers by @slack/web-api's response types. The Socket Mode envelope has no official
 * type; its fields follow the Socket Mode docs above.
 */
import { createHmac } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { EnvelopedEvent } from '@slack/bolt';
import type { AppMentionEvent, FileShareMessageEvent, GenericMessageEvent } from '@slack/types';
import type {
  ChatPostMessageArguments,
  ChatUpdateArguments,
  ConversationsInfoArguments,
  ConversationsRepliesArguments,
  FilesCompleteUploadExternalArguments,
  FilesGetUploadURLExternalArguments,
  FilesInfoArguments,
  UsersInfoArguments,
  AppsConnectionsOpenResponse,
  AuthTestResponse,
  ChatPostMessageResponse,
  ChatUpdateResponse,
  ConversationsInfoResponse,
  ConversationsRepliesResponse,
  FilesCompleteUploadExternalResponse,
  FilesGetUploadURLExternalResponse,
  FilesInfoResponse,
  UsersInfoResponse,
  WebAPICallResult,
} from '@slack/web-api';
import { WebSocketServer, type WebSocket } from 'ws';
import sharp from 'sharp';
import type { BotMessage, ChatPeer, PeerUser, Place } from '../contracts/chat-channel.ts';
import { imageDimensions } from '../support/photos.ts';

const TEAM = 'T0TEAM';
const APP = 'A0APP';
const BOT_USER = 'U0BOT';
const BOT_ID = 'B0BOT';
const BOT_NAME = 'testbot';
const GROUP = 'C0GENERAL';
const USERS: Record<PeerUser, string> = { alice: 'U0ALICE', bob: 'U0BOB', mallory: 'U0MALLORY' };
const DMS: Record<PeerUser, string> = { alice: 'D0ALICE', bob: 'D0BOB', mallory: 'D0MALLORY' };

/** A file object of a message event (@slack/types does not export its `File`). */
type SlackFile = NonNullable<FileShareMessageEvent['files']>[number];
/** What Slack sends a person's message as. */
type PersonEvent = GenericMessageEvent | FileShareMessageEvent;
/** The bot's own post, echoed to it (chat.postMessage by an app: a message with bot_id and app_id). */
type BotEcho = Omit<GenericMessageEvent, 'subtype'> & { subtype?: undefined; bot_id: string; app_id: string };
/** Every event this peer delivers. */
export type PeerEvent = PersonEvent | AppMentionEvent | BotEcho;
/** An Events API body. */
export type PeerCallback = EnvelopedEvent<PeerEvent>;
/** A Socket Mode `events_api` envelope (https://api.slack.com/apis/connections/socket-implement; no official type). */
interface SocketEnvelope {
  readonly envelope_id: string;
  readonly type: 'events_api';
  readonly accepts_response_payload: boolean;
  readonly retry_attempt: number;
  readonly retry_reason: string;
  readonly payload: PeerCallback;
}

/** Keys of every member of a union of argument types. */
type Keys<T> = T extends unknown ? keyof T : never;
/**
 * A Web API request as it arrives (form fields or JSON, every value a string here), keyed by
 * @slack/web-api's own argument types: reading a field Slack does not define fails to compile.
 */
type Form<T> = { readonly [K in Keys<T> & string]?: string };

/** Slack's error answer (`{ok: false, error}`, https://api.slack.com/web#evaluating_responses). */
interface SlackErrorAnswer {
  readonly ok: false;
  readonly error: string;
}

/** Slack's retry schedule after a missed ack: at once, after 1 minute, after 5 minutes. */
export const SLACK_RETRY_DELAYS_MS: readonly number[] = [0, 60_000, 300_000];
/** Slack's ack deadline. */
export const SLACK_ACK_TIMEOUT_MS = 3000;

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
  readonly event: PeerEvent;
  /** Deliveries so far (the first one and its retries). */
  deliveries: number;
  acked: boolean;
  /** Slack gave up: no ack after the last retry. */
  lost: boolean;
  /** When the first delivery went out (performance.now()). */
  firstSentAt?: number;
  /** A retry is waiting for its time (or for a connection). */
  retryDue: boolean;
  timer?: NodeJS.Timeout;
}

export interface SlackPeerStats {
  connections: number;
  acks: number;
  /** Events sent again (retry_attempt / X-Slack-Retry-Num > 0). */
  redeliveries: number;
  pings: number;
  rateLimited: number;
  /** Events Slack gave up on: never acknowledged, not even after the third retry. */
  lost: number;
  /** Milliseconds from an event's first delivery to its first ack (Socket Mode ack or HTTP 2xx), in ack order. */
  readonly ackLatencies: number[];
  /** HTTP event POSTs and the status each got (0: no answer). */
  readonly httpDeliveries: Array<{ readonly eventId: string; readonly retry: number; readonly status: number; readonly reason?: string }>;
}

/** Rate limits of the Web API methods that post and edit (see the file comment). */
export interface SlackRateLimits {
  /** chat.postMessage per channel. @default 1 */
  readonly postsPerSecond: number;
  /** @default 5 */
  readonly postBurst: number;
  /** chat.update per workspace (Tier 3). @default 50 */
  readonly updatesPerMinute: number;
  /** @default 50 */
  readonly updateBurst: number;
}

export interface SlackPeerOptions {
  /** @default 2000 */
  readonly pingIntervalMs?: number;
  /** How long Slack waits for an ack. @default {@link SLACK_ACK_TIMEOUT_MS} */
  readonly ackTimeoutMs?: number;
  /** When the three retries go out after a missed ack. @default {@link SLACK_RETRY_DELAYS_MS} */
  readonly retryDelaysMs?: readonly number[];
  /** users.info answers after this long. @default 0 */
  readonly usersInfoDelayMs?: number;
  /** Slack's limits, partly overridden, or 'off' (benchmarks of the channel itself). */
  readonly rateLimits?: Partial<SlackRateLimits> | 'off';
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
  sendHttpEvent(body: object, options?: { retryNum?: number; retryReason?: string; badSignature?: boolean; timestamp?: number }): Promise<{ status: number; body: string }>;
  /** An event_callback body as Slack would POST it for a person's message. */
  eventBody(user: PeerUser, place: Place, text: string): PeerCallback;
  /** Delivers an event the way the bot is connected, with Slack's ack deadline and retries. */
  emit(event: PeerEvent): Promise<void>;
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
  /** While on, acks are lost on the way (envelopes stay un-acked and are retried). */
  loseAcks(on: boolean): void;
  /** The next `count` chat.postMessage calls get a 429 with Retry-After (besides the limits). */
  rateLimitNextPost(retryAfterSeconds?: number, count?: number): void;
  /** The next `count` calls of `method` get a 429 with Retry-After (besides the limits). */
  rateLimitNext(method: string, retryAfterSeconds?: number, count?: number): void;
  /**
   * Calls (chat.postMessage, chat.update, files.completeUploadExternal) that reached `chat`
   * while it was inside a wait a 429 had announced (Retry-After not yet over): should be 0 for
   * a client that honours Retry-After.
   */
  callsInsideWait(chat: string): number;
  /**
   * Files the bot shared in a place, as Slack's file object shows them (https://api.slack.com/types/file:
   * `filetype` and `mimetype` — Slack types a file by its name's extension, "File types" table —,
   * `original_w` / `original_h` for images). `inline`: shown as an image in the conversation (an
   * image type whose bytes really decode as an image; else a file card to download).
   */
  botUploadsIn(place: Place): ReadonlyArray<{ readonly name: string; readonly filetype: string; readonly mimetype: string; readonly width?: number; readonly height?: number; readonly inline: boolean }>;
  /** The next `count` auth.test calls are answered `invalid_auth` (kept across `reset()` until used). */
  refuseAuth(count: number): void;
  /** The next `count` conversations.replies calls fail: HTTP 500, or a 429 with Retry-After 1. */
  failReplies(count: number, how?: 'http_500' | 'ratelimited'): void;
  /** users.info answers after this long from now on. */
  usersInfoDelay(ms: number): void;
  /** While on, files in events are Slack Connect stubs (`file_access: "check_file_info"`). */
  fileStubs(on: boolean): void;
  /** The bot posts into a place outside the bot's own process (as it did before a restart). */
  botPostedIn(place: Place, text: string): void;
}

interface Conn {
  readonly ws: WebSocket;
  silent: boolean;
  /** Slack stops delivering on a connection it asked to disconnect. */
  retiring: boolean;
  readonly pinger: NodeJS.Timeout;
}

/** A token bucket (Slack's limits allow short bursts over the rate). */
class Bucket {
  readonly perMs: number;
  readonly burst: number;
  #tokens: number;
  #at = performance.now();
  constructor(perMs: number, burst: number) {
    this.perMs = perMs;
    this.burst = burst;
    this.#tokens = burst;
  }
  /** Takes a token; when none is left, the seconds until one is (Retry-After, at least 1). */
  take(): number | undefined {
    const now = performance.now();
    this.#tokens = Math.min(this.burst, this.#tokens + (now - this.#at) * this.perMs);
    this.#at = now;
    if (this.#tokens >= 1) {
      this.#tokens--;
      return undefined;
    }
    return Math.max(1, Math.ceil((1 - this.#tokens) / this.perMs / 1000));
  }
}

export async function startSlackPeer(options: SlackPeerOptions = {}): Promise<SlackPeer> {
  const botToken = 'xoxb-peer-bot-token';
  const appToken = 'xapp-peer-app-token';
  const signingSecret = 'peer-signing-secret';
  const pingIntervalMs = options.pingIntervalMs ?? 2000;
  const ackTimeoutMs = options.ackTimeoutMs ?? SLACK_ACK_TIMEOUT_MS;
  const retryDelaysMs = options.retryDelaysMs ?? SLACK_RETRY_DELAYS_MS;
  const limits: SlackRateLimits | undefined =
    options.rateLimits === 'off' ? undefined : { postsPerSecond: 1, postBurst: 5, updatesPerMinute: 50, updateBurst: 50, ...options.rateLimits };

  let clock = 0;
  const nextTs = (): string => {
    clock = Math.max(clock + 1, Date.now() * 1000);
    return `${Math.floor(clock / 1_000_000)}.${String(clock % 1_000_000).padStart(6, '0')}`;
  };
  let counter = 0;
  const nextId = (prefix: string): string => `${prefix}${(++counter).toString(36).toUpperCase().padStart(6, '0')}`;

  let messages: StoredMessage[] = [];
  let botPosts: StoredMessage[] = [];
  let botUploads: Array<{ channel: string; thread?: string; name: string; filetype: string; mimetype: string; width?: number; height?: number; inline: boolean }> = [];
  const uploads = new Map<string, { name: string; length: number; data?: Buffer; image?: { width: number; height: number } }>();
  const files = new Map<string, { object: SlackFile; data: Uint8Array }>();
  let envelopes: EnvelopeRecord[] = [];
  const conns = new Set<Conn>();
  const tickets = new Set<string>();
  const unknownMethods: string[] = [];
  const calls: Array<{ method: string; body: Record<string, string> }> = [];
  const stats: SlackPeerStats = { connections: 0, acks: 0, redeliveries: 0, pings: 0, rateLimited: 0, lost: 0, ackLatencies: [], httpDeliveries: [] };
  let limited = new Map<string, { seconds: number; count: number }>();
  let authRefusals = 0;
  let repliesFailing: { count: number; how: 'http_500' | 'ratelimited' } | undefined;
  let stubs = false;
  let usersInfoDelayMs = options.usersInfoDelayMs ?? 0;
  let loseNextAck = false;
  let losingAcks = false;
  let httpUrl: string | undefined;
  const timers = new Set<NodeJS.Timeout>();
  let postBuckets = new Map<string, Bucket>();
  let updateBucket = limits ? new Bucket(limits.updatesPerMinute / 60_000, limits.updateBurst) : undefined;
  /** Until when (performance.now()) each chat is inside an announced wait; '*' = the whole workspace. */
  let waits = new Map<string, number>();
  let insideWait = new Map<string, number>();

  const later = (ms: number, run: () => void): NodeJS.Timeout => {
    const timer = setTimeout(() => {
      timers.delete(timer);
      run();
    }, ms);
    timers.add(timer);
    return timer;
  };

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

  // ---- acks, the deadline and the retries (both transports) ----
  function acked(envelope: EnvelopeRecord): void {
    if (envelope.acked) return;
    envelope.acked = true;
    envelope.retryDue = false;
    stats.acks++;
    if (envelope.firstSentAt !== undefined) stats.ackLatencies.push(performance.now() - envelope.firstSentAt);
    if (envelope.timer) clearTimeout(envelope.timer);
  }

  /** Delivery `attempt` went out: without an ack within the deadline, the next retry is scheduled. */
  function awaitAck(envelope: EnvelopeRecord): void {
    if (envelope.timer) clearTimeout(envelope.timer);
    envelope.timer = later(ackTimeoutMs, () => missed(envelope, httpUrl === undefined ? 'timeout' : 'http_timeout'));
  }

  /** No ack in time (or a refusal): the next retry, or Slack gives up after the third. */
  function missed(envelope: EnvelopeRecord, reason: string): void {
    if (envelope.acked || envelope.lost || envelope.retryDue) return;
    if (envelope.timer) clearTimeout(envelope.timer);
    const retry = envelope.deliveries; // the first delivery is attempt 0
    if (retry > retryDelaysMs.length) {
      envelope.lost = true;
      stats.lost++;
      return;
    }
    envelope.retryDue = true;
    envelope.timer = later(retryDelaysMs[retry - 1]!, () => {
      envelope.retryDue = false;
      if (envelope.acked) return;
      send(envelope, reason);
    });
  }

  function send(envelope: EnvelopeRecord, reason: string): void {
    if (httpUrl === undefined) {
      const conn = liveConn();
      if (!conn) {
        envelope.retryDue = true; // waits for the next connection
        return;
      }
      deliverSocket(envelope, conn, reason);
    } else void deliverHttp(envelope, reason);
  }

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
    // Envelopes never delivered (no connection then), and retries that came due while none was up.
    for (const envelope of envelopes) {
      if (envelope.acked || envelope.lost) continue;
      if (envelope.deliveries === 0) deliverSocket(envelope, conn, '');
      else if (envelope.retryDue && (envelope.timer === undefined || !timers.has(envelope.timer))) {
        envelope.retryDue = false;
        deliverSocket(envelope, conn, 'timeout');
      }
    }
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
    acked(envelope);
  }

  const liveConn = (): Conn | undefined => [...conns].reverse().find((c) => !c.silent && !c.retiring && c.ws.readyState === c.ws.OPEN);

  function deliverSocket(envelope: EnvelopeRecord, conn: Conn, reason: string): void {
    const attempt = envelope.deliveries++;
    if (attempt > 0) stats.redeliveries++;
    envelope.firstSentAt ??= performance.now();
    const frame: SocketEnvelope = {
      envelope_id: envelope.id,
      type: 'events_api',
      accepts_response_payload: false,
      retry_attempt: attempt,
      retry_reason: attempt > 0 ? reason : '',
      payload: callback(envelope.event, envelope.eventId),
    };
    conn.ws.send(JSON.stringify(frame));
    awaitAck(envelope);
  }

  function callback(event: PeerEvent, eventId: string): PeerCallback {
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
  async function emit(event: PeerEvent): Promise<void> {
    const envelope: EnvelopeRecord = { id: `env-${nextId('')}`, eventId: nextId('Ev'), event, deliveries: 0, acked: false, lost: false, retryDue: false };
    envelopes.push(envelope);
    if (httpUrl === undefined) {
      const conn = liveConn();
      if (conn) deliverSocket(envelope, conn, '');
      return;
    }
    await deliverHttp(envelope, '');
  }

  // ---- HTTP Events API ----
  /** POSTs an event; resolves once answered or the deadline passed (the request itself runs on). */
  async function deliverHttp(envelope: EnvelopeRecord, reason: string): Promise<void> {
    const retry = envelope.deliveries++;
    if (retry > 0) stats.redeliveries++;
    envelope.firstSentAt ??= performance.now();
    awaitAck(envelope);
    // A late failure of an earlier attempt says nothing about the current one.
    const current = (): boolean => envelope.deliveries === retry + 1;
    const answered = sendHttpEvent(callback(envelope.event, envelope.eventId), retry > 0 ? { retryNum: retry, retryReason: reason } : {}).then(
      (response) => {
        if (response.status >= 200 && response.status < 300) acked(envelope);
        else if (current()) missed(envelope, 'http_error');
      },
      () => current() && missed(envelope, 'connection_failed'),
    );
    await Promise.race([answered, new Promise((resolve) => later(ackTimeoutMs, () => resolve(undefined)))]);
  }

  async function sendHttpEvent(body: object, opts: { retryNum?: number; retryReason?: string; badSignature?: boolean; timestamp?: number } = {}): Promise<{ status: number; body: string }> {
    if (httpUrl === undefined) throw new Error('useHttp(url) first');
    const raw = JSON.stringify(body);
    const eventId = String((body as { event_id?: unknown }).event_id ?? '');
    const timestamp = String(opts.timestamp ?? Math.floor(Date.now() / 1000));
    const signature = `v0=${createHmac('sha256', opts.badSignature ? 'not-the-secret' : signingSecret).update(`v0:${timestamp}:${raw}`).digest('hex')}`;
    const headers: Record<string, string> = { 'content-type': 'application/json', 'x-slack-request-timestamp': timestamp, 'x-slack-signature': signature };
    if (opts.retryNum) Object.assign(headers, { 'x-slack-retry-num': String(opts.retryNum), 'x-slack-retry-reason': opts.retryReason ?? 'http_error' });
    const reason = opts.retryNum ? { reason: opts.retryReason ?? 'http_error' } : {};
    try {
      const response = await fetch(httpUrl, { method: 'POST', headers, body: raw, signal: AbortSignal.timeout(30_000) });
      const text = await response.text();
      stats.httpDeliveries.push({ eventId, retry: opts.retryNum ?? 0, status: response.status, ...reason });
      return { status: response.status, body: text };
    } catch (error) {
      stats.httpDeliveries.push({ eventId, retry: opts.retryNum ?? 0, status: 0, ...reason });
      throw error;
    }
  }

  // ---- people ----
  function personMessage(user: PeerUser, place: Place, text: string, mention: boolean): { message: StoredMessage; event: GenericMessageEvent } {
    const channel = channelId(place);
    const thread = place.kind === 'thread' ? threadParent.ts : undefined;
    const message: StoredMessage = { ts: nextTs(), channel, user: USERS[user], text: mention ? `<@${BOT_USER}> ${text}` : text, edits: 0, ...(thread ? { thread_ts: thread } : {}) };
    const event: GenericMessageEvent = {
      type: 'message',
      subtype: undefined,
      channel,
      user: message.user,
      text: message.text,
      ts: message.ts,
      event_ts: message.ts,
      team: TEAM,
      channel_type: place.kind === 'dm' ? 'im' : 'channel',
      ...(thread ? { thread_ts: thread, parent_user_id: threadParent.user } : {}),
    };
    return { message, event };
  }

  async function postPerson(user: PeerUser, place: Place, text: string, mention: boolean, files?: SlackFile[]): Promise<void> {
    const { message, event } = personMessage(user, place, text, mention);
    messages.push(message);
    if (files) {
      const { subtype: _none, ...rest } = event;
      const shared: FileShareMessageEvent = { ...rest, subtype: 'file_share', text: event.text ?? '', files, upload: true };
      await emit(shared);
    } else await emit(event);
    if (mention && place.kind !== 'dm') {
      const mentioned: AppMentionEvent = {
        type: 'app_mention',
        user: event.user,
        text: event.text ?? '',
        ts: event.ts,
        channel: event.channel,
        event_ts: event.event_ts,
        team: TEAM,
        ...(event.thread_ts ? { thread_ts: event.thread_ts } : {}),
      };
      await emit(mentioned);
    }
  }

  // ---- rate limits ----
  /** The seconds to wait when this call is over a limit (a 429 is then due), undefined when it may go. */
  function overLimit(method: string, chat: string | undefined): { seconds: number; scope: string } | undefined {
    const forced = limited.get(method);
    if (forced && forced.count > 0) {
      forced.count--;
      return { seconds: forced.seconds, scope: method === 'chat.postMessage' && chat !== undefined ? chat : '*' };
    }
    if (!limits || chat === undefined) return undefined;
    if (method === 'chat.postMessage') {
      let bucket = postBuckets.get(chat);
      if (!bucket) postBuckets.set(chat, (bucket = new Bucket(limits.postsPerSecond / 1000, limits.postBurst)));
      const seconds = bucket.take();
      return seconds === undefined ? undefined : { seconds, scope: chat };
    }
    if (method === 'chat.update') {
      const seconds = updateBucket!.take();
      return seconds === undefined ? undefined : { seconds, scope: '*' };
    }
    return undefined;
  }

  /** A call reached `chat`: counted when the chat (or the whole workspace) is inside an announced wait. */
  function reached(chat: string): void {
    const now = performance.now();
    if ((waits.get(chat) ?? 0) > now || (waits.get('*') ?? 0) > now) insideWait.set(chat, (insideWait.get(chat) ?? 0) + 1);
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
      // Slack processes the file after the upload (thumbnails, original_w / original_h of an image).
      const meta = await sharp(data).metadata().catch(() => undefined);
      if (meta?.width && meta.height) upload.image = { width: meta.width, height: meta.height };
      return void res.writeHead(200, { 'content-type': 'text/plain' }).end(`OK - ${data.length}`);
    }
    if (req.method === 'GET' && url.pathname.startsWith('/files-pri/')) {
      const file = files.get(url.pathname.split('/')[2] ?? '');
      if (req.headers.authorization !== `Bearer ${botToken}`) return void res.writeHead(200, { 'content-type': 'text/html' }).end('<html>sign in</html>');
      if (!file) return void res.writeHead(404).end();
      return void res.writeHead(200, { 'content-type': file.object.mimetype, 'content-length': file.data.length }).end(Buffer.from(file.data));
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
    const chat = method === 'files.completeUploadExternal' ? body.channel_id : method.startsWith('chat.') ? body.channel : undefined;
    if (chat !== undefined) reached(chat);
    const over = overLimit(method, chat);
    if (over) {
      stats.rateLimited++;
      const until = performance.now() + over.seconds * 1000;
      waits.set(over.scope, Math.max(waits.get(over.scope) ?? 0, until));
      return json(res, 429, { ok: false, error: 'ratelimited' }, { 'retry-after': String(over.seconds) });
    }
    if (method === 'users.info' && usersInfoDelayMs > 0) await new Promise((resolve) => later(usersInfoDelayMs, () => resolve(undefined)));
    if (method === 'conversations.replies' && repliesFailing && repliesFailing.count > 0) {
      repliesFailing.count--;
      if (repliesFailing.how === 'ratelimited') return json(res, 429, { ok: false, error: 'ratelimited' }, { 'retry-after': '1' });
      return json(res, 500, { ok: false, error: 'internal_error' });
    }
    json(res, 200, api(method, body));
  }

  /** Every answer: a method's own response type, or Slack's error shape. */
  function api(method: string, body: Record<string, string>): WebAPICallResult | SlackErrorAnswer {
    const known = (channel: string | undefined): boolean => channel === GROUP || Object.values(DMS).includes(channel ?? '');
    switch (method) {
      case 'auth.test': {
        if (authRefusals > 0) {
          authRefusals--;
          return { ok: false, error: 'invalid_auth' };
        }
        const answer: AuthTestResponse = { ok: true, url: 'https://peer.slack.com/', team: 'Peer', user: BOT_NAME, team_id: TEAM, user_id: BOT_USER, bot_id: BOT_ID, is_enterprise_install: false };
        return answer;
      }
      case 'apps.connections.open': {
        const ticket = nextId('tk');
        tickets.add(ticket);
        const answer: AppsConnectionsOpenResponse = { ok: true, url: `${base.replace('http:', 'ws:')}/link/?ticket=${ticket}&app_id=${APP}` };
        return answer;
      }
      case 'chat.postMessage': {
        const args: Form<ChatPostMessageArguments> = body;
        if (!known(args.channel)) return { ok: false, error: 'channel_not_found' };
        if (!args.text) return { ok: false, error: 'no_text' };
        if (args.text.length > 40_000) return { ok: false, error: 'msg_too_long' };
        const message = storeBotPost(args.channel!, args.text, args.thread_ts);
        // Slack echoes the bot's own message to it as an event, as it does every message in a channel it is in.
        const echo: BotEcho = {
          type: 'message',
          channel: message.channel,
          user: BOT_USER,
          bot_id: BOT_ID,
          app_id: APP,
          text: message.text,
          ts: message.ts,
          event_ts: message.ts,
          team: TEAM,
          channel_type: message.channel === GROUP ? 'channel' : 'im',
          ...(message.thread_ts ? { thread_ts: message.thread_ts } : {}),
        };
        void emit(echo);
        const answer: ChatPostMessageResponse = { ok: true, channel: message.channel, ts: message.ts, message: { type: 'message', user: BOT_USER, bot_id: BOT_ID, text: message.text, ts: message.ts } };
        return answer;
      }
      case 'chat.update': {
        const args: Form<ChatUpdateArguments> = body;
        const message = messages.find((m) => m.channel === args.channel && m.ts === args.ts);
        if (!message) return { ok: false, error: 'message_not_found' };
        if (message.user !== BOT_USER) return { ok: false, error: 'cant_update_message' };
        if (!args.text) return { ok: false, error: 'no_text' };
        message.text = args.text;
        message.edits++;
        const answer: ChatUpdateResponse = { ok: true, channel: message.channel, ts: message.ts, text: message.text };
        return answer;
      }
      case 'conversations.replies': {
        const args: Form<ConversationsRepliesArguments> = body;
        if (!known(args.channel)) return { ok: false, error: 'channel_not_found' };
        const thread = messages.filter((m) => m.channel === args.channel && (m.ts === args.ts || m.thread_ts === args.ts));
        if (thread.length === 0) return { ok: false, error: 'thread_not_found' };
        const answer: ConversationsRepliesResponse = {
          ok: true,
          has_more: false,
          messages: thread.map((m) => ({ type: 'message', user: m.user, text: m.text, ts: m.ts, ...(m.thread_ts ? { thread_ts: m.thread_ts } : {}), ...(m.bot_id ? { bot_id: m.bot_id } : {}) })),
        };
        return answer;
      }
      case 'conversations.info': {
        const args: Form<ConversationsInfoArguments> = body;
        if (!known(args.channel)) return { ok: false, error: 'channel_not_found' };
        const answer: ConversationsInfoResponse = { ok: true, channel: args.channel === GROUP ? { id: GROUP, name: 'general', is_channel: true, is_member: true } : { id: args.channel!, is_im: true } };
        return answer;
      }
      case 'users.info': {
        const args: Form<UsersInfoArguments> = body;
        const name = (Object.keys(USERS) as PeerUser[]).find((u) => USERS[u] === args.user);
        if (!name) return { ok: false, error: 'user_not_found' };
        const real = name[0]!.toUpperCase() + name.slice(1);
        const answer: UsersInfoResponse = { ok: true, user: { id: args.user!, team_id: TEAM, name, real_name: real, profile: { display_name: name, real_name: real } } };
        return answer;
      }
      case 'files.info': {
        const args: Form<FilesInfoArguments> = body;
        const file = files.get(args.file ?? '');
        if (!file) return { ok: false, error: 'file_not_found' };
        const answer: FilesInfoResponse = { ok: true, file: { ...file.object, name: file.object.name ?? undefined, title: file.object.title ?? undefined } as FilesInfoResponse['file'] };
        return answer;
      }
      case 'files.getUploadURLExternal': {
        const args: Form<FilesGetUploadURLExternalArguments> = body;
        const length = Number(args.length);
        if (!args.filename || !Number.isFinite(length)) return { ok: false, error: 'invalid_arguments' };
        const id = nextId('F');
        uploads.set(id, { name: args.filename, length });
        const answer: FilesGetUploadURLExternalResponse = { ok: true, upload_url: `${base}/upload/${id}`, file_id: id };
        return answer;
      }
      case 'files.completeUploadExternal': {
        const args: Form<FilesCompleteUploadExternalArguments> = body;
        const list = JSON.parse(args.files ?? '[]') as Array<{ id: string; title?: string }>;
        const done = list.map((f) => ({ f, upload: uploads.get(f.id) }));
        if (done.some(({ upload }) => !upload?.data)) return { ok: false, error: 'file_not_found' };
        if (args.channel_id && !known(args.channel_id)) return { ok: false, error: 'channel_not_found' };
        for (const { upload } of done) {
          if (!args.channel_id) continue;
          const type = fileType(upload!.name);
          const image = type.mimetype.startsWith('image/') ? upload!.image : undefined;
          botUploads.push({
            channel: args.channel_id, ...(args.thread_ts ? { thread: args.thread_ts } : {}), name: upload!.name, ...type,
            ...(image ? { width: image.width, height: image.height } : {}), inline: image !== undefined,
          });
        }
        const answer: FilesCompleteUploadExternalResponse = { ok: true, files: done.map(({ f, upload }) => ({ id: f.id, name: upload!.name, title: f.title ?? upload!.name })) };
        return answer;
      }
      default:
        unknownMethods.push(method);
        return { ok: false, error: 'unknown_method' };
    }
  }

  function storeBotPost(channel: string, text: string, thread: string | undefined): StoredMessage {
    const message: StoredMessage = { ts: nextTs(), channel, user: BOT_USER, bot_id: BOT_ID, text, edits: 0, ...(thread ? { thread_ts: thread } : {}) };
    messages.push(message);
    botPosts.push(message);
    return message;
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
    emit,
    async post(user, place, text, opts = {}) {
      await postPerson(user, place, text, opts.mention === true);
    },
    async postFile(user, place, file, caption) {
      const id = nextId('F');
      // An image's file object carries its pixel size (original_w / original_h of the File in
      // @slack/types' message events); the peer gives them only for bytes that decode as an image.
      const size = file.mime.startsWith('image/') ? await imageDimensions(file.data) : undefined;
      const object: SlackFile = {
        ...(size ? { original_w: size.width, original_h: size.height } : {}),
        id,
        created: Math.floor(Date.now() / 1000),
        name: file.name,
        title: file.name,
        mimetype: file.mime,
        filetype: file.name.split('.').pop() ?? '',
        pretty_type: file.mime,
        user: USERS[user],
        editable: false,
        size: file.data.length,
        mode: 'hosted',
        is_external: false,
        external_type: null,
        is_public: place.kind !== 'dm',
        public_url_shared: false,
        display_as_bot: false,
        username: null,
        url_private: `${base}/files-pri/${id}/${file.name}`,
        url_private_download: `${base}/files-pri/${id}/download/${file.name}`,
        permalink: `${base}/files/${id}`,
        channels: place.kind === 'dm' ? null : [GROUP],
        groups: null,
      };
      files.set(id, { object, data: file.data });
      // A Slack Connect stub: no name, size or URLs until files.info. @slack/types' File has no
      // such variant (its fields are not optional), so the stub is cast: this is Slack's shape.
      const stub = { id, mode: 'file_access', file_access: 'check_file_info', created: 0, timestamp: 0, user: '' } as unknown as SlackFile;
      await postPerson(user, place, caption ?? '', false, [stubs ? stub : object]);
    },
    botMessages: (place) => botPosts.filter((m) => inPlace(place, m.channel, m.thread_ts)).map((m): BotMessage => ({ text: visibleText(m.text), edits: m.edits })),
    rawBotMessages: (place) => botPosts.filter((m) => inPlace(place, m.channel, m.thread_ts)).map((m) => m.text),
    botFiles: (place) => botUploads.filter((u) => inPlace(place, u.channel, u.thread)).map((u) => u.name),
    botUploadsIn: (place) => botUploads.filter((u) => inPlace(place, u.channel, u.thread)).map(({ channel: _c, thread: _t, ...upload }) => upload),
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
    rateLimitNextPost: (seconds = 1, count = 1) => void limited.set('chat.postMessage', { seconds, count }),
    rateLimitNext: (method, seconds = 1, count = 1) => void limited.set(method, { seconds, count }),
    callsInsideWait: (chat) => insideWait.get(chat) ?? 0,
    // chat.update's Tier 3 limit is the workspace's: the next edit is refused, and a call to the place inside the wait counts.
    flood: {
      waitNext: (_place, ms) => void limited.set('chat.update', { seconds: ms / 1000, count: 1 }),
      callsInsideWait: (place) => insideWait.get(channelId(place)) ?? 0,
    },
    refuseAuth: (count) => void (authRefusals = count),
    failReplies: (count, how = 'http_500') => void (repliesFailing = { count, how }),
    fileStubs: (on) => void (stubs = on),
    usersInfoDelay: (ms) => void (usersInfoDelayMs = ms),
    botPostedIn(place, text) {
      storeBotPost(channelId(place), text, place.kind === 'thread' ? threadParent.ts : undefined);
    },
    reset() {
      for (const envelope of envelopes) if (envelope.timer) clearTimeout(envelope.timer);
      messages = [threadParent];
      botPosts = [];
      botUploads = [];
      envelopes = [];
      calls.length = 0;
      unknownMethods.length = 0;
      stats.httpDeliveries.length = 0;
      stats.ackLatencies.length = 0;
      Object.assign(stats, { connections: 0, acks: 0, redeliveries: 0, pings: 0, rateLimited: 0, lost: 0 });
      limited = new Map();
      repliesFailing = undefined;
      stubs = false;
      usersInfoDelayMs = options.usersInfoDelayMs ?? 0;
      loseNextAck = false;
      losingAcks = false;
      httpUrl = undefined;
      postBuckets = new Map();
      updateBucket = limits ? new Bucket(limits.updatesPerMinute / 60_000, limits.updateBurst) : undefined;
      waits = new Map();
      insideWait = new Map();
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

/** Slack's "File types" (https://api.slack.com/types/file#types), the ones this peer meets: by the name's extension; anything else is "binary". */
const FILE_TYPES: Readonly<Record<string, { filetype: string; mimetype: string }>> = {
  png: { filetype: 'png', mimetype: 'image/png' },
  jpg: { filetype: 'jpg', mimetype: 'image/jpeg' },
  jpeg: { filetype: 'jpg', mimetype: 'image/jpeg' },
  gif: { filetype: 'gif', mimetype: 'image/gif' },
  webp: { filetype: 'webp', mimetype: 'image/webp' },
  pdf: { filetype: 'pdf', mimetype: 'application/pdf' },
  txt: { filetype: 'text', mimetype: 'text/plain' },
};

function fileType(name: string): { filetype: string; mimetype: string } {
  const ext = /\.([A-Za-z0-9]+)$/.exec(name)?.[1]?.toLowerCase();
  return (ext ? FILE_TYPES[ext] : undefined) ?? { filetype: 'binary', mimetype: 'application/octet-stream' };
}
