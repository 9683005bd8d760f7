/**
 * Runs one channel's `listen` under a restart loop: exponential backoff with jitter, reset
 * after a healthy period, a liveness watchdog, and health state for `status`.
 */
import type { Logger } from 'pino';
import { hasStatusNotes, isLivenessWatched, type Channel, type ListenLink, type Push } from '../channel.ts';
import { systemClock, type Clock } from '../clock.ts';
import { backoffDelay, sleep } from '../backoff.ts';

export type ChannelState = 'starting' | 'running' | 'backoff' | 'stopped';

export interface ChannelHealth {
  readonly name: string;
  readonly state: ChannelState;
  /** Restarts since the daemon started. */
  readonly restarts: number;
  readonly lastError?: string;
  readonly lastErrorAt?: number;
  readonly lastInboundAt?: number;
  /** When the channel entered its current state (ms since the epoch). */
  readonly since: number;
  /** What the channel says an operator must know (see StatusNotes). */
  readonly notes?: readonly string[];
}

export interface SupervisorOptions {
  /** First restart delay. @default 2000 */
  readonly initialBackoffMs: number;
  /** Longest restart delay. @default 60000 */
  readonly maxBackoffMs: number;
  /** A listen that stayed ready this long resets the backoff. @default 60000 */
  readonly healthyAfterMs: number;
  /** How long a listen may take to return after its signal aborts. @default 5000 */
  readonly stopTimeoutMs: number;
  /**
   * Healthy periods and the liveness watchdog are measured on its monotonic clock, so a wall
   * clock jump neither restarts a live channel nor keeps a crashing one from backing off; the
   * times in `health()` are wall times. @default systemClock
   */
  readonly clock?: Clock;
}

export const defaultSupervisorOptions: SupervisorOptions = {
  initialBackoffMs: 2000,
  maxBackoffMs: 60_000,
  healthyAfterMs: 60_000,
  stopTimeoutMs: 5000,
};

/** Why a listen was cut short by the supervisor. */
export class DeafError extends Error {
  constructor(reason: string) {
    super(reason);
    this.name = 'DeafError';
  }
}

export interface SupervisorEvents {
  /** The channel called `ready()`. */
  onReady(name: string): void;
  /** The channel is being restarted after `error`. */
  onRestart?(name: string, error: unknown): void;
}

export class ChannelSupervisor {
  readonly #channel: Channel;
  readonly #push: Push;
  readonly #options: SupervisorOptions;
  readonly #log: Logger;
  readonly #events: SupervisorEvents;
  readonly #clock: Clock;
  #state: ChannelState = 'stopped';
  #since: number;
  #restarts = 0;
  #lastError: string | undefined;
  #lastErrorAt: number | undefined;
  #lastInboundAt: number | undefined;
  /** The listen running now, so an operator can restart it. */
  #attempt: AbortController | undefined;
  #restartAsked = false;

