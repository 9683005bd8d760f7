/**
 * The IRC channel (irc-framework 4.14 for the connection, TLS, CAP / SASL PLAIN and PASS).
 *
 * Conversations: a channel is a group chat (chat = its name, lower-cased); a private message
 * is direct (chat = the sender's nick, lower-cased). No threads, no edits, no files, no typing.
 * account = the configured nick, even while we use an alternate (`nick_`) because ours was
 * taken; the configured nick is regained when its holder leaves, and retried periodically.
 *
 * Inbound: each PRIVMSG (and ACTION) is pushed in order; IRC has no acknowledgement and never
 * redelivers, so there is nothing to ack — a message sent while we were disconnected is lost
 * to us, and ids only need to be unique (see inbound.ts).
 *
 * Outbound: a reply part (markdown, at most {@link IRC_REPLY_PART} characters, split by the
 * outbox) is flattened to plain text and sent as one PRIVMSG per line, each cut to fit the
 * 512-byte line the server relays. Lines are paced by one token bucket per channel
 * (`lines_per_second`, a small burst) across every target, so the server never throttles or
 * kicks us for flooding; `send` resolves once the server has answered a PING sent after the
 * lines (so a "no such nick / channel" error is reported to the outbox as permanent).
 * A part cut short by a lost connection is sent again in full on retry (IRC cannot tell which
 * of its lines arrived; a repeated line is better than a missing one).
 *
 * Reconnection: a session never reconnects by itself; when the connection ends `listen`
 * rejects and the supervisor starts it again with backoff. `livenessTimeoutMs` is watched by
 * the supervisor: any line from the server counts as life, and after `pingAfterMs` of silence
 * the channel sends a PING of its own.
 */
import { SendError, type Channel, type ChannelContext, type ListenLink, type LivenessWatched, type MessageLimit, type OutboundMessage, type Push } from '../../src/channel.ts';
import type { IrcConfig } from './config.ts';
import { normalise } from './inbound.ts';
import { InboundQueue } from './intake.ts';
import { Pacer, type Clock } from './pacer.ts';
import { renderLines } from './render.ts';
import { DeliveryFailure } from './barrier.ts';
import { IrcSession, type SessionTimings } from './session.ts';
import { BoundedMap } from '../../src/bounded-map.ts';

export type IrcChannel = Channel & MessageLimit & LivenessWatched;

export interface IrcChannelOptions extends Partial<SessionTimings> {
  /** No line from the server for this long: the supervisor restarts the listen. @default 150000 */
  readonly livenessTimeoutMs?: number;
  /** Lines that may go out at once after a quiet spell. @default 3 */
  readonly burst?: number;
  /** For tests of the pacing. */
  readonly clock?: Clock;
}

/** Characters per reply part the outbox hands to `send` (each becomes one or more lines). */
export const IRC_REPLY_PART = 2000;

const defaults: SessionTimings = {
  rejoinDelayMs: 5000,
  regainIntervalMs: 60_000,
  pingAfterMs: 60_000,
  joinTimeoutMs: 15_000,
  registrationTimeoutMs: 60_000,
  confirmTimeoutMs: 30_000,
};

/** Inbound messages remembered to address the reply to their sender (`alice: …`). */
const REMEMBERED = 2000;

export function createIrcChannel(config: IrcConfig, ctx: ChannelContext, options: IrcChannelOptions = {}): IrcChannel {
  const log = ctx.log;
  const timings: SessionTimings = {
    rejoinDelayMs: options.rejoinDelayMs ?? defaults.rejoinDelayMs,
    regainIntervalMs: options.regainIntervalMs ?? defaults.regainIntervalMs,
    pingAfterMs: options.pingAfterMs ?? defaults.pingAfterMs,
    joinTimeoutMs: options.joinTimeoutMs ?? defaults.joinTimeoutMs,
    registrationTimeoutMs: options.registrationTimeoutMs ?? defaults.registrationTimeoutMs,
    confirmTimeoutMs: options.confirmTimeoutMs ?? defaults.confirmTimeoutMs,
  };
  const pacer = new Pacer(config.lines_per_second, options.burst ?? 3, options.clock);
  const loopback = /^(127\.|localhost$|::1$|\[::1\]$)/.test(config.host);
  if (!config.tls && !loopback && (config.password !== undefined || config.sasl !== undefined || config.nickserv_password !== undefined)) {
    log.warn({ host: config.host }, 'IRC passwords will cross the network in plain text: set tls = true');
  }
  const username = config.nick.toLowerCase().replace(/[^a-z0-9]/g, '').slice(0, 10) || 'switchbrd';
  /** Channel messages that addressed us: inbound id → the nick to address the reply to. */
  const addressedBy = new BoundedMap<string, string>(REMEMBERED);
  let current: IrcSession | undefined;
  /** One send at a time: a reply's lines stay together, and the barrier belongs to it. */
  let sending: Promise<unknown> = Promise.resolve();

  function exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const run = sending.then(fn, fn);
    sending = run.catch(() => undefined);
    return run;
  }

  return {
    name: ctx.name,
    maxMessageLength: IRC_REPLY_PART,
    livenessTimeoutMs: options.livenessTimeoutMs ?? 150_000,

    async listen(push: Push, signal: AbortSignal, link: ListenLink): Promise<void> {
      if (signal.aborted) return;
      const stop = new AbortController();
      const onAbort = (): void => stop.abort(signal.reason);
      signal.addEventListener('abort', onAbort, { once: true });
      // pushed one at a time, in the order the server sent them; bounded while push waits
      const inbound = new InboundQueue({ push, log, signal, onFailure: (error) => stop.abort(error) });
      const session: IrcSession = new IrcSession(
        config,
        log,
        {
          ready: () => link.ready(),
          alive: () => link.alive(),
          message: (msg) => {
            const message = normalise(msg, { channel: ctx.name, configuredNick: config.nick, currentNick: session.nick, assistantName: ctx.assistantName, chanTypes: session.chanTypes });
            if (!message) return;
            if (message.direct === false && message.addressed) addressedBy.set(message.id, msg.nick);
            inbound.add(message);
          },
        },
        timings,
        username,
        ctx.assistantName,
      );
      current = session;
      try {
        await session.run(stop.signal);
      } finally {
        signal.removeEventListener('abort', onAbort);
        if (current === session) current = undefined;
      }
      if (inbound.failure !== undefined && !signal.aborted) throw inbound.failure;
    },

    send(message: OutboundMessage): Promise<void> {
      const target = message.chat;
      if (target === '' || /[\s,\0]/.test(target)) return Promise.reject(new SendError(`not an IRC target: ${JSON.stringify(target)}`, { permanent: true }));
      return exclusive(async () => {
        const session = current;
        if (!session?.registered) throw new SendError('not connected to the IRC server');
        const person = message.replyTo === undefined ? undefined : addressedBy.get(message.replyTo);
        if (message.replyTo !== undefined) addressedBy.delete(message.replyTo); // only the first part is addressed
        const lines = renderLines(message.text, target, session.prefixBytes, person === undefined ? '' : `${person}: `);
        session.watch(target);
        try {
          for (const line of lines) {
            await pacer.take();
            session.write(`PRIVMSG ${target} :${line}`);
          }
          if (lines.length === 0) return;
          await pacer.take(); // the PING counts against the server's flood limit too
          await session.confirm();
        } catch (error) {
          if (error instanceof DeliveryFailure) {
            throw new SendError(error.message, { permanent: error.permanent, ...(error.retryAfterMs === undefined ? {} : { retryAfterMs: error.retryAfterMs }), cause: error });
          }
          throw error;
        }
      });
    },
  };
}
