/**
 * How `send` learns what became of its lines. IRC acknowledges nothing, but a server handles a
 * client's commands in order: after the PRIVMSG lines of one reply part the channel sends
 * `PING :sbd<n>`, and when the PONG comes back every error about those lines (401 no such
 * nick, 403 no such channel, 404 cannot send to channel) has already arrived. The channel sends
 * one part at a time, so errors about the watched target belong to it.
 */
import type { Logger } from 'pino';
import { sameNick } from './inbound.ts';

/** Why a delivery failed: permanent (the target does not exist) or worth retrying. */
export class DeliveryFailure extends Error {
  readonly permanent: boolean;
  readonly retryAfterMs: number | undefined;
  constructor(message: string, permanent: boolean, retryAfterMs?: number) {
    super(message);
    this.name = 'DeliveryFailure';
    this.permanent = permanent;
    this.retryAfterMs = retryAfterMs;
  }
}

export const notConnected = (): DeliveryFailure => new DeliveryFailure('not connected to the IRC server', false);

interface Pending {
  readonly token: string;
  readonly resolve: () => void;
  readonly reject: (error: DeliveryFailure) => void;
}

let counter = 0;

export class DeliveryBarrier {
  readonly #ping: (token: string) => void;
  readonly #log: Logger;
  readonly #timeoutMs: number;
  #pending: Pending | undefined;
  /** The target of the delivery in progress, and what the server said was wrong with it. */
  #watched: { readonly target: string; failure?: DeliveryFailure } | undefined;

  constructor(ping: (token: string) => void, log: Logger, timeoutMs: number) {
    this.#ping = ping;
    this.#log = log;
    this.#timeoutMs = timeoutMs;
  }

  /** A delivery to `target` starts: errors the server reports about it from now on are kept. */
  watch(target: string): void {
    this.#watched = { target };
  }

  /**
   * Resolves once the server has handled everything sent so far; rejects with what it said
   * about the watched target. With no PONG in time, assumes the lines went out (and warns).
   */
  confirm(): Promise<void> {
    const watched = this.#watched;
    if (watched?.failure) return Promise.reject(watched.failure);
    const token = `sbd${++counter}`;
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        if (this.#pending?.token !== token) return;
        this.#pending = undefined;
        this.#log.warn({ target: watched?.target, timeoutMs: this.#timeoutMs }, 'IRC server did not confirm a message in time; assuming it went out');
        resolve();
      }, this.#timeoutMs);
      this.#pending = {
        token,
        resolve: () => {
          clearTimeout(timer);
          if (watched?.failure) reject(watched.failure);
          else resolve();
        },
        reject: (error) => {
          clearTimeout(timer);
          reject(error);
        },
      };
      this.#ping(token);
    });
  }

  /** A PONG from the server. */
  pong(token: string): void {
    const pending = this.#pending;
    if (!pending || pending.token !== token) return;
    this.#pending = undefined;
    pending.resolve();
  }

  /** The server refused a message to `target` (401, 403, 404, 406); `failure` classifies it. */
  targetError(target: string, failure: () => DeliveryFailure): boolean {
    const watched = this.#watched;
    if (!watched || !sameNick(watched.target, target)) return false;
    watched.failure ??= failure();
    return true;
  }

  /**
   * The connection is over. A delivery still waiting went out if we quit (the server handles
   * our lines before the QUIT that follows them, even while it throttles us); if the link was
   * lost, nobody knows, and the part is sent again.
   */
  settle(quitting: boolean): void {
    const pending = this.#pending;
    this.#pending = undefined;
    if (!pending) return;
    if (quitting) pending.resolve();
    else pending.reject(new DeliveryFailure('the connection closed before the server confirmed the message', false));
  }
}
