/**
 * One /sync response → room state updates, pushed messages and handled invites, in order.
 * Resolves once every message of the response is in the inbox; rejects only when a push does
 * (shutdown), and then the response is not confirmed.
 */
import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import type { ChannelContext, Push } from '../../src/channel.ts';
import type { MatrixConfig } from './config.ts';
import { isAllowed } from '../../src/policy/access.ts';
import { decryptAttachment } from './attachment-crypto.ts';
import type { MatrixApi } from './client.ts';
import { describeError } from './errors.ts';
import { classify, normalise, relationsOf, type BotIdentity, type RoomEvent } from './inbound.ts';
import type { ChannelE2ee } from './e2ee.ts';
import type { Rooms } from './rooms.ts';
import { checkSync, eventProblem } from './shape.ts';
import { TIMELINE_TYPES, type SyncResponse } from './sync.ts';
import { BoundedMap } from '../../src/bounded-map.ts';
import { withAttachments } from '../../src/inbound/with-attachments.ts';

/** Events fetched at most to fill one room's gap after a long absence. */
const GAP_LIMIT = 1000;

/** The fix people need when a room is encrypted. */
export const ENCRYPTION_FIX = 'disable encryption for this room or use an unencrypted room';

/**
 * What the people in an encrypted room are told, once per room, as a plain (unencrypted)
 * m.notice: Element shows an unencrypted event in an encrypted room (marked "Not encrypted"),
 * so the person sees why the bot does not answer instead of silence. Encryption cannot be
 * turned off in a room once it is on (spec: m.room.encryption), hence "make a room".
 */
export const ENCRYPTED_NOTICE =
  'I cannot read end-to-end encrypted messages yet, so I cannot see what is written in this room. ' +
  'To talk to me, make a room without encryption and invite me (in Element: + → New room, and turn off "Enable end-to-end encryption"). ' +
  'Encryption cannot be turned off in a room once it is on.';

/** Channel state keys of the rooms told (value: the notice's event id and when). */
const TOLD_PREFIX = 'e2ee-told:';

/**
 * Invites remembered as handled. Anyone may invite the bot, so this is bounded: an invite
 * forgotten here is only looked at again (and, if ignored, logged again) when a sync shows it
 * again — after a restart, since only the first sync of a listen carries full state.
 */
export const INVITES_REMEMBERED = 1000;

export interface MatrixStats {
  /** Encrypted events the channel could not read (each one logged). */
  encryptedEvents: number;
  /** Invites accepted / ignored. */
  invitesAccepted: number;
  invitesIgnored: number;
}

export interface IntakeDeps {
  readonly api: MatrixApi;
  readonly ctx: ChannelContext;
  readonly config: MatrixConfig;
  readonly rooms: Rooms;
  readonly log: Logger;
  readonly stats: MatrixStats;
  /** Event ids → whether the bot sent them (its own sends, and what sync and lookups showed). */
  readonly senders: BoundedMap<string, boolean>;
  /** Thread root → its newest event we know (the reply fallback of the bot's thread replies). */
  readonly threadLatest: BoundedMap<string, string>;
  /** The bot's global display name, if it has one. */
  displayName(): string | undefined;
  /** End-to-end encryption, when on (e2ee.ts): encrypted events are decrypted instead of reported. */
  readonly e2ee?: ChannelE2ee;
}

export class Intake {
  readonly #d: IntakeDeps;
  /** Rooms whose invite was already acted on (or ignored) in this process, newest {@link INVITES_REMEMBERED}. */
  readonly #invites = new BoundedMap<string, true>(INVITES_REMEMBERED);
  /** Encrypted rooms told that the bot cannot read them (by this process or, from the channel state, an earlier one). */
  readonly #told = new Set<string>();
  #toldLoaded = false;

  constructor(deps: IntakeDeps) {
    this.#d = deps;
  }

  /** Invites remembered as handled (for tests and health). */
  get invitesRemembered(): number {
    return this.#invites.size;
  }

  /** Whether the people in a room were told that its encrypted messages cannot be read. */
  told(roomId: string): boolean {
    return this.#told.has(roomId);
  }

