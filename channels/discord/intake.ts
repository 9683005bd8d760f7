/**
 * What happens to a message between the gateway and the runtime, one at a time and in order:
 * classify the channel, normalise, save attachments, push — and only once the push resolved,
 * move the channel's position past it (the adapter's "ack").
 *
 * Positions outlive a listen and, saved in the channel state, a restart or a takeover: when a gateway
 * session could not be resumed (a new IDENTIFY after INVALID_SESSION, a restarted listen or
 * daemon), the events sent meanwhile are gone from the gateway, so every channel that had
 * traffic is read again over REST from its position (`GET /channels/{id}/messages?after=`),
 * at most {@link CATCH_UP_WINDOW_MS} back. Re-pushing is safe: ids are Discord's message ids
 * and the inbox dedupes on them.
 */
import { makeURLSearchParams, Routes, type REST } from 'discord.js';
import type { Logger } from 'pino';
import type { AttachmentStore, ChannelContext, InboundMessage, Push } from '../../src/channel.ts';
import type { ChannelState } from '../../src/channel-state.ts';
import { isGone } from './errors.ts';
import { isRecord, kindOf, MalformedPayload } from '../../src/inbound/malformed.ts';
import { attachmentKind, attachmentsOf, checkMessage, isAfter, normalise, snowflakeAt, THREAD_TYPES, type BotIdentity, type ChannelInfo, type RawMessage } from './inbound.ts';
import { Positions } from './positions.ts';
import { BoundedSet } from '../../src/bounded-map.ts';
import { withAttachments } from '../../src/inbound/with-attachments.ts';

export interface IntakeDeps {
  /** Channel instance name. */
  readonly name: string;
  readonly log: Logger;
  readonly attachments: AttachmentStore;
  readonly rest: REST;
  /** Where read positions are saved (none: kept in memory only). */
  readonly state?: ChannelState;
  /** The channel's state dir, where an earlier version's positions file may be (imported once). */
  readonly stateDir?: string;
  /** Where a failed save of the positions is reported. */
  readonly storage?: ChannelContext['storage'];
  /** Looks a channel up (a thread's parent, a channel's type): cache first, then REST. */
  channelInfo(id: string): Promise<ChannelInfo>;
  /** Whether the bot sent this message (a reply to it addresses the bot). */
  sentByBot(id: string): boolean;
}

/** Messages older than this are not caught up on (like Telegram keeping updates for a day). */
export const CATCH_UP_WINDOW_MS = 24 * 3600_000;
/**
 * Gateway messages waiting for `push` at most (while the runtime's queue is full, push waits;
 * the gateway does not). One more ends the listen: the supervisor starts a new session, whose
 * catch-up reads them over REST from the positions, at the runtime's pace.
 */
export const MAX_WAITING = 1000;
const PAGE = 100;
const MAX_PAGES = 20;

export class Intake {
  readonly #deps: IntakeDeps;
  readonly #positions: Positions;
  readonly #done = new BoundedSet<string>(20_000);

