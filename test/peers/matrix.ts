/**
 * A local Matrix homeserver (client-server API) for matrix-js-sdk 43 and the Matrix channel:
 * versions, login (password) / whoami / logout, push rules, capabilities, filters, /sync
 * (long polling on since/timeout, next_batch positions, join/invite/leave sections with state
 * and timeline, inline or stored filters, full_state, limited timelines with prev_batch),
 * /messages (backwards between tokens), join by id or alias, leave / reject an invite (with a
 * reason), room sends (idempotent per access token + txnId, 64 KiB event limit), typing, event
 * lookup, members, state, profiles and media (config, upload within `m.upload.size`;
 * authenticated v1 and legacy v3 download).
 *
 * Built from the spec (matrix-org/matrix-spec, data/api/client-server/*.yaml and
 * data/event-schemas/schema/) and Synapse's defaults (element-hq/synapse); every object it
 * sends and every request it parses is typed by matrix-js-sdk's own types, so a shape that
 * drifts from what the SDK expects fails `tsc`.
 *
 * The server: alice, bob and mallory; a DM room between each of them and the bot; one group
 * room (`#group:localhost`) holding the test thread (a root message by alice); one encrypted
 * room (`#secret:localhost`, m.room.encryption state); one public room the bot is not in
 * (`#lobby:localhost`, to join from config). Rooms made by {@link MatrixPeer.invite} invite
 * the bot; {@link MatrixPeer.inviteEncryptedDm} makes an encrypted DM the way Element does.
 *
 * Places: the DM; the group = the group room's main timeline and every thread but the test
 * thread; the thread = the test thread (rel_type m.thread to the root).
 *
 * Limits, as Synapse's defaults (element-hq/synapse docs/usage/configuration/config_documentation.md):
 * - `rc_message` (per_second 0.2, burst_count 10): every event the bot sends (messages and
 *   m.replace edits alike: both are PUT /rooms/{id}/send) goes through one leaky bucket per
 *   user, so a 429 covers the whole account, not one room. Answered as Synapse does
 *   (synapse/api/errors.py LimitExceededError): 429 M_LIMIT_EXCEEDED with `retry_after_ms` in
 *   the body and a `Retry-After` header in whole seconds, rounded up.
 * - `max_upload_size` 50M: `m.upload.size` in the media config; a larger upload is 413
 *   M_TOO_LARGE.
 * Both are settable ({@link MatrixPeerOptions}) so tests stay fast; the defaults are Synapse's.
 * `reset()` (between the scenarios of one test file) empties the rate limiter too.
 * {@link MatrixPeer.callsInsideWait} counts requests that arrived while a wait the peer
 * announced (a 429's retry_after_ms) had not yet passed.
 *
 * Fault hooks: drop waiting /sync connections, stall /sync, restart the server on the same
 * port (state kept), rate-limit the next sends outright.
 */
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type {
  EventType,
  IContent,
  IInvitedRoom,
  IJoinedRoom,
  ILeftRoom,
  IRoomEvent,
  ISendEventResponse,
  IStrippedState,
  ISyncResponse,
  LoginResponse,
  MatrixError,
  StateEvents,
  UploadResponse,
} from 'matrix-js-sdk';
import type { FileContent, ImageContent } from 'matrix-js-sdk/lib/@types/media.js';
import sharp from 'sharp';
import type { BotMessage, ChatPeer, PeerUser, Place } from '../contracts/chat-channel.ts';
import { imageDimensions } from '../support/photos.ts';
import { KeyError, keyRoute, MatrixKeyServer } from './matrix-keys.ts';

const SERVER = 'localhost';
const BOT = `@switchboard:${SERVER}`;
const BOT_NAME = 'Switchboard';
const USERS: Record<PeerUser, string> = { alice: `@alice:${SERVER}`, bob: `@bob:${SERVER}`, mallory: `@mallory:${SERVER}` };
const NAMES: Record<string, string> = { [BOT]: BOT_NAME, [USERS.alice]: 'Alice', [USERS.bob]: 'Bob', [USERS.mallory]: 'Mallory' };
const MAX_EVENT_BYTES = 65_536;

type Json = Record<string, unknown>;

/** A room event as /sync and /event hand it out (matrix-js-sdk's IRoomEvent; state events carry a state_key). */
export type PeerEvent = IRoomEvent & { readonly state_key?: string };

/** A standard error response (matrix-js-sdk's MatrixError body). */
type ErrorBody = MatrixError['data'];

/**
 * The content of an m.room.encrypted event as a Megolm client sends it (matrix-org/matrix-spec
 * data/event-schemas/schema/m.room.encrypted.yaml: algorithm, ciphertext, and — deprecated since
 * v1.3 but still sent — sender_key and device_id; session_id for Megolm). matrix-js-sdk has no
 * exported type for it: its crypto decrypts inside the Rust crypto module.
 */
export interface MegolmContent extends IContent {
  readonly algorithm: 'm.megolm.v1.aes-sha2';
  readonly ciphertext: string;
  readonly sender_key: string;
  readonly device_id: string;
  readonly session_id: string;
}

/** m.room.encryption (matrix-js-sdk's RoomEncryptionEventContent). */
type EncryptionContent = StateEvents[EventType.RoomEncryption];
/** m.room.member (matrix-js-sdk's RoomMemberEventContent). */
type MemberContent = StateEvents[EventType.RoomMember];

/** Synapse's defaults: element-hq/synapse docs/usage/configuration/config_documentation.md (`rc_message`, `max_upload_size`). */
export const SYNAPSE_RC_MESSAGE = { perSecond: 0.2, burstCount: 10 } as const;
export const SYNAPSE_MAX_UPLOAD = 50 * 1024 * 1024;
/**
 * A bot account its admin exempted from rate limits (Synapse's admin API
 * `POST /_synapse/admin/v1/users/{user}/override_ratelimit` with messages_per_second 0:
 * element-hq/synapse synapse/api/ratelimiting.py skips the limiter for such a user), as the
 * README advises for a bot that answers a lot.
 */
export const SYNAPSE_EXEMPT = { perSecond: 0, burstCount: 0 } as const;

export interface MatrixPeerOptions {
  /** The server has no authenticated media (v1): downloads only from /_matrix/media/v3. */
  readonly legacyMediaOnly?: boolean;
  /** The message rate limit per user (sends and edits); {@link SYNAPSE_EXEMPT} for an exempted account. @default Synapse's rc_message: 0.2/s, bursts of 10 */
  readonly rcMessage?: { readonly perSecond: number; readonly burstCount: number };
  /** `m.upload.size` in the media config, enforced at upload (413 M_TOO_LARGE). @default 50 MiB (Synapse's max_upload_size) */
  readonly maxUploadBytes?: number;
  /** The media config lists `m.upload.size` (the spec leaves every field optional: absent = unknown). @default true */
  readonly advertiseUploadSize?: boolean;
}

/**
 * Synapse's Ratelimiter (element-hq/synapse synapse/api/ratelimiting.py): a "leaky bucket as a
 * meter" per key. Each key's bucket holds the actions done since it was last empty and leaks at
 * `perSecond`; an action is allowed while the bucket holds at most `burstCount - 1`; a refused
 * one does not count, and is told when the next one would be allowed.
 */
