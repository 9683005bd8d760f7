/**
 * Sends recorded replies: in order per conversation, one delivery per conversation at a
 * time, each send retried with backoff (honouring the platform's retry-after). A reply that
 * still fails stays pending for the next round; a permanent failure is marked dead.
 *
 * A reply goes out as units: its text split to the channel's limit (the first part replacing
 * a streamed draft, when there is one), then its files. Progress is recorded after every unit,
 * so a retry — or a restart — resumes after the last unit that went out, never repeating one.
 *
 * When recording that fails (a full disk), what went out is remembered in memory instead and
 * recorded once the disk takes writes again, so this process never sends a unit twice; only a
 * restart before then (a crash while the disk is full) sends that unit once more.
 */
import type { Logger } from 'pino';
import { canEdit, canSendFiles, hasMessageLimit, SendError, type Channel, type OutboundFile } from '../channel.ts';
import { refOf } from '../conversation.ts';
import { splitMessage } from '../outbound/split.ts';
import type { Outbox, OutboxEntry, Reply } from '../store/outbox.ts';
import type { Sql } from '../store/sql.ts';
import { backoffDelay, sleep } from '../backoff.ts';
import { FloodWaitError, type ChannelLookup } from './flood.ts';

export interface DeliveryOptions {
  /** Tries per unit within one round. @default 5 */
  readonly attemptsPerRound: number;
  /** First retry delay. @default 500 */
  readonly initialBackoffMs: number;
  /** Longest retry delay (also caps a platform's retry-after). @default 30000 */
  readonly maxBackoffMs: number;
}

export const defaultDeliveryOptions: DeliveryOptions = { attemptsPerRound: 5, initialBackoffMs: 500, maxBackoffMs: 30_000 };

export interface DeliveryEvents {
  onSent?(channel: string): void;
  /** A round of one conversation ended (whatever its outcome). Must not reject. */
  onRoundEnd?(): Promise<void>;
  /**
   * An outbox read or write failed; true when it was the store failing (a full disk, a lock, a
   * lost connection): what went out is then remembered here and the round is tried again
   * later, not thrown.
   */
  onWriteFailed?(error: unknown, what: string): boolean;
}

/** One thing to put on the platform: a text part (the first may replace a draft) or a file. */
type Unit = { readonly kind: 'text'; readonly text: string; readonly first: boolean } | { readonly kind: 'file'; readonly file: OutboundFile };

/** The units of a reply on a channel, in order (deterministic: progress counts them). */
export function unitsOf(reply: Reply, channel: Channel): Unit[] {
  const parts = hasMessageLimit(channel)
    ? splitMessage(reply.text, channel.maxMessageLength, channel.measure ? { measure: (text) => channel.measure!(text) } : {})
    : reply.text === ''
      ? []
      : [reply.text];
  return [...parts.map((text, index) => ({ kind: 'text' as const, text, first: index === 0 })), ...(reply.files ?? []).map((file) => ({ kind: 'file' as const, file }))];
}

/**
 * A conversation's pending replies, read inside the transaction that records its turn's reply
 * (src/runtime/records.ts): the round right after that commit starts from them instead of a read
 * of its own — on PostgreSQL the read travels in the commit's write. Taken from
 * {@link Delivery.ahead} when no round of the conversation runs; used by the next
 * {@link Delivery.deliver} only if its transaction committed and no round of the conversation
 * started since (one may have sent some of those rows), else read again.
 */
export interface PendingAhead {
  /** Issues the read on `tx`, the recording transaction; its promise settles with the statement. */
  read(tx: Sql): Promise<unknown>;
}

class Ahead implements PendingAhead {
  rows: Promise<OutboxEntry[]> | undefined;
  readonly #outbox: Outbox;
  readonly conversation: string;
  /** {@link Delivery}'s round count when it was taken. */
  readonly stamp: number;

  constructor(outbox: Outbox, conversation: string, stamp: number) {
    this.#outbox = outbox;
    this.conversation = conversation;
    this.stamp = stamp;
  }

