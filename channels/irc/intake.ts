/**
 * Inbound messages of one IRC session, pushed one at a time in the order the server sent
 * them. IRC cannot be asked to wait or to send a line again: while the runtime's queue is full
 * (push waits), lines keep arriving. So at most `max` messages wait here; past it a message is
 * dropped — logged when the overload starts and, with how many went, when it ends — rather
 * than memory growing until the daemon falls over and loses them all.
 *
 * For the same reason a push the runtime refuses while still listening (its store fails: a
 * full disk, a lock, a lost connection) is not given up: the message is held, in order, and
 * offered again with a backoff (0.25 s doubling to 5 s, with jitter) until it is stored. Only a refusal once
 * `signal` aborted (a shutdown) ends the session.
 */
import type { Logger } from 'pino';
import { pause } from '../../src/abort.ts';
import type { InboundMessage, Push } from '../../src/channel.ts';
import { backoffDelay } from '../../src/backoff.ts';

/** Messages waiting for `push` at most. */
export const MAX_WAITING_MESSAGES = 1000;

export class InboundQueue {
  readonly #push: Push;
  readonly #log: Logger;
  readonly #max: number;
  /** Called once, with the first error push rejects with (the session should end). */
  readonly #onFailure: (error: unknown) => void;
  #tail: Promise<void> = Promise.resolve();
  #waiting = 0;
  #dropped = 0;
  #failure: unknown;

  /** The listen's signal: a refused push is offered again while it has not aborted. Omitted: the first refusal ends it. */
  readonly #signal: AbortSignal | undefined;

  constructor(options: { readonly push: Push; readonly log: Logger; readonly onFailure: (error: unknown) => void; readonly max?: number; readonly signal?: AbortSignal }) {
    this.#push = options.push;
    this.#signal = options.signal;
    this.#log = options.log;
    this.#onFailure = options.onFailure;
    this.#max = options.max ?? MAX_WAITING_MESSAGES;
  }

  /** Messages waiting or being pushed. */
  get waiting(): number {
    return this.#waiting;
  }

  /** The error push rejected with, if it did (later messages are not pushed). */
  get failure(): unknown {
    return this.#failure;
  }

  add(message: InboundMessage): void {
    if (this.#waiting >= this.#max) {
      if (this.#dropped++ === 0) this.#log.warn({ waiting: this.#waiting }, `${this.#waiting} IRC messages are waiting for the runtime; dropping new ones until there is room`);
      return;
    }
    if (this.#dropped > 0) {
      this.#log.warn({ dropped: this.#dropped }, `${this.#dropped} IRC messages were dropped while the runtime was full`);
      this.#dropped = 0;
    }
    this.#waiting++;
    this.#tail = this.#tail.then(async () => {
      try {
        if (this.#failure === undefined) await this.#offer(message);
      } catch (error) {
        this.#failure = error;
        this.#onFailure(error);
      } finally {
        this.#waiting--;
      }
    });
  }

  /** Pushes `message`, offering it again while push refuses it and the listen goes on. */
  async #offer(message: InboundMessage): Promise<void> {
    const signal = this.#signal;
    for (let attempt = 0; ; attempt++) {
      try {
        await this.#push(message);
        if (attempt > 0) this.#log.info({ id: message.id, attempts: attempt + 1 }, 'IRC message stored after being refused');
        return;
      } catch (error) {
        if (!signal || signal.aborted) throw error;
        if (attempt === 0) this.#log.warn({ err: error, id: message.id }, 'IRC message refused (IRC cannot send it again): holding it and offering it again');
        if (!(await pause(backoffDelay(attempt, { initialMs: 250, maxMs: 5000 }), signal))) throw error;
      }
    }
  }

  /** Resolves when every message added so far has been pushed (or dropped after a failure). */
  idle(): Promise<void> {
    return this.#tail;
  }
}