class LeakyBucket {
  readonly #rate: number;
  readonly #burst: number;
  readonly #actions = new Map<string, { count: number; start: number }>();
  constructor(rate: number, burst: number) {
    this.#rate = rate;
    this.#burst = burst;
  }
  /** Tries one action of `key` at `nowS` (seconds); when refused, the ms until it would be allowed. */
  take(key: string, nowS: number): { allowed: true } | { allowed: false; retryAfterMs: number } {
    if (this.#rate <= 0) return { allowed: true };
    let { count, start } = this.#actions.get(key) ?? { count: 0, start: nowS };
    const performed = count - (nowS - start) * this.#rate;
    if (performed < 0) {
      count = 0;
      start = nowS;
    }
    const allowed = !(Math.max(0, performed) > this.#burst - 1);
    if (allowed) count += 1;
    this.#actions.set(key, { count, start });
    if (allowed) return { allowed: true };
    const timeAllowed = Math.max(nowS, start + (count - this.#burst + 1) / this.#rate);
    return { allowed: false, retryAfterMs: Math.trunc(1000 * (timeAllowed - nowS)) };
  }
}

interface Stored {
  readonly pos: number;
  readonly roomId: string;
  readonly event: PeerEvent;
}

interface Room {
  readonly id: string;
  readonly events: Stored[];
  readonly state: Map<string, PeerEvent>;
  publicJoin: boolean;
}

interface Filter {
  readonly timelineLimit: number;
  readonly timelineTypes?: readonly string[];
  readonly stateTypes?: readonly string[];
}

export interface PeerCall {
  readonly method: string;
  readonly path: string;
  status: number;
  readonly at: number;
}

export interface MatrixPeer extends ChatPeer {
  readonly baseUrl: string;
  readonly botUserId: string;
  readonly botToken: string;
  readonly botPassword: string;
  /** Every request, in order (path without the query). */
  readonly calls: PeerCall[];
  /** Routes the peer does not serve, as requested (kept across resets). */
  readonly unknownRoutes: string[];
  /** /sync requests being held open right now. */
  readonly syncsWaiting: number;
  /** Successful password logins. */
  readonly logins: number;
  readonly groupRoom: string;
  readonly encryptedRoom: string;
  readonly lobbyRoom: string;
  roomId(place: Place): string;
  /** A `[channels.matrix]` section that logs in with the password instead of a token. */
  passwordConfigSection(): string;
  /**
   * The files the bot posted in a place (m.image, m.file, m.audio, m.video), in order, as a client
   * reads them: the content, and the problems a client would have with it against the spec's
   * event schemas (matrix-org/matrix-spec data/event-schemas/schema/m.room.message$m.image.yaml,
   * m.room.message$m.file.yaml, core-event-schema/msgtype_infos/image_info.yaml: `msgtype` and
   * `body` required strings, `url` an mxc:// URI of media on this server, `info.mimetype` a
   * string, `info.size`, `info.w`, `info.h` integers) and against the media itself (size and
   * MIME type as uploaded; w × h as the image decodes). Empty problems: a client shows it right,
   * an m.image inline.
   */
  botUploads(place: Place): Promise<Array<{ readonly content: ImageContent | FileContent; readonly problems: readonly string[] }>>;
  /** A person posts in any room. Returns the event id. */
  postIn(roomId: string, user: PeerUser, content: IContent): string;
  /** A person's event of any type (an m.room.encrypted one their client made). Returns the event id. */
  postEvent(roomId: string, user: PeerUser, type: string, content: IContent): string;
  /** Device keys, one-time keys and to-device messages (matrix-keys.ts): people's clients use it directly, the bot over HTTP. */
  readonly keys: MatrixKeyServer;
  /** The bot's device (of its access token). */
  readonly botDevice: string;
  /** An access token for a person's own client (a matrix-js-sdk MatrixClient) as `device`. */
  personToken(user: PeerUser, device: string): string;
  /** A person's client uploads media (an encrypted attachment's ciphertext). Returns its mxc:// URI. */
  uploadMedia(data: Buffer, mime: string): string;
  /** The bytes stored under an mxc:// URI of this server. */
  mediaOf(mxc: string): Buffer | undefined;
  /** An m.room.encrypted event from a person (what a client with E2EE posts). */
  postEncrypted(user: PeerUser, roomId?: string): string;
  /** `user` makes a new room and invites the bot. Returns the room id. */
  invite(user: PeerUser, options?: { direct?: boolean }): string;
  /**
   * `user` starts an encrypted DM with the bot the way Element does (element-hq/element-web
   * createRoom for a DM when encryption is possible): a room created with `m.room.encryption`
   * (m.megolm.v1.aes-sha2) in its initial state, the bot invited with `is_direct`; the invite's
   * stripped state carries m.room.encryption (spec: stripped state). Returns the room id.
   */
  inviteEncryptedDm(user: PeerUser): string;
  /** `user` turns encryption on in a room (an m.room.encryption state event). */
  encryptRoom(roomId: string, user: PeerUser): void;
  /** The bot's m.room.member content in a room (membership, and the reason of a leave). */
  botMemberContent(roomId: string): MemberContent | undefined;
  /** Every event the bot sent to a room (messages, notices, edits), in order. */
  rawBotEventsIn(roomId: string): readonly PeerEvent[];
  /** The bot's membership in a room ("join", "invite", …). */
  botMembership(roomId: string): string | undefined;
  /** The bot's messages in any room (after edits), and their raw contents. */
  botMessagesIn(roomId: string): readonly BotMessage[];
  rawBotEvents(place: Place): readonly PeerEvent[];
  /** Cuts every /sync connection being held open; returns how many. */
  dropSyncs(): number;
  /** /sync requests hang (no answer) until {@link unstall}. */
  stallSyncs(): void;
  unstall(): void;
  /** Closes the server (dropping every connection) and listens again on the same port after `downMs`. */
  restart(downMs: number): Promise<void>;
  /**
   * The next `count` sends get 429 M_LIMIT_EXCEEDED with retry_after_ms and a Retry-After
   * header of `retryAfterSeconds` (default: retry_after_ms rounded up, as Synapse does; null:
   * none), or no retry_after_ms when `body` is false (a server that follows spec v1.10 and
   * sends only the header).
   */
  rateLimitSends(count: number, retryAfterMs: number, options?: { retryAfterSeconds?: number | null; body?: boolean }): void;
  /**
   * Requests to send or edit (PUT /rooms/{id}/send), or to type, that arrived while a wait the
   * peer announced in a 429 (its retry_after_ms) had not passed: in `roomId`, or in every room
   * (the wait covers the whole account, as Synapse's rc_message does).
   */
  callsInsideWait(roomId?: string): number;
  /** Waits announced so far (429s answered to sends). */
  readonly waitsAnnounced: number;
  /** How many sends were answered from the transaction cache (a retried txnId). */
  readonly repeatedTxns: number;
}

export async function startMatrixPeer(options: MatrixPeerOptions = {}): Promise<MatrixPeer> {
  const botToken = `syt_bot_${randomBytes(8).toString('hex')}`;
  const botPassword = 'correct horse battery staple';
  const tokens = new Map<string, string>([[botToken, 'BOTDEVICE']]);
  /** Tokens of people's own clients (personToken) → their user id; the rest are the bot's. */
  const owners = new Map<string, string>();
  const stream: Stored[] = [];
  const rooms = new Map<string, Room>();
  const aliases = new Map<string, string>();
  const filters = new Map<string, Filter>();
  const txns = new Map<string, string>();
  const media = new Map<string, { data: Buffer; mime: string; name: string }>();
  const typing = new Map<string, number>();
  const calls: PeerCall[] = [];
  const unknownRoutes: string[] = [];
  const waiters = new Set<() => void>();
  const syncing = new Set<IncomingMessage>();
  const sockets = new Set<Socket>();
  let stalled = false;
  let limited: { count: number; retryAfterMs: number; retryAfterSeconds?: number | null; body?: boolean } | undefined;
  const rcMessage = options.rcMessage ?? SYNAPSE_RC_MESSAGE;
  const maxUploadBytes = options.maxUploadBytes ?? SYNAPSE_MAX_UPLOAD;
  let bucket = new LeakyBucket(rcMessage.perSecond, rcMessage.burstCount);
  /** When the last announced wait ends (ms, performance.now()). */
  let waitUntil = 0;
  let waitsAnnounced = 0;
  const insideWait = new Map<string, number>();
  let resetPos = 0;
  let counter = 0;
  let logins = 0;
  let repeatedTxns = 0;
  const nonce = randomBytes(3).toString('hex');
  // Users who see each other's device changes: those sharing a room (joined or invited).
  const sharing = (user: string): string[] => {
    const others = new Set<string>();
    for (const room of rooms.values()) {
      const here = (u: string): boolean => ['join', 'invite'].includes(membership(room, u) ?? '');
      if (!here(user)) continue;
      for (const event of room.state.values()) if (event.type === 'm.room.member' && event.state_key !== undefined && event.state_key !== user && here(event.state_key)) others.add(event.state_key);
    }
    return [...others];
  };
  const keys = new MatrixKeyServer(sharing, () => {
    for (const wake of [...waiters]) wake();
  });

  function append(roomId: string, event: Omit<PeerEvent, 'event_id' | 'origin_server_ts'>): PeerEvent {
    const room = rooms.get(roomId)!;
    const full: PeerEvent = { event_id: `$e${++counter}_${nonce}`, origin_server_ts: Date.now(), ...event };
    const stored = { pos: stream.length + 1, roomId, event: full };
    stream.push(stored);
    room.events.push(stored);
    if (full.state_key !== undefined) room.state.set(`${full.type}\u0000${full.state_key}`, full);
    for (const wake of [...waiters]) wake();
    return full;
  }

  function createRoom(id: string, creator: string, members: readonly string[], extra: { alias?: string; publicJoin?: boolean; encrypted?: boolean } = {}): Room {
    const encryption: EncryptionContent = { algorithm: 'm.megolm.v1.aes-sha2' };
    const joined = (member: string): MemberContent => ({ membership: 'join', ...(NAMES[member] === undefined ? {} : { displayname: NAMES[member] }) });
    const room: Room = { id, events: [], state: new Map(), publicJoin: extra.publicJoin ?? false };
    rooms.set(id, room);
    if (extra.alias) aliases.set(extra.alias, id);
    append(id, { type: 'm.room.create', sender: creator, state_key: '', content: { creator, room_version: '10' } });
    append(id, { type: 'm.room.join_rules', sender: creator, state_key: '', content: { join_rule: room.publicJoin ? 'public' : 'invite' } });
    if (extra.encrypted) append(id, { type: 'm.room.encryption', sender: creator, state_key: '', content: encryption });
    for (const member of [creator, ...members.filter((m) => m !== creator)]) append(id, { type: 'm.room.member', sender: member, state_key: member, content: joined(member) });
    return room;
  }

  const dms = {} as Record<PeerUser, string>;
  for (const user of Object.keys(USERS) as PeerUser[]) dms[user] = createRoom(`!dm-${user}:${SERVER}`, USERS[user], [BOT]).id;
  const groupRoom = createRoom(`!group:${SERVER}`, USERS.alice, [USERS.bob, USERS.mallory, BOT], { alias: `#group:${SERVER}` }).id;
  const threadRoot = append(groupRoom, { type: 'm.room.message', sender: USERS.alice, content: { msgtype: 'm.text', body: 'Test thread' } }).event_id;
  const encryptedRoom = createRoom(`!secret:${SERVER}`, USERS.alice, [USERS.bob, BOT], { alias: `#secret:${SERVER}`, encrypted: true }).id;
  const lobbyRoom = createRoom(`!lobby:${SERVER}`, USERS.bob, [USERS.alice], { alias: `#lobby:${SERVER}`, publicJoin: true }).id;

  const roomId = (place: Place): string => (place.kind === 'dm' ? dms[place.user] : groupRoom);
  const stateOf = (room: Room, type: string, key: string): PeerEvent | undefined => room.state.get(`${type}\u0000${key}`);
  const membership = (room: Room, user: string): string | undefined => stateOf(room, 'm.room.member', user)?.content.membership as string | undefined;
  const membershipAt = (room: Room, user: string, pos: number): string | undefined => {
    let result: string | undefined;
    for (const s of room.events) if (s.pos <= pos && s.event.type === 'm.room.member' && s.event.state_key === user) result = s.event.content.membership as string;
    return result;
  };
  const relatesTo = (event: PeerEvent): Json | undefined => event.content['m.relates_to'] as Json | undefined;
  const uploadProblems = (content: IContent): Promise<string[]> => checkUpload(content, media);
  const isBotMessage = (event: PeerEvent): boolean => event.sender === BOT && event.type === 'm.room.message' && relatesTo(event)?.rel_type !== 'm.replace';
  const inPlace = (place: Place, stored: Stored): boolean => {
    if (stored.roomId !== roomId(place)) return false;
    if (place.kind === 'dm') return true;
    const relates = relatesTo(stored.event);
    const inThread = relates?.rel_type === 'm.thread' && relates.event_id === threadRoot;
    return place.kind === 'thread' ? inThread : !inThread;
  };

  function botMessagesWhere(match: (stored: Stored) => boolean): BotMessage[] {
    const messages = stream.filter((s) => s.pos > resetPos && match(s) && isBotMessage(s.event) && s.event.content.msgtype === 'm.text');
    return messages.map((s) => {
      const edits = stream.filter((e) => e.event.sender === BOT && relatesTo(e.event)?.rel_type === 'm.replace' && relatesTo(e.event)?.event_id === s.event.event_id);
      const shown = edits.length > 0 ? (edits.at(-1)!.event.content['m.new_content'] as IContent) : s.event.content;
      return { text: visibleText(shown), edits: edits.length };
    });
  }

  function personContent(place: Place, text: string, mention: boolean): IContent {
    const content: IContent = { msgtype: 'm.text', body: mention ? `${BOT_NAME}: ${text}` : text, 'm.mentions': mention ? { user_ids: [BOT] } : {} };
    if (mention) {
      content.format = 'org.matrix.custom.html';
      content.formatted_body = `<a href="https://matrix.to/#/${BOT}">${BOT_NAME}</a>: ${escapeHtml(text)}`;
    }
    if (place.kind === 'thread') {
      const latest = [...rooms.get(groupRoom)!.events].reverse().find((s) => relatesTo(s.event)?.event_id === threadRoot)?.event.event_id ?? threadRoot;
      content['m.relates_to'] = { rel_type: 'm.thread', event_id: threadRoot, is_falling_back: true, 'm.in_reply_to': { event_id: latest } };
    }
    return content;
  }

  function postIn(id: string, user: PeerUser, content: IContent): string {
    const room = rooms.get(id);
    if (!room) throw new Error(`no room ${id}`);
    if (membership(room, USERS[user]) !== 'join') throw new Error(`${user} is not in ${id}`);
    return append(id, { type: 'm.room.message', sender: USERS[user], content }).event_id;
  }

  // ---- /sync ---------------------------------------------------------------------------------

  function parseFilter(raw: string | null, user: string): Filter {
    let definition: Json | undefined;
    if (raw?.trim().startsWith('{')) definition = JSON.parse(raw) as Json;
    else if (raw) {
      const stored = filters.get(`${user}/${raw}`);
      if (!stored) throw new HttpError(400, 'M_INVALID_PARAM', `unknown filter ${raw}`);
      return stored;
    }
    const room = (definition?.room ?? {}) as Json;
    const timeline = (room.timeline ?? {}) as Json;
    const state = (room.state ?? {}) as Json;
    return {
      timelineLimit: typeof timeline.limit === 'number' ? timeline.limit : 10,
      ...(Array.isArray(timeline.types) ? { timelineTypes: timeline.types as string[] } : {}),
      ...(Array.isArray(state.types) ? { stateTypes: state.types as string[] } : {}),
    };
  }

  const typeMatch = (types: readonly string[] | undefined, type: string): boolean => !types || types.some((t) => (t.endsWith('*') ? type.startsWith(t.slice(0, -1)) : t === type));
  const stripped = (e: PeerEvent): IStrippedState => ({ type: e.type, sender: e.sender, state_key: e.state_key ?? '', content: e.content });
  const asState = (e: PeerEvent): PeerEvent & { state_key: string } => ({ ...e, state_key: e.state_key ?? '' });

  function buildSync(since: number | undefined, filter: Filter, fullState: boolean, device: string, sinceToken: string | undefined, me: string): { body: ISyncResponse; empty: boolean } {
    const join: Record<string, IJoinedRoom> = {};
    const invite: Record<string, IInvitedRoom> = {};
    const leave: Record<string, ILeftRoom> = {};
    for (const room of rooms.values()) {
      const now = membership(room, me);
      const before = since === undefined ? undefined : membershipAt(room, me, since);
      const changed = since === undefined || room.events.some((s) => s.pos > since && s.event.type === 'm.room.member' && s.event.state_key === me);
      if (now === 'join') {
        const newly = since === undefined || before !== 'join';
        const joinPos = [...room.events].reverse().find((s) => s.event.type === 'm.room.member' && s.event.state_key === me)!.pos;
        const from = since === undefined ? 0 : newly ? joinPos - 1 : since;
        const candidates = room.events.filter((s) => s.pos > from && typeMatch(filter.timelineTypes, s.event.type));
        const timeline = candidates.slice(-Math.max(0, filter.timelineLimit));
        const isLimited = timeline.length < candidates.length;
        if (!newly && !fullState && timeline.length === 0) continue;
        const state = newly || fullState ? [...room.state.values()].filter((e) => typeMatch(filter.stateTypes, e.type)) : [];
        const members = [...room.state.values()].filter((e) => e.type === 'm.room.member');
        join[room.id] = {
          summary: {
            'm.heroes': members.filter((e) => e.state_key !== me && e.content.membership === 'join').map((e) => e.state_key!).slice(0, 5),
            'm.joined_member_count': members.filter((e) => e.content.membership === 'join').length,
            'm.invited_member_count': members.filter((e) => e.content.membership === 'invite').length,
          },
          state: { events: state.map(asState) },
          timeline: { events: timeline.map((s) => s.event), limited: isLimited, prev_batch: `s${(timeline[0]?.pos ?? stream.length + 1) - 1}` },
          ephemeral: { events: [] },
          account_data: { events: [] },
          unread_notifications: { highlight_count: 0, notification_count: 0 },
        };
      } else if (now === 'invite' && changed) {
        invite[room.id] = { invite_state: { events: [...room.state.values()].filter((e) => e.type !== 'm.room.member' || e.state_key === me || e.sender === e.state_key).map(stripped) } };
      } else if ((now === 'leave' || now === 'ban') && changed && since !== undefined && before !== now) {
        leave[room.id] = { state: { events: [] }, timeline: { events: room.events.filter((s) => s.pos > since && s.event.state_key === me).map((s) => s.event), prev_batch: null }, account_data: { events: [] } };
      }
    }
    const keyNews = keys.pending(me, device);
    const empty = Object.keys(join).length + Object.keys(invite).length + Object.keys(leave).length === 0 && !keyNews;
    const keyPart = keyNews || sinceToken !== undefined ? keys.syncPart(me, device, sinceToken, `s${stream.length}`) : {};
    return {
      body: {
        next_batch: `s${stream.length}`,
        rooms: { join, invite, leave, knock: {} },
        account_data: { events: [] },
        presence: { events: [] },
        to_device: { events: [] },
        device_lists: { changed: [], left: [] },
        device_one_time_keys_count: {},
        ...keyPart,
      },
      empty,
    };
  }

  async function sync(req: IncomingMessage, url: URL, user: string, device: string): Promise<ISyncResponse> {
    const me = user;
    const sinceRaw = url.searchParams.get('since');
    let since: number | undefined;
    if (sinceRaw !== null) {
      const match = /^s(\d+)$/.exec(sinceRaw);
      if (!match || Number(match[1]) > stream.length) throw new HttpError(400, 'M_UNKNOWN_POS', 'unknown sync position');
      since = Number(match[1]);
    }
    const filter = parseFilter(url.searchParams.get('filter'), user);
    const fullState = url.searchParams.get('full_state') === 'true';
    const timeoutMs = Math.min(Number(url.searchParams.get('timeout') ?? '0') || 0, 60_000);
    const deadline = Date.now() + timeoutMs;
    syncing.add(req);
    try {
      while (stalled && !req.socket.destroyed) await wait(req, 60_000);
      for (;;) {
        const result = buildSync(since, filter, fullState, device, sinceRaw ?? undefined, me);
        if (!result.empty || fullState || since === undefined || Date.now() >= deadline || req.socket.destroyed) return result.body;
        await wait(req, deadline - Date.now());
      }
    } finally {
      syncing.delete(req);
    }
  }

  /** Resolves on the next new event (or unstall), after `ms`, or when the request goes away. */
  function wait(req: IncomingMessage, ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        waiters.delete(done);
        req.socket.off('close', done);
        resolve();
      };
      const timer = setTimeout(done, Math.max(0, ms));
      waiters.add(done);
      req.socket.once('close', done);
    });
  }

  // ---- routes ----------------------------------------------------------------------------------

  function authUser(req: IncomingMessage, url: URL): string {
    const header = req.headers.authorization;
    const token = header?.startsWith('Bearer ') ? header.slice(7) : url.searchParams.get('access_token');
    if (!token) throw new HttpError(401, 'M_MISSING_TOKEN', 'Missing access token');
    if (!tokens.has(token)) throw new HttpError(401, 'M_UNKNOWN_TOKEN', 'Unrecognised access token');
    return `${token}`;
  }

  function joinedRoom(id: string, user = BOT): Room {
    const room = rooms.get(id);
    if (!room) throw new HttpError(404, 'M_NOT_FOUND', `unknown room ${id}`);
    if (membership(room, user) !== 'join') throw new HttpError(403, 'M_FORBIDDEN', `${user} is not in room ${id}`);
    return room;
  }

  /** One request of the bot that Synapse's rc_message counts, or a typing notice: counted when it arrives inside an announced wait. */
  function arrived(roomId: string): void {
    if (performance.now() >= waitUntil) return;
    insideWait.set(roomId, (insideWait.get(roomId) ?? 0) + 1);
  }

  /** A 429 as Synapse answers it (synapse/api/errors.py LimitExceededError): retry_after_ms, and Retry-After in whole seconds rounded up. */
  function limitExceeded(retryAfterMs: number, header: number | null = Math.ceil(retryAfterMs / 1000), withBody = true): Reply {
    waitsAnnounced++;
    waitUntil = Math.max(waitUntil, performance.now() + retryAfterMs);
    const json: ErrorBody = { errcode: 'M_LIMIT_EXCEEDED', error: 'Too Many Requests', ...(withBody ? { retry_after_ms: retryAfterMs } : {}) };
    return { status: 429, json, ...(header === null ? {} : { headers: { 'retry-after': String(header) } }) };
  }

  async function route(req: IncomingMessage, url: URL, body: Buffer): Promise<Reply> {
    const method = req.method ?? 'GET';
    const path = url.pathname;
    const json = (): Json => (body.length === 0 ? {} : (JSON.parse(body.toString('utf8')) as Json));
    let m: RegExpExecArray | null;
    if (path === '/_matrix/client/versions') return { json: { versions: ['v1.1', 'v1.2', 'v1.3', 'v1.4', 'v1.5', 'v1.6', 'v1.7', 'v1.8', 'v1.9', 'v1.10', 'v1.11', 'v1.12'], unstable_features: {} } };
    if (path === '/_matrix/client/v3/login' && method === 'GET') return { json: { flows: [{ type: 'm.login.password' }] } };
    if (path === '/_matrix/client/v3/login' && method === 'POST') {
      const request = json();
      const identifier = request.identifier as Json | undefined;
      const user = (identifier?.user ?? request.user) as string | undefined;
      if ((user !== BOT && user !== 'switchboard') || request.password !== botPassword) throw new HttpError(403, 'M_FORBIDDEN', 'Invalid username or password');
      const token = `syt_login_${randomBytes(8).toString('hex')}`;
      const device = `DEV${++counter}`;
      tokens.set(token, device);
      logins++;
      const response: LoginResponse & { home_server: string } = { user_id: BOT, access_token: token, device_id: device, home_server: SERVER };
      return { json: response };
    }
    if ((m = /^\/_matrix\/media\/v3\/download\/([^/]+)\/([^/]+)/.exec(path))) return download(m[2]!);
    if ((m = /^\/_matrix\/client\/v1\/media\/download\/([^/]+)\/([^/]+)/.exec(path))) {
      if (options.legacyMediaOnly) throw new HttpError(404, 'M_UNRECOGNIZED', 'Unrecognized request');
      authUser(req, url);
      return download(decodeURIComponent(m[2]!));
    }

    if (path.startsWith('/_matrix/client/unstable/')) throw new HttpError(404, 'M_UNRECOGNIZED', 'Unrecognized request'); // no MSCs here
    const token = authUser(req, url);
    // A person's own client (personToken) is served as that person; every other token is the bot's.
    const me = owners.get(token) ?? BOT;
    if (path === '/_matrix/media/v3/upload' && method === 'POST') {
      // matrix-org/matrix-spec data/api/client-server/content-repo.yaml: 413 `uploadTooLarge` (M_TOO_LARGE) past the server's limit.
      if (body.length > maxUploadBytes) throw new HttpError(413, 'M_TOO_LARGE', `Uploaded file is too large (limit ${maxUploadBytes} bytes)`);
      const id = `m${++counter}${nonce}`;
      media.set(id, { data: body, mime: String(req.headers['content-type'] ?? 'application/octet-stream'), name: url.searchParams.get('filename') ?? id });
      const response: UploadResponse = { content_uri: `mxc://${SERVER}/${id}` };
      return { json: response };
    }
    // authed-content-repo.yaml GET /_matrix/client/v1/media/config (v1.11), and its legacy twin in content-repo.yaml.
    if (path === '/_matrix/client/v1/media/config' || path === '/_matrix/media/v3/config') {
      if (options.legacyMediaOnly && path.startsWith('/_matrix/client/v1/')) throw new HttpError(404, 'M_UNRECOGNIZED', 'Unrecognized request');
      return { json: options.advertiseUploadSize === false ? {} : { 'm.upload.size': maxUploadBytes } };
    }
    const p = path.startsWith('/_matrix/client/v3/') ? path.slice('/_matrix/client/v3'.length) : undefined;
    if (p === undefined) return unknown(method, path);
    if (p === '/account/whoami') return { json: { user_id: me, device_id: tokens.get(token) } };
    if (p === '/logout' && method === 'POST') {
      tokens.delete(token);
      return { json: {} };
    }
    if (p === '/pushrules/' || p === '/pushrules') return { json: { global: { override: [], content: [], room: [], sender: [], underride: [] } } };
    if (p === '/capabilities') return { json: { capabilities: { 'm.change_password': { enabled: false }, 'm.room_versions': { default: '10', available: { '10': 'stable' } } } } };
    if (p === '/sync') return { json: await sync(req, url, me, tokens.get(token) ?? '') };
    const keyReply: Json | undefined = keyRoute(keys, method, p, method === 'GET' ? {} : json(), me, tokens.get(token) ?? '');
    // No key backup and no account data here (a crypto client asks: 404 M_NOT_FOUND is "none", keys.yaml / account-data.yaml).
    if (p === '/room_keys/version') throw new HttpError(404, 'M_NOT_FOUND', 'No current backup version');
    if (/^\/user\/[^/]+\/account_data\/[^/]+$/.test(p)) {
      if (method === 'PUT') return { json: {} };
      throw new HttpError(404, 'M_NOT_FOUND', 'Account data not found');
    }
    if (keyReply) return { json: keyReply };
    if (p === '/joined_rooms') return { json: { joined_rooms: [...rooms.values()].filter((r) => membership(r, BOT) === 'join').map((r) => r.id) } };
    if ((m = /^\/user\/([^/]+)\/filter$/.exec(p)) && method === 'POST') {
      const id = String(++counter);
      filters.set(`${me}/${id}`, parseFilter(JSON.stringify(json()), me));
      return { json: { filter_id: id } };
    }
    if ((m = /^\/user\/([^/]+)\/filter\/([^/]+)$/.exec(p))) {
      if (!filters.has(`${me}/${m[2]}`)) throw new HttpError(404, 'M_NOT_FOUND', 'No such filter');
      return { json: {} };
    }
    if ((m = /^\/profile\/([^/]+)(\/displayname)?$/.exec(p))) {
      const user = decodeURIComponent(m[1]!);
      if (!NAMES[user]) throw new HttpError(404, 'M_NOT_FOUND', 'Profile not found');
      return { json: { displayname: NAMES[user] } };
    }
    if ((m = /^\/directory\/room\/([^/]+)$/.exec(p))) {
      const id = aliases.get(decodeURIComponent(m[1]!));
      if (!id) throw new HttpError(404, 'M_NOT_FOUND', 'Room alias not found');
      return { json: { room_id: id, servers: [SERVER] } };
    }
    if (((m = /^\/join\/([^/]+)$/.exec(p)) || (m = /^\/rooms\/([^/]+)\/join$/.exec(p))) && method === 'POST') {
      const target = decodeURIComponent(m[1]!);
      const id = target.startsWith('#') ? aliases.get(target) : target;
      const room = id === undefined ? undefined : rooms.get(id);
      if (!room) throw new HttpError(404, 'M_NOT_FOUND', `No known room ${target}`);
      const current = membership(room, BOT);
      if (current === 'join') return { json: { room_id: room.id } };
      if (current !== 'invite' && !room.publicJoin) throw new HttpError(403, 'M_FORBIDDEN', 'You are not invited to this room.');
      append(room.id, { type: 'm.room.member', sender: BOT, state_key: BOT, content: { membership: 'join', displayname: BOT_NAME } });
      return { json: { room_id: room.id } };
    }
    // POST /rooms/{roomId}/leave (room_participation.yaml / leaving.yaml): also rejects an invite; `reason` goes into the member event.
    if ((m = /^\/rooms\/([^/]+)\/leave$/.exec(p)) && method === 'POST') {
      const room = rooms.get(decodeURIComponent(m[1]!));
      const current = room === undefined ? undefined : membership(room, BOT);
      if (!room || (current !== 'join' && current !== 'invite')) throw new HttpError(403, 'M_FORBIDDEN', `${BOT} is not in room ${decodeURIComponent(m[1]!)}`);
      const reason = json().reason;
      const content: MemberContent = { membership: 'leave', ...(typeof reason === 'string' ? { reason } : {}) };
      append(room.id, { type: 'm.room.member', sender: BOT, state_key: BOT, content });
      return { json: {} };
    }
    if ((m = /^\/rooms\/([^/]+)\/send\/([^/]+)\/([^/]+)$/.exec(p)) && method === 'PUT' && me !== BOT) {
      // A person's client sends (no rate limit for people here).
      const room = joinedRoom(decodeURIComponent(m[1]!), me);
      const key = `${token}|${decodeURIComponent(m[3]!)}`;
      const event = txns.get(key) ?? append(room.id, { type: decodeURIComponent(m[2]!), sender: me, content: json() as IContent }).event_id;
      txns.set(key, event);
      return { json: { event_id: event } };
    }
    if ((m = /^\/rooms\/([^/]+)\/send\/([^/]+)\/([^/]+)$/.exec(p)) && method === 'PUT') {
      const room = joinedRoom(decodeURIComponent(m[1]!));
      const key = `${token}|${decodeURIComponent(m[3]!)}`;
      const known = txns.get(key);
      if (known) {
        repeatedTxns++;
        return { json: { event_id: known } };
      }
      arrived(room.id);
      if (limited && limited.count > 0) {
        limited.count--;
        return limitExceeded(limited.retryAfterMs, limited.retryAfterSeconds, limited.body ?? true);
      }
      // Synapse rate-limits every event a user creates (rc_message, keyed by the user: one bucket for all rooms), edits included.
      const verdict = bucket.take(BOT, performance.now() / 1000);
      if (!verdict.allowed) return limitExceeded(verdict.retryAfterMs);
      if (body.length > MAX_EVENT_BYTES) throw new HttpError(413, 'M_TOO_LARGE', 'event too large');
      const event = append(room.id, { type: decodeURIComponent(m[2]!), sender: BOT, content: json() as IContent });
      txns.set(key, event.event_id);
      const response: ISendEventResponse = { event_id: event.event_id };
      return { json: response };
    }
    if ((m = /^\/rooms\/([^/]+)\/typing\/([^/]+)$/.exec(p)) && method === 'PUT') {
      const room = joinedRoom(decodeURIComponent(m[1]!));
      arrived(room.id);
      if (json().typing === true) typing.set(room.id, (typing.get(room.id) ?? 0) + 1);
      return { json: {} };
    }
    if ((m = /^\/rooms\/([^/]+)\/event\/([^/]+)$/.exec(p))) {
      const room = joinedRoom(decodeURIComponent(m[1]!));
      const event = room.events.find((s) => s.event.event_id === decodeURIComponent(m![2]!))?.event;
      if (!event) throw new HttpError(404, 'M_NOT_FOUND', 'Event not found');
      return { json: { ...event, room_id: room.id } };
    }
    if ((m = /^\/rooms\/([^/]+)\/(joined_members|members)$/.exec(p))) {
      const room = joinedRoom(decodeURIComponent(m[1]!), me);
      const members = [...room.state.values()].filter((e) => e.type === 'm.room.member');
      if (m[2] === 'members') return { json: { chunk: members.map((e) => ({ ...e, room_id: room.id })) } };
      const joined: Json = {};
      for (const e of members) if (e.content.membership === 'join') joined[e.state_key!] = { display_name: e.content.displayname ?? null, avatar_url: null };
      return { json: { joined } };
    }
    if ((m = /^\/rooms\/([^/]+)\/state(?:\/([^/]+)(?:\/([^/]*))?)?$/.exec(p))) {
      const room = joinedRoom(decodeURIComponent(m[1]!));
      if (m[2] === undefined) return { json: { chunk: [...room.state.values()] } as unknown as Json };
      const event = stateOf(room, decodeURIComponent(m[2]), decodeURIComponent(m[3] ?? ''));
      if (!event) throw new HttpError(404, 'M_NOT_FOUND', 'Event not found.');
      return { json: event.content };
    }
    if ((m = /^\/rooms\/([^/]+)\/messages$/.exec(p))) {
      const room = joinedRoom(decodeURIComponent(m[1]!));
      const position = (token: string | null, fallback: number): number => (token === null ? fallback : Number(/^s(\d+)$/.exec(token)?.[1] ?? Number.NaN));
      const from = position(url.searchParams.get('from'), stream.length);
      const to = position(url.searchParams.get('to'), 0);
      if (Number.isNaN(from) || Number.isNaN(to) || url.searchParams.get('dir') !== 'b') throw new HttpError(400, 'M_INVALID_PARAM', 'bad pagination (only dir=b with s<N> tokens)');
      const limit = Math.min(Number(url.searchParams.get('limit') ?? '10') || 10, 1000);
      const types = parseRoomEventTypes(url.searchParams.get('filter'));
      const chunk = room.events.filter((e) => e.pos <= from && e.pos > to && typeMatch(types, e.event.type)).reverse().slice(0, limit);
      const more = chunk.length === limit && room.events.some((e) => e.pos > to && e.pos < chunk.at(-1)!.pos);
      return { json: { chunk: chunk.map((e) => e.event), start: `s${from}`, ...(more ? { end: `s${chunk.at(-1)!.pos - 1}` } : {}) } };
    }
    if ((m = /^\/rooms\/([^/]+)\/(receipt|read_markers)/.exec(p))) return { json: {} };
    return unknown(method, path);
  }

  function download(id: string): { raw: { data: Buffer; mime: string } } {
    const file = media.get(id);
    if (!file) throw new HttpError(404, 'M_NOT_FOUND', 'Not found');
    return { raw: { data: file.data, mime: file.mime } };
  }

  function unknown(method: string, path: string): never {
    unknownRoutes.push(`${method} ${path}`);
    throw new HttpError(404, 'M_UNRECOGNIZED', 'Unrecognized request');
  }

  // ---- server ----------------------------------------------------------------------------------

  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const url = new URL(req.url ?? '/', 'http://peer');
      const call: PeerCall = { method: req.method ?? 'GET', path: url.pathname, status: 0, at: Date.now() };
      calls.push(call);
      route(req, url, Buffer.concat(chunks)).then(
        (result) => reply(res, call, result),
        (error: unknown) => {
          const failure = (status: number, json: ErrorBody): Reply => ({ status, json });
          if (error instanceof HttpError) reply(res, call, failure(error.status, { errcode: error.errcode, error: error.message }));
          else if (error instanceof SyntaxError) reply(res, call, failure(400, { errcode: 'M_NOT_JSON', error: error.message }));
          else reply(res, call, failure(500, { errcode: 'M_UNKNOWN', error: String(error) }));
        },
      );
    });
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });

  function reply(res: ServerResponse, call: PeerCall, { status = 200, json, raw, headers = {} }: Reply): void {
    call.status = status;
    if (res.destroyed || res.writableEnded) return;
    if (raw) {
      res.writeHead(status, { 'content-type': raw.mime, 'content-length': raw.data.length });
      res.end(raw.data);
      return;
    }
    const text = JSON.stringify(json ?? {});
    res.writeHead(status, { ...headers, 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
    res.end(text);
  }

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  const baseUrl = `http://127.0.0.1:${port}`;

  const closeAll = (): Promise<void> =>
    new Promise((resolve) => {
      server.close(() => resolve());
      for (const socket of sockets) socket.destroy();
      for (const wake of [...waiters]) wake();
    });

  const section = (auth: string): string => `[channels.matrix]\nhomeserver = "${baseUrl}"\nuser_id = "${BOT}"\n${auth}\n`;

  return {
    channel: 'matrix',
    limit: 16_000,
    users: USERS,
    hasTyping: true,
    baseUrl,
    botUserId: BOT,
    botToken,
    botPassword,
    calls,
    unknownRoutes,
    groupRoom,
    encryptedRoom,
    lobbyRoom,
    get syncsWaiting() {
      return syncing.size;
    },
    get logins() {
      return logins;
    },
    get repeatedTxns() {
      return repeatedTxns;
    },
    get waitsAnnounced() {
      return waitsAnnounced;
    },
    callsInsideWait(id) {
      if (id !== undefined) return insideWait.get(id) ?? 0;
      let total = 0;
      for (const count of insideWait.values()) total += count;
      return total;
    },
    roomId,
    configSection: () => section(`access_token = "${botToken}"`),
    passwordConfigSection: () => section(`password = "${botPassword}"`),
    async post(user, place, text, opts = {}) {
      postIn(roomId(place), user, personContent(place, text, place.kind !== 'dm' && opts.mention === true));
    },
    async postFile(user, place, file, caption) {
      const id = `m${++counter}${nonce}`;
      media.set(id, { data: Buffer.from(file.data), mime: file.mime, name: file.name });
      // As Element sends a picture (element-hq/element-web src/ContentMessages.ts, sendContentToRoom):
      // m.image with ImageInfo's w and h (https://spec.matrix.org/v1.11/client-server-api/#mimage);
      // an image/* it fails to decode falls back to m.file.
      const size = file.mime.startsWith('image/') ? await imageDimensions(file.data) : undefined;
      const content: IContent = {
        ...personContent(place, caption ?? file.name, false),
        msgtype: size ? 'm.image' : 'm.file',
        body: caption ?? file.name,
        filename: file.name,
        url: `mxc://${SERVER}/${id}`,
        info: { mimetype: file.mime, size: file.data.length, ...(size ? { w: size.width, h: size.height } : {}) },
      };
      postIn(roomId(place), user, content);
    },
    postIn,
    postEvent(id, user, type, content) {
      const room = rooms.get(id);
      if (!room || membership(room, USERS[user]) !== 'join') throw new Error(`${user} is not in ${id}`);
      return append(id, { type, sender: USERS[user], content }).event_id;
    },
    keys,
    botDevice: 'BOTDEVICE',
    personToken(user, device) {
      const token = `syt_${user}_${randomBytes(8).toString('hex')}`;
      tokens.set(token, device);
      owners.set(token, USERS[user]);
      return token;
    },
    uploadMedia(data, mime) {
      const id = `m${++counter}${nonce}`;
      media.set(id, { data, mime, name: id });
      return `mxc://${SERVER}/${id}`;
    },
    mediaOf: (mxc) => media.get(/^mxc:\/\/[^/]+\/(.+)$/.exec(mxc)?.[1] ?? '')?.data,
    postEncrypted(user, id = encryptedRoom) {
      const room = rooms.get(id)!;
      if (membership(room, USERS[user]) !== 'join') throw new Error(`${user} is not in ${id}`);
      const unpadded = (bytes: number): string => randomBytes(bytes).toString('base64').replace(/=+$/, '');
      const content: MegolmContent = {
        algorithm: 'm.megolm.v1.aes-sha2',
        ciphertext: unpadded(96),
        sender_key: unpadded(32), // a Curve25519 key: 32 bytes, unpadded base64
        device_id: `${user.toUpperCase()}PHONE`,
        session_id: unpadded(32),
      };
      return append(room.id, { type: 'm.room.encrypted', sender: USERS[user], content }).event_id;
    },
    invite(user, opts = {}) {
      const room = createRoom(`!inv${++counter}_${nonce}:${SERVER}`, USERS[user], []);
      const content: MemberContent = { membership: 'invite', displayname: BOT_NAME, ...(opts.direct ? { is_direct: true } : {}) };
      append(room.id, { type: 'm.room.member', sender: USERS[user], state_key: BOT, content });
      return room.id;
    },
    inviteEncryptedDm(user) {
      // Element's createRoom for a DM: preset trusted_private_chat, is_direct, invite [bot], and
      // initial_state m.room.encryption {algorithm: m.megolm.v1.aes-sha2} when it can encrypt.
      const room = createRoom(`!edm${++counter}_${nonce}:${SERVER}`, USERS[user], [], { encrypted: true });
      const content: MemberContent = { membership: 'invite', displayname: BOT_NAME, is_direct: true };
      append(room.id, { type: 'm.room.member', sender: USERS[user], state_key: BOT, content });
      return room.id;
    },
    encryptRoom(id, user) {
      const room = rooms.get(id);
      if (!room || membership(room, USERS[user]) !== 'join') throw new Error(`${user} is not in ${id}`);
      const content: EncryptionContent = { algorithm: 'm.megolm.v1.aes-sha2' };
      append(id, { type: 'm.room.encryption', sender: USERS[user], state_key: '', content });
    },
    botMemberContent(id) {
      const room = rooms.get(id);
      return room ? (stateOf(room, 'm.room.member', BOT)?.content as MemberContent | undefined) : undefined;
    },
    rawBotEventsIn: (id) => stream.filter((s) => s.pos > resetPos && s.roomId === id && s.event.sender === BOT && s.event.state_key === undefined).map((s) => s.event),
    botMembership: (id) => {
      const room = rooms.get(id);
      return room ? membership(room, BOT) : undefined;
    },
    botMessages: (place) => botMessagesWhere((s) => inPlace(place, s)),
    botMessagesIn: (id) => botMessagesWhere((s) => s.roomId === id),
    rawBotEvents: (place) => stream.filter((s) => s.pos > resetPos && inPlace(place, s) && isBotMessage(s.event)).map((s) => s.event),
    botFiles: (place) =>
      stream
        .filter((s) => s.pos > resetPos && inPlace(place, s) && isBotMessage(s.event) && ['m.file', 'm.image', 'm.audio', 'm.video'].includes(s.event.content.msgtype as string))
        .map((s) => String(s.event.content.filename ?? s.event.content.body)),
    async botUploads(place) {
      const events = stream.filter((s) => s.pos > resetPos && inPlace(place, s) && isBotMessage(s.event) && ['m.file', 'm.image', 'm.audio', 'm.video'].includes(s.event.content.msgtype as string));
      return Promise.all(events.map(async ({ event }) => ({ content: event.content as ImageContent | FileContent, problems: await uploadProblems(event.content) })));
    },
    typing: (place) => typing.get(roomId(place)) ?? 0,
    reset() {
      resetPos = stream.length;
      typing.clear();
      calls.length = 0;
      limited = undefined;
      stalled = false;
      bucket = new LeakyBucket(rcMessage.perSecond, rcMessage.burstCount);
      waitUntil = 0;
      waitsAnnounced = 0;
      insideWait.clear();
    },
    dropSyncs() {
      const count = syncing.size;
      for (const req of syncing) req.socket.destroy();
      return count;
    },
    stallSyncs() {
      stalled = true;
    },
    unstall() {
      stalled = false;
      for (const wake of [...waiters]) wake();
    },
    async restart(downMs) {
      await closeAll();
      await new Promise((resolve) => setTimeout(resolve, downMs));
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(port, '127.0.0.1', () => {
          server.off('error', reject);
          resolve();
        });
      });
    },
    rateLimitSends(count, retryAfterMs, opts = {}) {
      limited = { count, retryAfterMs, ...opts };
    },
    // Synapse's limit is per account: the next send or edit (in any room) is refused, and a call to any room inside the wait counts.
    flood: {
      waitNext: (_place, ms) => void (limited = { count: 1, retryAfterMs: ms }),
      callsInsideWait: () => [...insideWait.values()].reduce((sum, count) => sum + count, 0),
    },
    close: closeAll,
  };
}