  read(tx: Sql): Promise<unknown> {
    return (this.rows = this.#outbox.in(tx).pending(this.conversation));
  }
}

export class Delivery {
  readonly #outbox: Outbox;
  readonly #channels: ChannelLookup;
  readonly #options: DeliveryOptions;
  readonly #log: Logger;
  readonly #events: DeliveryEvents;
  /** The tail of each conversation's delivery chain, so rounds never overlap. */
  readonly #chains = new Map<string, Promise<void>>();
  /** Outbox ids whose end (sent, or dead with this error) went out but could not be recorded yet. */
  readonly #unrecorded = new Map<number, { dead?: string }>();
  /** Units out per outbox id whose progress could not be recorded yet. */
  readonly #progress = new Map<number, number>();
  #stopped = false;
  /** Rounds started, and the count at each conversation's latest start (see {@link ahead}); forgotten in bulk, before {@link #forgotten}. */
  #rounds = 0;
  readonly #roundStarts = new Map<string, number>();
  #forgotten = 0;
  /** Conversations whose round stopped on a failing store: the retry timer and how many in a row. */
  readonly #retries = new Map<string, { timer: NodeJS.Timeout | undefined; attempt: number }>();

  constructor(outbox: Outbox, channels: ChannelLookup, options: DeliveryOptions, log: Logger, events: DeliveryEvents = {}) {
    this.#outbox = outbox;
    this.#channels = channels;
    this.#options = options;
    this.#log = log;
    this.#events = events;
  }

  /** A read of `conversation`'s pending replies for its next round to start from, when none of its rounds runs (see {@link PendingAhead}). */
  ahead(conversation: string): PendingAhead | undefined {
    return this.#stopped || this.#chains.has(conversation) ? undefined : new Ahead(this.#outbox, conversation, this.#rounds);
  }

