/**
 * Sends recorded replies: in order per conversation, one delivery per conversation at a
 * time, each send retried with backoff (honouring the platform's retry-after). A reply that
 * still fails stays pending for the next round; a permanent failure is marked dead.
 */
import type { Logger } from 'pino';
import { SendError, type Channel } from '../channel.ts';
import type { Outbox } from '../store/outbox.ts';
import { backoffDelay, sleep } from './backoff.ts';

export interface DeliveryOptions {
  /** Tries per reply within one round. @default 5 */
  readonly attemptsPerRound: number;
  /** First retry delay. @default 500 */
  readonly initialBackoffMs: number;
  /** Longest retry delay (also caps a platform's retry-after). @default 30000 */
  readonly maxBackoffMs: number;
}

export const defaultDeliveryOptions: DeliveryOptions = { attemptsPerRound: 5, initialBackoffMs: 500, maxBackoffMs: 30_000 };

export interface DeliveryEvents {
  onSent?(channel: string): void;
}

export class Delivery {
  readonly #outbox: Outbox;
  readonly #channels: ReadonlyMap<string, Channel>;
  readonly #options: DeliveryOptions;
  readonly #log: Logger;
  readonly #events: DeliveryEvents;
  /** The tail of each conversation's delivery chain, so rounds never overlap. */
  readonly #chains = new Map<string, Promise<void>>();

  constructor(outbox: Outbox, channels: ReadonlyMap<string, Channel>, options: DeliveryOptions, log: Logger, events: DeliveryEvents = {}) {
    this.#outbox = outbox;
    this.#channels = channels;
    this.#options = options;
    this.#log = log;
    this.#events = events;
  }

  /** Sends every pending reply of `conversation`. Never rejects. */
  deliver(conversation: string, signal: AbortSignal): Promise<void> {
    const previous = this.#chains.get(conversation) ?? Promise.resolve();
    const next = previous.then(() => this.#round(conversation, signal));
    this.#chains.set(conversation, next);
    void next.finally(() => {
      if (this.#chains.get(conversation) === next) this.#chains.delete(conversation);
    });
    return next;
  }

  /** Sends every pending reply of every conversation (of one channel, if given). */
  async deliverAll(signal: AbortSignal, channel?: string): Promise<void> {
    const targets = this.#outbox.pendingConversations().filter((row) => channel === undefined || row.channel === channel);
    await Promise.all(targets.map((row) => this.deliver(row.conversation, signal)));
  }

  /** Resolves when no delivery is running. */
  async idle(): Promise<void> {
    while (this.#chains.size > 0) await Promise.all(this.#chains.values());
  }

  async #round(conversation: string, signal: AbortSignal): Promise<void> {
    for (const entry of this.#outbox.pending(conversation)) {
      if (signal.aborted) return;
      const channel = this.#channels.get(entry.message.channel);
      const log = this.#log.child({ conversation, outbox: entry.id });
      if (!channel) {
        log.warn({ channel: entry.message.channel }, 'reply waits: its channel is not configured; it will be sent when the channel is back');
        return;
      }
      if (!(await this.#sendWithRetries(channel, entry.id, entry.message, signal, log))) return; // keep order: later replies wait
    }
  }

  async #sendWithRetries(
    channel: Channel,
    id: number,
    message: Parameters<Channel['send']>[0],
    signal: AbortSignal,
    log: Logger,
  ): Promise<boolean> {
    for (let attempt = 0; attempt < this.#options.attemptsPerRound; attempt++) {
      try {
        await channel.send(message);
        this.#outbox.markSent(id);
        this.#events.onSent?.(channel.name);
        return true;
      } catch (error) {
        const text = error instanceof Error ? error.message : String(error);
        if (error instanceof SendError && error.permanent) {
          this.#outbox.markDead(id, text);
          log.error({ err: error }, 'reply cannot be delivered (permanent error); giving up on it');
          return true;
        }
        this.#outbox.markAttempt(id, text);
        const last = attempt + 1 >= this.#options.attemptsPerRound;
        const wait =
          error instanceof SendError && error.retryAfterMs !== undefined
            ? Math.min(error.retryAfterMs, this.#options.maxBackoffMs)
            : backoffDelay(attempt, { initialMs: this.#options.initialBackoffMs, maxMs: this.#options.maxBackoffMs });
        log.warn({ err: error, attempt: attempt + 1, retryInMs: last ? undefined : wait }, last ? 'send failed; reply stays pending for the next round' : 'send failed; retrying');
        if (last) return false;
        try {
          await sleep(wait, signal);
        } catch {
          return false;
        }
      }
    }
    return false;
  }
}