/** What a route answers: a JSON body (typed by the SDK's types where it has them), or raw bytes. */
interface Reply {
  readonly status?: number;
  readonly json?: object;
  readonly raw?: { data: Buffer; mime: string };
  readonly headers?: Readonly<Record<string, string>>;
}

/** A refusal, as the homeserver answers it (one class for the key endpoints and the rest). */
const HttpError = KeyError;

function parseRoomEventTypes(raw: string | null): string[] | undefined {
  if (!raw) return undefined;
  const filter = JSON.parse(raw) as { types?: unknown };
  return Array.isArray(filter.types) ? (filter.types as string[]) : undefined;
}

export function escapeHtml(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

const ENTITIES: Record<string, string> = { lt: '<', gt: '>', amp: '&', quot: '"', apos: "'", nbsp: '\u00a0' };

/** What a client shows for Matrix HTML: line breaks for <br> and block ends, tags dropped, entities decoded. */
export function htmlToText(html: string): string {
  return html
    .replace(/<br\s*\/?>/gi, '\n')
    .replace(/<\/(p|h[1-6]|pre|blockquote|li|ul|ol)>\s*(?=<(p|h[1-6]|pre|blockquote|ul|ol|hr)\b)/gi, '</$1>\n\n')
    .replace(/<\/(li)>/gi, '\n')
    .replace(/<hr\s*\/?>/gi, '\n---\n')
    .replace(/<[^>]*>/g, '')
    .replace(/&(#x[0-9a-f]+|#\d+|[a-z]+);/gi, (whole, name: string) => {
      if (name[0] === '#') return String.fromCodePoint(name[1] === 'x' || name[1] === 'X' ? Number.parseInt(name.slice(2), 16) : Number(name.slice(1)));
      return ENTITIES[name.toLowerCase()] ?? whole;
    })
    .replace(/\n+$/, '');
}

/** The text a client shows for a message content: its HTML when it has some, else its body. */
export function visibleText(content: IContent): string {
  return content.format === 'org.matrix.custom.html' && typeof content.formatted_body === 'string' ? htmlToText(content.formatted_body) : String(content.body ?? '');
}

const isInteger = (value: unknown): boolean => typeof value === 'number' && Number.isInteger(value) && value >= 0;

/** What a client would find wrong with a file event of the bot (see MatrixPeer.botUploads), against the media stored under its url. */
async function checkUpload(content: IContent, media: ReadonlyMap<string, { data: Buffer; mime: string }>): Promise<string[]> {
  const problems: string[] = [];
  if (typeof content.body !== 'string') problems.push('body is not a string');
  if (content.filename !== undefined && typeof content.filename !== 'string') problems.push('filename is not a string');
  const url = typeof content.url === 'string' ? /^mxc:\/\/[^/]+\/(.+)$/.exec(content.url) : null;
  const stored = url ? media.get(url[1]!) : undefined;
  if (!stored) problems.push(`url ${String(content.url)} is not an mxc:// URI of uploaded media`);
  const info = content.info as Record<string, unknown> | undefined;
  if (info === undefined) return problems;
  if (info.mimetype !== undefined && typeof info.mimetype !== 'string') problems.push('info.mimetype is not a string');
  for (const key of ['size', 'w', 'h'] as const) if (info[key] !== undefined && !isInteger(info[key])) problems.push(`info.${key} is not an integer`);
  if (!stored) return problems;
  if (info.size !== undefined && info.size !== stored.data.length) problems.push(`info.size ${String(info.size)} is not the media's ${stored.data.length} bytes`);
  if (info.mimetype !== undefined && info.mimetype !== stored.mime) problems.push(`info.mimetype ${String(info.mimetype)} is not the media's ${stored.mime}`);
  if (content.msgtype === 'm.image') {
    const meta = await sharp(stored.data).metadata().catch(() => undefined);
    if (!meta?.width || !meta.height) problems.push('the media of an m.image is not an image');
    else if (info.w !== meta.width || info.h !== meta.height) problems.push(`info.w × info.h ${String(info.w)} × ${String(info.h)} is not the image's ${meta.width} × ${meta.height}`);
    if (typeof info.mimetype !== 'string' || !info.mimetype.startsWith('image/')) problems.push('an m.image without an image/* info.mimetype');
  }
  return problems;
}