  constructor(deps: IntakeDeps) {
    this.#deps = deps;
    this.#positions = new Positions({
      log: deps.log,
      ...(deps.state ? { state: deps.state } : {}),
      ...(deps.stateDir ? { legacyDir: deps.stateDir } : {}),
      ...(deps.storage ? { storage: deps.storage } : {}),
    });
  }

  /** Channels with traffic (that have a position). */
  get tracked(): number {
    return this.#positions.size;
  }

  /** Starts one listen's processing. */
  start(push: Push, signal: AbortSignal, maxWaiting = MAX_WAITING): IntakeRun {
    return new IntakeRun(this, push, signal, maxWaiting);
  }

  /** Remembers a channel the moment one of its messages arrives, before it is pushed. */
  track(channelId: string, messageId: string): void {
    this.#positions.track(channelId, messageId);
  }

  /** Reads the saved positions: when a listen starts (another node may have moved them since). */
  load(): Promise<void> {
    return this.#positions.load();
  }

  /** Saves the positions now; never rejects (a failure is logged). */
  flush(): Promise<void> {
    return this.#positions.flush();
  }

  /**
   * Whether a dispatch or REST item can be placed at all (a message id and a channel id);
   * one that cannot is logged and skipped here, since no position can move past it.
   */
  placeable(raw: unknown): raw is RawMessage {
    const ok = isRecord(raw) && typeof raw.id === 'string' && /^\d{1,20}$/.test(raw.id) && typeof raw.channel_id === 'string';
    if (!ok) this.#deps.log.warn({ id: isRecord(raw) && typeof raw.id === 'string' ? raw.id.slice(0, 40) : kindOf(isRecord(raw) ? raw.id : raw) }, 'a Discord message without a usable id or channel_id; skipped');
    return ok;
  }

  async process(raw: RawMessage, bot: BotIdentity, push: Push, fromGateway: boolean): Promise<void> {
    if (!this.placeable(raw)) return;
    const position = this.#positions.track(raw.channel_id, raw.id);
    if (!this.#done.has(raw.id)) {
      let message;
      try {
        checkMessage(raw);
        position.info ??= await this.#info(raw, fromGateway);
        message = normalise(raw, { channel: this.#deps.name, bot, info: position.info, sentByBot: (id) => this.#deps.sentByBot(id) });
      } catch (error) {
        if (!(error instanceof MalformedPayload)) throw error;
        // skipped for good (a re-read over REST would give the same): the position moves past it
        this.#deps.log.warn({ id: raw.id, discordChannel: raw.channel_id, reason: error.message }, 'could not read a Discord message; skipped');
      }
      if (message) {
        const result = await push(await this.#withAttachments(message, raw));
        this.#deps.log.debug({ id: raw.id, chat: message.chat, result }, 'message pushed');
      }
      this.#done.add(raw.id);
    }
    this.#positions.advance(raw.channel_id, raw.id);
  }

  /** Reads every tracked channel again from its position. Returns how many messages were read. */
  async backfill(bot: BotIdentity, push: Push, signal: AbortSignal): Promise<number> {
    let read = 0;
    const floor = snowflakeAt(Date.now() - CATCH_UP_WINDOW_MS);
    for (const [channelId, position] of this.#positions.entries()) {
      let after = isAfter(floor, position.after) ? floor : position.after;
      for (let page = 0; page < MAX_PAGES && !signal.aborted; page++) {
        let batch: RawMessage[];
        try {
          batch = (await this.#deps.rest.get(Routes.channelMessages(channelId), { query: makeURLSearchParams({ after, limit: PAGE }), signal })) as RawMessage[];
        } catch (error) {
          if (!isGone(error)) throw error;
          this.#deps.log.warn({ err: error, discordChannel: channelId }, 'channel no longer readable; not catching up on it');
          this.#positions.forget(channelId);
          break;
        }
        if (!Array.isArray(batch)) {
          this.#deps.log.warn({ discordChannel: channelId }, 'Discord answered a message page that is not a list; not catching up on this channel now');
          break;
        }
        const fetched = batch.length;
        batch = batch.filter((raw: unknown) => this.placeable(raw));
        batch.sort((a, b) => (isAfter(a.id, b.id) ? 1 : -1));
        for (const raw of batch) {
          if (signal.aborted) return read;
          read++;
          await this.process(raw, bot, push, false);
          after = raw.id;
        }
        if (fetched < PAGE) break;
      }
    }
    return read;
  }

  async #info(raw: RawMessage, fromGateway: boolean): Promise<ChannelInfo> {
    if (raw.channel_type !== undefined && !THREAD_TYPES.has(raw.channel_type)) return { type: raw.channel_type };
    // the gateway marks guild messages with guild_id; REST messages never carry it
    if (fromGateway && raw.guild_id === undefined && raw.channel_type === undefined) return { type: 1 };
    return this.#deps.channelInfo(raw.channel_id);
  }

  #withAttachments(message: InboundMessage, raw: RawMessage): Promise<InboundMessage> {
    return withAttachments(
      this.#deps.attachments,
      message,
      attachmentsOf(raw),
      ({ attachment, flags }) => ({
        kind: attachmentKind(attachment, flags),
        name: attachment.filename,
        ...(attachment.content_type ? { mime: attachment.content_type } : {}),
        ...(attachment.size === undefined ? {} : { size: attachment.size }),
        download: async (signal) => {
          const response = await fetch(attachment.url, { signal });
          if (!response.ok || !response.body) throw new Error(`download failed: HTTP ${response.status}`);
          return response.body as unknown as AsyncIterable<Uint8Array>;
        },
      }),
      { oneByOne: true },
    );
  }
}

/** One listen's serial queue: gateway messages and catch-ups, in arrival order. */
export class IntakeRun {
  readonly #intake: Intake;
  readonly #push: Push;
  readonly #signal: AbortSignal;
  #tail: Promise<void> = Promise.resolve();
  /** Tasks enqueued and not finished. */
  #waiting = 0;
  readonly #maxWaiting: number;
  #bot: BotIdentity | undefined;
  #stopped = false;
  #fail!: (error: unknown) => void;
  /** Rejects when processing failed (the listen should end so the supervisor restarts it). */
  readonly failed: Promise<never>;

  constructor(intake: Intake, push: Push, signal: AbortSignal, maxWaiting = MAX_WAITING) {
    this.#intake = intake;
    this.#push = push;
    this.#signal = signal;
    this.#maxWaiting = maxWaiting;
    this.failed = new Promise<never>((_, reject) => (this.#fail = reject));
    this.failed.catch(() => undefined);
  }

  /** The bot's identity, from READY (before any message). */
  identify(bot: BotIdentity): void {
    this.#bot = bot;
  }

  received(raw: RawMessage): void {
    if (this.#stopped || !this.#intake.placeable(raw)) return;
    // Tracked even when not queued: the channel's position stays before this message.
    this.#intake.track(raw.channel_id, raw.id);
    if (this.#waiting >= this.#maxWaiting) {
      this.#stopped = true;
      this.#fail(new Error(`${this.#waiting} Discord messages are waiting for the runtime; starting a new session to read them over REST at its pace`));
      return;
    }
    this.#enqueue(() => this.#intake.process(raw, this.#requireBot(), this.#push, true));
  }

  /** Messages and catch-ups queued and not finished. */
  get waiting(): number {
    return this.#waiting;
  }

  /** A new gateway session began: catch up on every channel that had traffic. */
  catchUp(log: Logger): void {
    if (this.#intake.tracked === 0) return;
    this.#enqueue(async () => {
      const read = await this.#intake.backfill(this.#requireBot(), this.#push, this.#signal);
      log.info({ channels: this.#intake.tracked, read }, 'caught up over REST after a new gateway session');
    });
  }

  /** Stops taking messages and saves the positions (resolved once saved or the failure logged). */
  stop(): Promise<void> {
    this.#stopped = true;
    return this.#intake.flush();
  }

  /** Resolves when everything queued so far has been handled. */
  idle(): Promise<void> {
    return this.#tail;
  }

  #requireBot(): BotIdentity {
    if (!this.#bot) throw new Error('a message arrived before READY');
    return this.#bot;
  }

  #enqueue(task: () => Promise<void>): void {
    this.#waiting++;
    this.#tail = this.#tail
      .then(async () => {
        if (this.#stopped || this.#signal.aborted) return;
        await task();
      })
      .catch((error: unknown) => {
        if (!this.#stopped && !this.#signal.aborted) this.#fail(error);
        this.#stopped = true;
      })
      .finally(() => {
        this.#waiting--;
      });
  }
}
