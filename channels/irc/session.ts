/**
 * One connection to an IRC server, from connect to close: irc-framework does the socket, TLS,
 * CAP / SASL PLAIN, PASS, registration and answers the server's PINGs; this class reads the
 * parsed lines and keeps our state — the nick (an alternate when ours is taken, regained when
 * it frees up), our own `nick!user@host` (its length decides how long a line may be), the
 * channels joined (membership.ts; rejoined after a kick), and the delivery barrier of `send` (barrier.ts).
 *
 * It never reconnects: when the connection ends, `run` rejects and the channel supervisor
 * starts a new session with backoff (irc-framework's own auto_reconnect is off).
 */
import { Client, ircLineParser, type IrcMessage } from 'irc-framework';
import type { Logger } from 'pino';
import type { IrcConfig } from './config.ts';
import { DeliveryBarrier, DeliveryFailure, notConnected } from './barrier.ts';
import { alternateNick, connectOptions } from './registration.ts';
import { privmsgOf, sameNick, type IrcPrivmsg } from './inbound.ts';
import { Membership } from './membership.ts';

export interface SessionTimings {
  /** Wait before rejoining a channel we were kicked from. */
  readonly rejoinDelayMs: number;
  /** How often to try to take the configured nick back while on an alternate. */
  readonly regainIntervalMs: number;
  /** Send a PING of our own after this long without a line from the server. */
  readonly pingAfterMs: number;
  /** Report ready even if a channel could not be joined by then. */
  readonly joinTimeoutMs: number;
  /** Give up on a connection that has not registered by then. */
  readonly registrationTimeoutMs: number;
  /** How long `confirm` waits for the server's PONG before assuming the lines went out. */
  readonly confirmTimeoutMs: number;
}

export interface SessionEvents {
  /** A PRIVMSG from someone (not yet normalised). */
  message(msg: IrcPrivmsg): void;
  /** Registered and every configured channel joined (or given up on): once per session. */
  ready(): void;
  /** A line came from the server. */
  alive(): void;
}

/** How long a stopping session waits for the server to close the link after our QUIT. */
const QUIT_WAIT_MS = 1500;

export class IrcSession {
  readonly #config: IrcConfig;
  readonly #log: Logger;
  readonly #events: SessionEvents;
  readonly #timings: SessionTimings;
  readonly #client: Client;
  readonly #channels: Membership;
  readonly #timers = new Set<NodeJS.Timeout>();
  readonly #username: string;
  readonly #realname: string;
  #registered = false;
  #closed = false;
  #readySent = false;
  #nick: string;
  #nickAttempts = 0;
  /** Our `nick!user@host` as the server shows it, once known. */
  #user: string | undefined;
  #host: string | undefined;
  /** Monotonic: a wall clock step must neither stop keepalive PINGs nor send a burst of them. */
  #lastLine = performance.now();
  readonly #barrier: DeliveryBarrier;
  #closeReason: string | undefined;
  /** We sent QUIT (stopping), as opposed to losing the link. */
  #quitting = false;
  #finish: ((error?: Error) => void) | undefined;

  constructor(config: IrcConfig, log: Logger, events: SessionEvents, timings: SessionTimings, username: string, realname: string) {
    this.#config = config;
    this.#log = log;
    this.#events = events;
    this.#timings = timings;
    this.#nick = config.nick;
    this.#channels = new Membership(config.channels);
    this.#client = new Client();
    this.#username = username;
    this.#realname = realname;
    this.#barrier = new DeliveryBarrier((token) => this.#client.raw(`PING :${token}`), log, timings.confirmTimeoutMs);
  }

  /** Registered and not stopping: lines written now reach the server before any QUIT. */
  get registered(): boolean {
    return this.#registered && !this.#closed && !this.#quitting;
  }

  get nick(): string {
    return this.#nick;
  }

  get chanTypes(): string {
    const types = this.#client.network.supports('CHANTYPES');
    return Array.isArray(types) ? types.join('') : typeof types === 'string' ? types : '#&';
  }