  /**
   * Tells the people in an encrypted room, once ever per room, that the bot cannot read it
   * (never silence): a plain m.notice. Remembered in the channel state, so neither a restart nor
   * another node of a cluster says it again. A failed send is logged and tried again at the next
   * occasion (the next encrypted message there).
   */
  async #tellEncrypted(roomId: string, why: string): Promise<void> {
    if (this.#d.e2ee) return; // read and answered: nothing to tell
    const { api, ctx, log } = this.#d;
    if (!this.#toldLoaded) {
      try {
        for (const entry of await ctx.state.list(TOLD_PREFIX)) this.#told.add(entry.key.slice(TOLD_PREFIX.length));
        this.#toldLoaded = true;
      } catch (error) {
        log.warn({ reason: describeError(error) }, 'could not read which encrypted rooms were told; not telling any now');
        return;
      }
    }
    if (this.#told.has(roomId)) return;
    let eventId: string;
    try {
      // One transaction per room: a retry after a lost response is the same event, not a second notice.
      const txnId = `sb-e2ee-${createHash('sha256').update(roomId).digest('base64url').slice(0, 32)}`;
      eventId = await api.send(roomId, { msgtype: 'm.notice', body: ENCRYPTED_NOTICE }, txnId);
    } catch (error) {
      log.warn({ room: roomId, reason: describeError(error, api.token) }, `could not tell the people in encrypted room ${roomId} that it cannot be read; trying again when someone writes there`);
      return;
    }
    this.#told.add(roomId);
    this.#d.senders.setNewest(eventId, true);
    log.warn({ room: roomId, event: eventId, why }, `told the people in ${roomId} (once, a plain notice) that this channel cannot read what is written there (end-to-end encryption) — ${ENCRYPTION_FIX}`);
    try {
      await ctx.state.put(`${TOLD_PREFIX}${roomId}`, JSON.stringify({ event_id: eventId, at: Date.now() }));
    } catch (error) {
      ctx.storage?.failed(error, 'remember an encrypted room as told');
      log.warn({ room: roomId, reason: describeError(error) }, 'could not remember that the encrypted room was told; it may be told again after a restart');
    }
  }

  async handle(raw: SyncResponse, context: { readonly initial: boolean; readonly since: string | undefined }, push: Push): Promise<void> {
    const { rooms, api } = this.#d;
    const { response, dropped } = checkSync(raw);
    if (dropped.length > 0) this.#d.log.warn({ dropped: dropped.slice(0, 5), count: dropped.length }, 'malformed events in a /sync response; skipped');
    const { initial, since } = context;
    for (const event of response.account_data?.events ?? []) if (event.type === 'm.direct') rooms.setDirectRooms(event.content);
    for (const roomId of Object.keys(response.rooms?.leave ?? {})) rooms.forget(roomId);
    for (const [roomId, room] of Object.entries(response.rooms?.join ?? {})) {
      for (const event of room.state?.events ?? []) this.#applyState(roomId, event);
      let timeline = room.timeline?.events ?? [];
      if (room.timeline?.limited && !initial && since !== undefined) {
        // More arrived than one sync returns (the channel was down a while): fetch the gap.
        const gap = await this.#gap(roomId, room.timeline.prev_batch, since);
        timeline = [...gap.filter((event) => event.state_key === undefined), ...timeline];
      }
      for (const event of timeline) {
        if (event.state_key !== undefined) {
          this.#applyState(roomId, event);
          // Encryption turned on in a room the bot is in: its people are told now, not at their next message.
          if (!initial && event.type === 'm.room.encryption' && rooms.isEncrypted(roomId)) await this.#tellEncrypted(roomId, 'encryption turned on');
          continue;
        }
        if (event.sender === api.userId) {
          this.#d.senders.setNewest(event.event_id, true);
          continue;
        }
        if (initial) continue; // history from before the first start: never answered
        await this.#message(roomId, event, push);
      }
    }
    for (const [roomId, room] of Object.entries(response.rooms?.invite ?? {})) await this.#invite(roomId, room.invite_state?.events ?? []);
  }

  /** Reads a message decrypted after it waited for its key (e2ee.ts), like any other. */
  late(roomId: string, event: RoomEvent, push: Push): Promise<void> {
    return this.#message(roomId, event, push);
  }

  /** The events between `since` and a limited timeline's start, oldest first (at most {@link GAP_LIMIT}). */
  async #gap(roomId: string, prevBatch: string | undefined, since: string): Promise<RoomEvent[]> {
    const { api, log } = this.#d;
    const events: RoomEvent[] = [];
    let from = prevBatch;
    try {
      while (from !== undefined && events.length < GAP_LIMIT) {
        const page = await api.messages(roomId, from, since, TIMELINE_TYPES);
        const chunk: unknown[] = Array.isArray(page.chunk) ? page.chunk : [];
        events.push(...chunk.filter((event): event is RoomEvent => eventProblem(event, true) === undefined));
        if (chunk.length === 0 || page.end === undefined || page.end === from) break;
        from = page.end;
      }
    } catch (error) {
      log.warn({ room: roomId, reason: describeError(error, api.token) }, 'could not fetch the events the homeserver left out of a sync; only the newest are handled');
    }
    if (events.length >= GAP_LIMIT) log.warn({ room: roomId, fetched: events.length }, 'too many events were missed in this room; only the newest are handled');
    if (events.length > 0) log.info({ room: roomId, events: events.length }, 'fetched events sent while the channel was away');
    return events.reverse();
  }