  constructor(channel: Channel, push: Push, options: SupervisorOptions, log: Logger, events: SupervisorEvents) {
    this.#channel = channel;
    this.#options = options;
    this.#log = log;
    this.#events = events;
    this.#clock = options.clock ?? systemClock;
    this.#since = this.#clock.now();
    this.#push = async (message) => {
      this.#lastInboundAt = this.#clock.now();
      return push(message);
    };
  }

  health(): ChannelHealth {
    return {
      name: this.#channel.name,
      state: this.#state,
      restarts: this.#restarts,
      since: this.#since,
      ...(this.#lastError === undefined ? {} : { lastError: this.#lastError, lastErrorAt: this.#lastErrorAt }),
      ...(this.#lastInboundAt === undefined ? {} : { lastInboundAt: this.#lastInboundAt }),
      ...this.#notes(),
    };
  }

  #notes(): { notes?: readonly string[] } {
    if (!hasStatusNotes(this.#channel)) return {};
    try {
      const notes = this.#channel.statusNotes();
      return notes.length > 0 ? { notes } : {};
    } catch {
      return {};
    }
  }

  /**
   * Stops the running listen and starts it again at once (no backoff): the console's restart
   * button. Counted as a restart. Returns false when no listen is running (backing off: it
   * is then started at once too).
   */
  restart(): boolean {
    const attempt = this.#attempt;
    if (attempt && !attempt.signal.aborted) {
      this.#restartAsked = true;
      attempt.abort(new Error('restarted by the operator'));
      return true;
    }
    this.#wake?.abort();
    return false;
  }

  #wake: AbortController | undefined;

  /** Runs until `shutdown` aborts; resolves once the last `listen` has returned (or timed out). */
  async run(shutdown: AbortSignal): Promise<void> {
    let failures = 0;
    while (!shutdown.aborted) {
      const attempt = new AbortController();
      this.#attempt = attempt;
      const onShutdown = (): void => attempt.abort(shutdown.reason);
      shutdown.addEventListener('abort', onShutdown, { once: true });
      let readyAt: number | undefined;
      const clock = this.#clock;
      let lastAlive = clock.monotonic();
      const link: ListenLink = {
        ready: () => {
          if (attempt.signal.aborted || readyAt !== undefined) return;
          readyAt = lastAlive = clock.monotonic();
          this.#setState('running');
          this.#log.info('channel running');
          this.#events.onReady(this.#channel.name);
        },
        alive: () => {
          lastAlive = clock.monotonic();
        },
        deaf: (reason) => {
          if (!attempt.signal.aborted) attempt.abort(new DeafError(reason));
        },
      };
      const watchdog = this.#watchdog(() => lastAlive, link);
      this.#setState('starting');
      let failure: unknown;
      try {
        await this.#listen(attempt.signal, link);
        failure = attempt.signal.aborted ? attempt.signal.reason : new Error('listen returned without being stopped');
      } catch (error) {
        failure = attempt.signal.aborted && !shutdown.aborted ? attempt.signal.reason : error;
      } finally {
        if (watchdog) clearInterval(watchdog);
        shutdown.removeEventListener('abort', onShutdown);
        attempt.abort();
      }
      if (shutdown.aborted) break;

      if ((readyAt !== undefined && clock.monotonic() - readyAt >= this.#options.healthyAfterMs) || this.#restartAsked) failures = 0;
      const delay = this.#restartAsked ? 0 : backoffDelay(failures++, { initialMs: this.#options.initialBackoffMs, maxMs: this.#options.maxBackoffMs });
      this.#restartAsked = false;
      this.#restarts++;
      this.#lastError = failure instanceof Error ? failure.message : String(failure);
      this.#lastErrorAt = this.#clock.now();
      this.#setState('backoff');
      this.#log.warn({ err: failure, restartInMs: delay, restarts: this.#restarts }, 'channel stopped; restarting');
      this.#events.onRestart?.(this.#channel.name, failure);
      // An operator's restart during the backoff ends the wait (not the run).
      const wake = new AbortController();
      this.#wake = wake;
      const onStop = (): void => wake.abort();
      shutdown.addEventListener('abort', onStop, { once: true });
      try {
        await sleep(delay, wake.signal);
      } catch {
        if (shutdown.aborted) break;
      } finally {
        shutdown.removeEventListener('abort', onStop);
        this.#wake = undefined;
      }
    }
    this.#setState('stopped');
  }

  /** Runs one listen; once its signal aborts, waits at most `stopTimeoutMs` for it to return. */
  async #listen(signal: AbortSignal, link: ListenLink): Promise<void> {
    const listening = this.#channel.listen(this.#push, signal, link);
    const stopped = new Promise<'timeout'>((resolve) => {
      const onAbort = (): void => {
        const timer = setTimeout(() => resolve('timeout'), this.#options.stopTimeoutMs);
        timer.unref();
        void listening.finally(() => clearTimeout(timer)).catch(() => undefined);
      };
      if (signal.aborted) onAbort();
      else signal.addEventListener('abort', onAbort, { once: true });
    });
    const outcome = await Promise.race([listening.then(() => 'returned' as const), stopped]);
    if (outcome === 'timeout') {
      listening.catch(() => undefined);
      this.#log.error({ stopTimeoutMs: this.#options.stopTimeoutMs }, 'channel did not stop after being told to; moving on without it');
    }
  }

  #watchdog(lastAlive: () => number, link: ListenLink): NodeJS.Timeout | undefined {
    if (!isLivenessWatched(this.#channel)) return undefined;
    const timeout = this.#channel.livenessTimeoutMs;
    const timer = setInterval(() => {
      const silent = this.#clock.monotonic() - lastAlive();
      if (silent > timeout) link.deaf(`no sign of life for ${Math.round(silent / 1000)} s (liveness timeout ${Math.round(timeout / 1000)} s)`);
    }, Math.max(10, Math.min(timeout / 2, 5000)));
    timer.unref();
    return timer;
  }

  #setState(state: ChannelState): void {
    this.#state = state;
    this.#since = this.#clock.now();
  }
}

export interface SupervisorSetOptions {
  /** What every channel's `listen` pushes to. */
  readonly push: Push;
  readonly supervisor: SupervisorOptions;
  /** Each channel logs through `log.child({ channel })`. */
  readonly log: Logger;
  readonly events: SupervisorEvents;
  /** Aborted on shutdown: every channel stops, and no more changes are accepted. */
  readonly shutdown: AbortSignal;
  /** The name → channel map that delivery sends through; kept in step with the supervisors. */
  readonly channels: Map<string, Channel>;
}

/** A supervisor, what stops it alone, and its run (once started). */
interface Supervised {
  readonly supervisor: ChannelSupervisor;
  readonly stop: AbortController;
  /** Forwards shutdown to `stop`; removed when the channel is stopped alone. */
  readonly onShutdown: () => void;
  run?: Promise<void>;
}

/**
 * The supervised channels of one runtime: started together, then added, replaced or removed
 * one at a time while the others keep running (config reload). A replacement waits for the
 * old channel's `listen` to return before the new one starts, so two never poll at once.
 */
export class SupervisorSet {
  readonly #options: SupervisorSetOptions;
  readonly #entries = new Map<string, Supervised>();
  /** Changes run one at a time. */
  #changing: Promise<unknown> = Promise.resolve();
  #started = false;

  constructor(options: SupervisorSetOptions, channels: readonly Channel[]) {
    this.#options = options;
    for (const channel of channels) {
      if (this.#entries.has(channel.name)) throw new Error(`two channels are named "${channel.name}"; channel names must be unique`);
      options.channels.set(channel.name, channel);
      this.#supervise(channel);
    }
  }

  get size(): number {
    return this.#entries.size;
  }

  health(): ChannelHealth[] {
    return [...this.#entries.values()].map(({ supervisor }) => supervisor.health());
  }

  /** Restarts one channel's listen at once (see ChannelSupervisor.restart); false when there is no such channel. */
  restart(name: string): boolean {
    const entry = this.#entries.get(name);
    if (!entry) return false;
    entry.supervisor.restart();
    return true;
  }

  start(): void {
    this.#started = true;
    for (const entry of this.#entries.values()) entry.run ??= entry.supervisor.run(entry.stop.signal);
  }

  /** Resolves once every channel has stopped (after `shutdown` aborted) and no change is running. */
  async stopped(): Promise<void> {
    await this.#changing.catch(() => undefined);
    await Promise.all([...this.#entries.values()].map((entry) => entry.run));
  }

  /** Starts a channel that was not running. Rejects if one of that name is. */
  add(channel: Channel): Promise<void> {
    return this.#change(async () => {
      if (this.#entries.has(channel.name)) throw new Error(`a channel named "${channel.name}" is already running`);
      this.#options.channels.set(channel.name, channel);
      this.#launch(this.#supervise(channel));
    });
  }

  /** Stops the channel of the same name (waiting for its listen to return) and starts `channel` in its place. */
  replace(channel: Channel): Promise<void> {
    return this.#change(async () => {
      if (!this.#entries.has(channel.name)) throw new Error(`no channel named "${channel.name}" is running`);
      await this.#halt(channel.name);
      this.#options.channels.set(channel.name, channel);
      this.#launch(this.#supervise(channel));
    });
  }

  /** Stops a channel (waiting for its listen to return) and forgets it. */
  remove(name: string): Promise<void> {
    return this.#change(async () => {
      if (!this.#entries.has(name)) throw new Error(`no channel named "${name}" is running`);
      await this.#halt(name);
      this.#options.channels.delete(name);
    });
  }

  #change(work: () => Promise<void>): Promise<void> {
    const next = this.#changing
      .catch(() => undefined)
      .then(() => {
        if (this.#options.shutdown.aborted) throw new Error('Switchboard is shutting down; channels cannot be changed');
        return work();
      });
    this.#changing = next;
    return next;
  }

  #supervise(channel: Channel): Supervised {
    const { push, supervisor: options, log, events, shutdown } = this.#options;
    const supervisor = new ChannelSupervisor(channel, push, options, log.child({ channel: channel.name }), events);
    // Its own stop, so one channel can be stopped alone; shutdown stops them all.
    const stop = new AbortController();
    const onShutdown = (): void => stop.abort(shutdown.reason);
    if (shutdown.aborted) onShutdown();
    else shutdown.addEventListener('abort', onShutdown, { once: true });
    const entry: Supervised = { supervisor, stop, onShutdown };
    this.#entries.set(channel.name, entry);
    return entry;
  }

  #launch(entry: Supervised): void {
    if (this.#started) entry.run = entry.supervisor.run(entry.stop.signal);
  }

  async #halt(name: string): Promise<void> {
    const entry = this.#entries.get(name);
    if (!entry) return;
    this.#options.shutdown.removeEventListener('abort', entry.onShutdown);
    entry.stop.abort(new Error('channel reconfigured'));
    await entry.run;
    this.#entries.delete(name);
  }
}