  /** Length of `:nick!user@host` once we know our hostmask, else undefined. */
  get prefixBytes(): number | undefined {
    if (this.#user === undefined || this.#host === undefined) return undefined;
    return Buffer.byteLength(`:${this.#nick}!${this.#user}@${this.#host}`, 'utf8');
  }

  /** Whether we are in `channel` right now. */
  inChannel(channel: string): boolean {
    return this.#channels.has(channel);
  }

  /** Whether `channel` is one we join by config (and so rejoin after a kick). */
  configured(channel: string): boolean {
    return this.#channels.entry(channel) !== undefined;
  }

  /** Connects and runs until `signal` aborts (resolves, after QUIT) or the connection ends (rejects). */
  run(signal: AbortSignal): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.#finish = (error) => {
        this.#finish = undefined;
        this.#cleanup();
        if (error) reject(error);
        else resolve();
      };
      const onAbort = (): void => void this.#quit();
      signal.addEventListener('abort', onAbort, { once: true });
      this.#client.on('raw', (event: { line: string; from_server: boolean }) => {
        if (event.from_server) this.#line(event.line);
      });
      this.#client.on('socket close', (error: unknown) => {
        if (error) this.#closeReason ??= error instanceof Error ? error.message : String(error);
      });
      this.#client.on('sasl failed', (event: { reason: string; message?: string }) => {
        this.#closeReason = `SASL authentication failed (${event.reason}${event.message ? `: ${event.message}` : ''})`;
        this.#log.error({ reason: event.reason }, 'IRC SASL authentication failed');
      });
      this.#client.on('close', () => {
        signal.removeEventListener('abort', onAbort);
        this.#closed = true;
        this.#barrier.settle(this.#quitting);
        if (signal.aborted) this.#finish?.();
        else this.#finish?.(new Error(`IRC connection to ${this.#config.host} closed${this.#closeReason ? `: ${this.#closeReason}` : ''}`));
      });
      this.#timer(() => {
        if (!this.#registered) {
          this.#closeReason = `not registered within ${Math.round(this.#timings.registrationTimeoutMs / 1000)} s`;
          this.#client.quit('registration timed out');
        }
      }, this.#timings.registrationTimeoutMs);
      this.#interval(() => this.#keepalive(), Math.max(50, Math.min(this.#timings.pingAfterMs / 2, 15_000)));
      this.#client.connect(connectOptions(this.#config, this.#username, this.#realname));
      this.#log.debug({ host: this.#config.host, tls: this.#config.tls, nick: this.#config.nick }, 'connecting to IRC');
      if (signal.aborted) onAbort();
    });
  }

  /** Writes one raw line (already paced by the caller). */
  write(line: string): void {
    if (!this.registered) throw notConnected();
    this.#client.raw(line);
  }

  /** A delivery to `target` starts (see barrier.ts). */
  watch(target: string): void {
    this.#barrier.watch(target);
  }

  /** Resolves once the server has handled the delivery's lines; rejects with what it said about them. */
  confirm(): Promise<void> {
    if (!this.registered) return Promise.reject(notConnected());
    return this.#barrier.confirm();
  }

  #line(line: string): void {
    this.#lastLine = performance.now();
    this.#events.alive();
    const msg = ircLineParser(line);
    if (!msg) return;
    try {
      this.#handle(msg);
    } catch (error) {
      this.#log.warn({ err: error, command: msg.command }, 'could not handle an IRC line');
    }
  }

  #handle(msg: IrcMessage): void {
    const param = (index: number): string => msg.params[index] ?? '';
    const last = msg.params.at(-1) ?? '';
    switch (msg.command) {
      case '001':
        this.#registered = true;
        this.#nick = param(0) || this.#nick;
        this.#learnMask(/(\S+)!(\S+)@(\S+)\s*$/.exec(last));
        this.#log.info({ host: this.#config.host, nick: this.#nick }, 'registered on IRC');
        this.#afterRegistration();
        return;
      case '396': // RPL_HOSTHIDDEN: our displayed host changed
        if (param(1) !== '') this.#host = param(1);
        return;
      case '432':
      case '433':
      case '437':
        return this.#nickRefused(msg.command, param(1));
      case '464':
        this.#closeReason = 'the server password was rejected';
        return;
      case 'ERROR':
        this.#closeReason = last;
        return;
      case 'PONG':
        this.#barrier.pong(last);
        return;
      case '401':
      case '403':
      case '404':
      case '406':
        return this.#targetError(msg.command, param(1), last);
      case '405':
      case '471':
      case '473':
      case '474':
      case '475':
      case '477':
      case '489':
        return this.#joinFailed(msg.command, param(1), last);
      case 'JOIN':
        return this.#joinSeen(msg, param(0));
      case 'KICK':
        return this.#kicked(msg, param(0), param(1), last);
      case 'PART':
        if (sameNick(msg.nick, this.#nick)) this.#channels.left(param(0));
        return;
      case 'NICK':
        return this.#nickChange(msg.nick, param(0));
      case 'QUIT':
        if (sameNick(msg.nick, this.#config.nick) && !sameNick(this.#nick, this.#config.nick)) this.#regain('it quit');
        return;
      case 'PRIVMSG':
        return this.#privmsg(msg, param(0), last);
      case 'NOTICE':
        // never answered (the loop rule); services' answers are worth a debug line
        if (msg.nick !== '' && /serv$/i.test(msg.nick)) this.#log.debug({ from: msg.nick, notice: last }, 'IRC services notice');
        return;
    }
  }

  #learnMask(match: RegExpExecArray | null): void {
    if (!match || !sameNick(match[1]!, this.#nick)) return;
    this.#user = match[2]!;
    this.#host = match[3]!;
  }

  #afterRegistration(): void {
    if (this.#config.nickserv_password !== undefined) {
      // IDENTIFY <account> <password>: works from an alternate nick too (Atheme, Anope)
      this.#client.raw(`PRIVMSG NickServ :IDENTIFY ${this.#config.nick} ${this.#config.nickserv_password}`);
    }
    for (const channel of this.#channels.wanted) this.#client.join(channel.name, channel.key);
    if (!sameNick(this.#nick, this.#config.nick)) {
      this.#log.warn({ nick: this.#nick, wanted: this.#config.nick }, 'IRC nick in use; using an alternate and trying to regain it');
    }
    this.#interval(() => {
      if (this.registered && !sameNick(this.#nick, this.#config.nick)) this.#regain('periodic retry');
    }, this.#timings.regainIntervalMs);
    if (this.#channels.wanted.length === 0) this.#ready();
    else this.#timer(() => this.#ready(), this.#timings.joinTimeoutMs);
  }

  #ready(): void {
    if (this.#readySent || !this.registered) return;
    this.#readySent = true;
    const missing = this.#channels.missing();
    if (missing.length > 0) this.#log.warn({ rooms: missing }, 'ready without every IRC channel joined');
    this.#events.ready();
  }

  #nickRefused(code: string, nick: string): void {
    if (this.#registered) {
      // our attempt to regain the configured nick failed: keep the alternate
      this.#log.debug({ code, nick }, 'IRC nick still taken');
      return;
    }
    if (code === '432' && this.#nickAttempts === 0) {
      this.#closeReason = `the server refused the nick ${nick} as invalid`;
      this.#client.quit('invalid nick');
      return;
    }
    this.#nickAttempts++;
    if (this.#nickAttempts > 8) {
      this.#closeReason = 'no free nick';
      this.#client.quit('no free nick');
      return;
    }
    this.#nick = alternateNick(this.#config.nick, this.#nickAttempts);
    this.#client.changeNick(this.#nick);
  }

  #regain(why: string): void {
    this.#log.debug({ nick: this.#config.nick, why }, 'trying to regain the IRC nick');
    this.#client.changeNick(this.#config.nick);
  }

  #nickChange(from: string, to: string): void {
    if (sameNick(from, this.#nick)) {
      this.#nick = to;
      if (sameNick(to, this.#config.nick)) this.#log.info({ nick: to }, 'regained the IRC nick');
      return;
    }
    if (sameNick(from, this.#config.nick) && !sameNick(this.#nick, this.#config.nick)) this.#regain('its holder changed nick');
  }

  #joinSeen(msg: IrcMessage, channel: string): void {
    if (!sameNick(msg.nick, this.#nick)) return;
    this.#channels.joined(channel);
    if (msg.ident !== '' && msg.hostname !== '') {
      this.#user = msg.ident;
      this.#host = msg.hostname;
    }
    this.#log.info({ room: channel }, 'joined IRC channel');
    if (this.#channels.settled()) this.#ready();
  }

  #joinFailed(code: string, channel: string, reason: string): void {
    if (!this.configured(channel)) return;
    this.#channels.failed(channel);
    this.#log.warn({ room: channel, code, reason }, 'could not join IRC channel');
    if (this.#channels.settled()) this.#ready();
  }

  #kicked(msg: IrcMessage, channel: string, kicked: string, reason: string): void {
    if (!sameNick(kicked, this.#nick)) return;
    this.#channels.left(channel);
    const entry = this.#channels.entry(channel);
    const rejoin = this.#config.rejoin_on_kick && entry !== undefined;
    this.#log.warn({ room: channel, by: msg.nick, reason, rejoinInMs: rejoin ? this.#timings.rejoinDelayMs : undefined }, 'kicked from IRC channel');
    if (rejoin) {
      this.#timer(() => {
        if (this.registered && !this.inChannel(entry.name)) this.#client.join(entry.name, entry.key);
      }, this.#timings.rejoinDelayMs);
    }
  }

  #targetError(code: string, target: string, reason: string): void {
    const known = this.#barrier.targetError(target, () =>
      code === '404' && !this.inChannel(target) && this.configured(target) && this.#config.rejoin_on_kick
        ? // kicked (or not yet rejoined): retry once we are back in
          new DeliveryFailure(`cannot send to ${target} (${reason}); not in the channel yet`, false, this.#timings.rejoinDelayMs + 1000)
        : new DeliveryFailure(`cannot send to ${target}: ${reason} (${code})`, true),
    );
    if (!known) this.#log.debug({ code, target, reason }, 'IRC error about a target');
  }

  #privmsg(msg: IrcMessage, rawTarget: string, text: string): void {
    const status = this.#client.network.supports('STATUSMSG');
    const prefixes = typeof status === 'string' ? status : Array.isArray(status) ? status.join('') : '';
    const privmsg = privmsgOf(msg, rawTarget, text, { statusPrefixes: prefixes, chanTypes: this.chanTypes, nick: this.#nick });
    if (privmsg) this.#events.message(privmsg);
  }

  #keepalive(): void {
    if (!this.#client.connected) return;
    if (performance.now() - this.#lastLine >= this.#timings.pingAfterMs) {
      this.#client.raw(`PING :keepalive-${Date.now()}`);
      this.#lastLine = performance.now(); // one PING per quiet spell
    }
  }

  async #quit(): Promise<void> {
    if (this.#closed) return this.#finish?.();
    this.#quitting = true;
    this.#client.quit('Switchboard stopping');
    // QUIT is written, then the server closes the link: 'close' finishes the run; don't wait long
    this.#timer(() => {
      this.#closed = true;
      this.#finish?.();
    }, QUIT_WAIT_MS);
  }

  #timer(fn: () => void, ms: number): void {
    const timer = setTimeout(() => {
      this.#timers.delete(timer);
      fn();
    }, ms);
    this.#timers.add(timer);
  }

  #interval(fn: () => void, ms: number): void {
    this.#timers.add(setInterval(fn, ms));
  }

  #cleanup(): void {
    for (const timer of this.#timers) clearTimeout(timer);
    this.#timers.clear();
    this.#barrier.settle(this.#quitting);
    this.#client.removeAllListeners();
    // a socket irc-framework still holds (quit timed out) is dropped
    (this.#client as unknown as { connection?: { end?: () => void } }).connection?.end?.();
  }
}
