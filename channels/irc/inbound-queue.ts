/**
 * Inbound messages of one IRC session, pushed one at a time in the order the server sent
 * them. IRC cannot be asked to wait or to send a line again: while the runtime's queue is full
 * (push waits), lines keep arriving. So at most `max` messages wait here; past it a message is
 * dropped — logged when the overload starts and, with how many went, when it ends — rather
 * than memory growing until the daemon falls over and loses them all.
 */
import type { Logger } from 'pino';
import type { InboundMessage, Push } from '../../src/channel.ts';

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

  constructor(options: { readonly push: Push; readonly log: Logger; readonly onFailure: (error: unknown) => void; readonly max?: number }) {
    this.#push = options.push;
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
        if (this.#failure === undefined) await this.#push(message);
      } catch (error) {
        this.#failure = error;
        this.#onFailure(error);
      } finally {
        this.#waiting--;
      }
    });
  }

  /** Resolves when every message added so far has been pushed (or dropped after a failure). */
  idle(): Promise<void> {
    return this.#tail;
  }
}