  #applyState(roomId: string, event: Pick<RoomEvent, 'type' | 'content'> & { readonly state_key?: string | undefined }): void {
    if (this.#d.rooms.apply(roomId, event) && !this.#d.e2ee) {
      this.#d.log.warn({ room: roomId }, `room ${roomId} is end-to-end encrypted: this channel cannot read or answer it (no crypto support) — ${ENCRYPTION_FIX}`);
    }
  }

  async #message(roomId: string, received: RoomEvent, push: Push): Promise<void> {
    const { log, rooms, api, ctx, e2ee } = this.#d;
    let event = received;
    if (e2ee && event.type === 'm.room.encrypted' && event.sender !== api.userId) {
      const clear = await e2ee.decrypt(roomId, event);
      if (!clear) return; // waits for its key (e2ee.ts), or the person is told
      event = clear;
    }
    const verdict = classify(event, api.userId);
    if (verdict.kind === 'encrypted') {
      const count = ++this.#d.stats.encryptedEvents;
      log.warn({ room: roomId, event: event.event_id, sender: event.sender, encryptedEvents: count }, `an encrypted message in room ${roomId} was not read (this channel has no crypto support) — ${ENCRYPTION_FIX}`);
      await this.#tellEncrypted(roomId, 'an encrypted message');
      return;
    }
    if (verdict.kind === 'skip') {
      log.trace({ room: roomId, event: event.event_id, reason: verdict.reason }, 'event not answered');
      return;
    }
    const { thread, replyTo } = relationsOf(event);
    if (thread !== undefined) this.#d.threadLatest.setNewest(thread, event.event_id);
    const direct = rooms.isDirect(roomId);
    // Only a room message needs to know whether it answers the bot (a DM always is addressed).
    const repliesToBot = !direct && ((replyTo !== undefined && (await this.#sentByBot(roomId, replyTo))) || (thread !== undefined && (await this.#sentByBot(roomId, thread))));
    const names = [this.#d.displayName(), rooms.displayName(roomId, api.userId)].filter((n): n is string => n !== undefined);
    const bot: BotIdentity = { userId: api.userId, names: [...new Set(names)] };
    let normalised;
    try {
      normalised = normalise(event, bot, {
        channel: ctx.name,
        account: api.userId,
        assistantName: ctx.assistantName,
        roomId,
        direct,
        senderName: rooms.displayName(roomId, event.sender),
        repliesToBot,
      });
    } catch (error) {
      log.error({ room: roomId, event: event.event_id, reason: describeError(error) }, 'could not read an event; skipped');
      return;
    }
    if (!normalised) return;
    const { message, files } = normalised;
    const withFiles = await withAttachments(ctx.attachments, message, files, (file) => ({
      kind: file.kind,
      ...(file.name === undefined ? {} : { name: file.name }),
      ...(file.mime === undefined ? {} : { mime: file.mime }),
      ...(file.size === undefined ? {} : { size: file.size }),
      download: async (signal) => {
        if (file.url === undefined) throw new Error('the file has no usable url (or its encryption keys are missing)');
        const bytes = await api.download(file.url, signal);
        return file.encrypted ? decryptAttachment(bytes, file.encrypted) : bytes;
      },
    }));
    await push(withFiles);
  }

  /** Whether the bot sent an event: known from this process, else asked of the server (a failure counts as no). */
  async #sentByBot(roomId: string, eventId: string): Promise<boolean> {
    const known = this.#d.senders.get(eventId);
    if (known !== undefined) return known;
    try {
      const event = await this.#d.api.fetchEvent(roomId, eventId);
      const ours = event.sender === this.#d.api.userId;
      this.#d.senders.setNewest(eventId, ours);
      return ours;
    } catch (error) {
      this.#d.log.debug({ room: roomId, event: eventId, reason: describeError(error) }, 'could not look up the event a message replies to');
      return false;
    }
  }

  /** Accepts an invite from an allowed sender (allow lists them, or is ["*"]); ignores and logs the rest. */
  async #invite(roomId: string, events: ReadonlyArray<Pick<RoomEvent, 'type' | 'sender' | 'content'> & { readonly state_key?: string }>): Promise<void> {
    const { api, config, log, stats } = this.#d;
    if (this.#invites.has(roomId)) return;
    const invite = events.find((e) => e.type === 'm.room.member' && e.state_key === api.userId && e.content.membership === 'invite');
    if (!invite) return;
    this.#invites.setNewest(roomId, true);
    const inviter = invite.sender;
    if (!config.allow || !isAllowed(config.allow, [inviter])) {
      stats.invitesIgnored++;
      log.warn({ room: roomId, inviter }, `ignored an invite to ${roomId} from ${inviter}: only senders in allow can invite the bot`);
      return;
    }
    try {
      await api.join(roomId);
    } catch (error) {
      this.#invites.delete(roomId); // tried again when the invite shows up next
      log.warn({ room: roomId, inviter, reason: describeError(error, api.token) }, 'could not accept an invite');
      return;
    }
    if (invite.content.is_direct === true) this.#d.rooms.markDirectInvite(roomId);
    stats.invitesAccepted++;
    log.info({ room: roomId, inviter }, 'accepted an invite');
    // An encrypted room (Element makes DMs encrypted when it can; the invite's stripped state says so):
    // accepted, and its people told at once why the bot will not answer what they write there.
    const encryption = events.find((e) => e.type === 'm.room.encryption' && e.state_key === '' && typeof e.content.algorithm === 'string');
    if (encryption) {
      this.#applyState(roomId, encryption);
      await this.#tellEncrypted(roomId, 'invited to an encrypted room');
    }
  }
}