  /** Sends every pending reply of `conversation`; `ahead`, read in a transaction that committed, may spare the round its read. Never rejects. */
  deliver(conversation: string, signal: AbortSignal, ahead?: PendingAhead): Promise<void> {
    if (this.#stopped) return Promise.resolve();
    const running = this.#chains.get(conversation);
    const rows = running === undefined && ahead instanceof Ahead && ahead.conversation === conversation && this.#fresh(ahead) ? ahead.rows : undefined;
    const previous = running ?? Promise.resolve();
    const next = previous.then(() =>
      this.#round(conversation, signal, rows)
        .then(
          (complete) => (complete ? this.#settled(conversation) : this.#retrySoon(conversation, signal)),
          (error: unknown) => {
            // A read or an unexpected failure: the replies stay pending for the next round.
            if (this.#events.onWriteFailed?.(error, 'read the outbox')) this.#retrySoon(conversation, signal);
            else this.#log.error({ err: error, conversation }, 'delivery round failed; the replies stay pending for the next round');
          },
        )
        .then(() => this.#events.onRoundEnd?.()),
    );
    this.#chains.set(conversation, next);
    void next.finally(() => {
      if (this.#chains.get(conversation) === next) this.#chains.delete(conversation);
    });
    return next;
  }

  /** Sends every pending reply of every conversation (of the channels `include` picks, if given). */
  async deliverAll(signal: AbortSignal, include: (channel: string) => boolean = () => true): Promise<void> {
    let targets;
    try {
      targets = (await this.#outbox.pendingConversations()).filter((row) => include(row.channel));
    } catch (error) {
      this.#log.error({ err: error }, 'could not read the outbox; unsent replies go out at the next round');
      return;
    }
    await Promise.all(targets.map((row) => this.deliver(row.conversation, signal)));
  }

  /** Resolves when no delivery is running. */
  async idle(): Promise<void> {
    while (this.#chains.size > 0) await Promise.all(this.#chains.values());
  }

  /**
   * At shutdown: no more retry rounds, and one last try to record the ends of replies that went
   * out while the store failed — recorded, they are not sent again after the restart (only a
   * crash, or a store still failing now, leaves that at-least-once window open).
   */
  async stop(): Promise<void> {
    this.#stopped = true;
    for (const retry of this.#retries.values()) if (retry.timer) clearTimeout(retry.timer);
    this.#retries.clear();
    await this.idle();
    for (const [id, { dead }] of this.#unrecorded) {
      try {
        if (dead !== undefined) await this.#outbox.markDead(id, dead);
        else await this.#outbox.markSent(id);
        this.#unrecorded.delete(id);
      } catch (error) {
        this.#log.warn({ err: error, outbox: id }, 'at shutdown the store still fails: a reply that went out is not recorded as sent and goes out again after the restart');
      }
    }
  }

  /**
   * A round that stopped on the store is tried again, backing off, without waiting for the sweep.
   * Not the sweep's job: the sweep (every 30 s, all conversations) retries replies the platform
   * refused; a store back after a moment's lock or a freed disk should not hold a reply that long,
   * and a per-conversation backoff keeps a store that stays down from being hammered.
   */
  #retrySoon(conversation: string, signal: AbortSignal): void {
    if (this.#stopped || signal.aborted) return;
    const retry = this.#retries.get(conversation) ?? { timer: undefined, attempt: 0 };
    this.#retries.set(conversation, retry);
    if (retry.timer) return;
    const wait = backoffDelay(retry.attempt++, { initialMs: this.#options.initialBackoffMs, maxMs: this.#options.maxBackoffMs });
    retry.timer = setTimeout(() => {
      retry.timer = undefined;
      void this.deliver(conversation, signal);
    }, wait);
    retry.timer.unref();
  }

  #settled(conversation: string): void {
    const retry = this.#retries.get(conversation);
    if (retry?.timer) clearTimeout(retry.timer);
    this.#retries.delete(conversation);
  }

  /** Whether no round of its conversation started since `ahead` was taken (so none sent any of its rows). */
  #fresh(ahead: Ahead): boolean {
    return ahead.stamp >= this.#forgotten && (this.#roundStarts.get(ahead.conversation) ?? -1) <= ahead.stamp;
  }

  /** Sends what is pending (read now, unless `ahead` has it); false when it stopped because the store failed (see {@link #retrySoon}). */
  async #round(conversation: string, signal: AbortSignal, ahead?: Promise<OutboxEntry[]>): Promise<boolean> {
    this.#roundStarts.set(conversation, ++this.#rounds);
    if (this.#roundStarts.size > 1000) {
      // a bound: a read taken before this makes its round read again
      this.#roundStarts.clear();
      this.#forgotten = this.#rounds;
    }
    for (const entry of await (ahead ?? this.#outbox.pending(conversation))) {
      if (signal.aborted) return true;
      const unrecorded = this.#unrecorded.get(entry.id);
      if (unrecorded) {
        // Out already: only its record is missing. Keep order: later replies wait for it.
        if (!(await this.#finish(entry.id, entry.message.channel, unrecorded.dead, false))) return false;
        continue;
      }
      const channel = this.#channels.get(entry.message.channel);
      const log = this.#log.child({ conversation, outbox: entry.id });
      if (!channel) {
        log.warn({ channel: entry.message.channel }, 'reply waits: its channel is not configured; it will be sent when the channel is back');
        return true;
      }
      const units = unitsOf(entry.message, channel);
      let dead: string | undefined;
      for (let index = Math.max(entry.progress, this.#progress.get(entry.id) ?? 0); index < units.length && dead === undefined; index++) {
        const outcome = await this.#sendWithRetries(channel, entry.id, entry.message, units[index]!, signal, log);
        if (outcome === 'retry later') return true; // keep order: this unit and later replies wait (the sweep retries)
        if (typeof outcome === 'object') dead = outcome.dead;
        else if (index + 1 < units.length) await this.#recordProgress(entry.id, index + 1);
      }
      if (dead === undefined) this.#events.onSent?.(channel.name);
      if (!(await this.#finish(entry.id, channel.name, dead, true))) return false;
    }
    return true;
  }

  /**
   * Records a reply's end (sent, or dead); when the disk is full it is remembered and tried
   * again at the next round. Returns false when it is still not recorded.
   */
  async #finish(id: number, channel: string, dead: string | undefined, first: boolean): Promise<boolean> {
    try {
      if (dead !== undefined) await this.#outbox.markDead(id, dead);
      else await this.#outbox.markSent(id);
    } catch (error) {
      if (!this.#events.onWriteFailed?.(error, `record reply ${id} as ${dead === undefined ? 'sent' : 'undeliverable'}`)) throw error;
      if (first) this.#log.warn({ outbox: id, channel }, 'reply sent, but the store failed so it cannot be marked sent yet; it is remembered and not sent again');
      this.#unrecorded.set(id, dead === undefined ? {} : { dead });
      return false;
    }
    this.#unrecorded.delete(id);
    this.#progress.delete(id);
    return true;
  }

  async #recordProgress(id: number, units: number): Promise<void> {
    this.#progress.set(id, units);
    try {
      await this.#outbox.markProgress(id, units);
    } catch (error) {
      if (!this.#events.onWriteFailed?.(error, `record the progress of reply ${id}`)) throw error;
    }
  }

  async #sendUnit(channel: Channel, reply: Reply, unit: Unit): Promise<void> {
    const ref = refOf(reply);
    if (unit.kind === 'file') {
      if (canSendFiles(channel)) return channel.sendFile(ref, unit.file);
      return channel.send({ ...ref, text: `(I attached the file ${unit.file.name}, but this channel cannot carry files.)` });
    }
    if (unit.first && reply.draftId !== undefined && canEdit(channel)) {
      try {
        return await channel.edit(ref, reply.draftId, unit.text);
      } catch (error) {
        if (!(error instanceof SendError && error.permanent)) throw error;
        this.#log.warn({ err: error, conversation: ref.chat }, 'the streamed draft could not be finalised (deleted?); sending the reply as a new message');
      }
    }
    return channel.send({ ...ref, text: unit.text, ...(unit.first && reply.replyTo !== undefined ? { replyTo: reply.replyTo } : {}) });
  }

  async #sendWithRetries(channel: Channel, id: number, reply: Reply, unit: Unit, signal: AbortSignal, log: Logger): Promise<'sent' | { dead: string } | 'retry later'> {
    // Counts failed sends only: a flood wait is no failure.
    let failures = 0;
    while (failures < this.#options.attemptsPerRound) {
      try {
        await this.#sendUnit(channel, reply, unit);
        return 'sent';
      } catch (error) {
        if (error instanceof FloodWaitError) {
          // Refused before the platform: the chat is inside a wait the platform asked for. Not
          // a failed attempt — wait it out (in steps of at most maxBackoffMs) and send then.
          log.debug({ waitMs: error.retryAfterMs }, 'reply waits for the platform\'s flood control');
          try {
            await sleep(Math.min(error.retryAfterMs!, this.#options.maxBackoffMs), signal);
          } catch {
            return 'retry later';
          }
          continue;
        }
        if (error instanceof SendError && error.permanent) {
          if (unit.kind === 'file') {
            log.error({ err: error, file: unit.file.name }, 'file cannot be delivered (permanent error); skipping it');
            return 'sent';
          }
          log.error({ err: error }, 'reply cannot be delivered (permanent error); giving up on it');
          return { dead: error.message };
        }
        try {
          await this.#outbox.markAttempt(id, error instanceof Error ? error.message : String(error));
        } catch (failure) {
          // Only a counter and the last error: losing it loses nothing.
          if (!this.#events.onWriteFailed?.(failure, `count a failed send of reply ${id}`)) throw failure;
        }
        const attempt = failures++;
        const last = failures >= this.#options.attemptsPerRound;
        const wait =
          error instanceof SendError && error.retryAfterMs !== undefined
            ? Math.min(error.retryAfterMs, this.#options.maxBackoffMs)
            : backoffDelay(attempt, { initialMs: this.#options.initialBackoffMs, maxMs: this.#options.maxBackoffMs });
        log.warn({ err: error, attempt: attempt + 1, retryInMs: last ? undefined : wait }, last ? 'send failed; reply stays pending for the next round' : 'send failed; retrying');
        if (last) return 'retry later';
        try {
          await sleep(wait, signal);
        } catch {
          return 'retry later';
        }
      }
    }
    return 'retry later';
  }
}
