/**
 * The durable pipeline every channel shares:
 *
 *   listen → push → inbox (SQLite, deduped) → keyed pool → agent → outbox → send
 *
 * A message is in the inbox before `push` resolves; a reply is in the outbox (in the same
 * transaction that marks its message answered) before it is sent. On start, every
 * accepted-but-unanswered message is queued again and every unsent reply is sent.
 */
import type { Logger } from 'pino';
import type { Channel, InboundMessage, Push, PushResult } from '../channel.ts';
import { refOf } from '../conversation.ts';
import type { TurnHandler, TurnOutput } from '../agent/agent.ts';
import { ProviderError } from '../provider.ts';
import type { Db } from '../store/db.ts';
import { History } from '../store/history.ts';
import { Inbox } from '../store/inbox.ts';
import { Outbox } from '../store/outbox.ts';
import { sleep } from './backoff.ts';
import { Delivery, type DeliveryOptions } from './delivery.ts';
import { KeyedPool } from './pool.ts';
import { ChannelSupervisor, type ChannelHealth, type SupervisorOptions } from './supervisor.ts';

export interface RuntimeOptions {
  readonly db: Db;
  readonly log: Logger;
  readonly channels: readonly Channel[];
  readonly agent: TurnHandler;
  /** Turns of history given to the model. */
  readonly historyTurns: number;
  /** Turns running at once. */
  readonly maxInFlight: number;
  /** Messages waiting in memory before `push` waits. */
  readonly maxQueued: number;
  /** A turn taking longer is cut off and answered with an apology. */
  readonly turnTimeoutMs: number;
  /** How long in-flight turns may take to finish on shutdown. */
  readonly shutdownGraceMs: number;
  readonly supervisor: SupervisorOptions;
  readonly delivery: DeliveryOptions;
  /** Finished inbox/outbox rows are kept this long (the redelivery window). @default 7 days */
  readonly retentionMs?: number;
  /** How often unsent replies are retried. @default 30000 */
  readonly sweepIntervalMs?: number;
}

export interface RuntimeCounters {
  received: number;
  duplicates: number;
  answered: number;
  failed: number;
  sent: number;
}

export interface RuntimeHealth {
  readonly channels: readonly ChannelHealth[];
  readonly queued: number;
  readonly inFlight: number;
  readonly pendingReplies: number;
  readonly counters: Readonly<RuntimeCounters>;
}

const DAY_MS = 86_400_000;

export class Runtime {
  readonly #options: RuntimeOptions;
  readonly #log: Logger;
  readonly #inbox: Inbox;
  readonly #outbox: Outbox;
  readonly #history: History;
  readonly #pool: KeyedPool<number>;
  readonly #delivery: Delivery;
  readonly #supervisors: ChannelSupervisor[];
  readonly #commitTurn;
  readonly #commitFailure;
  /** Aborted on stop: listeners end. */
  readonly #listening = new AbortController();
  /** Aborted when the shutdown grace runs out: turns and sends end. */
  readonly #working = new AbortController();
  readonly #counters: RuntimeCounters = { received: 0, duplicates: 0, answered: 0, failed: 0, sent: 0 };
  readonly #readyChannels = new Set<string>();
  readonly #ready: Promise<void>;
  #resolveReady!: () => void;
  #runs: Promise<void>[] = [];
  #timers: NodeJS.Timeout[] = [];
  #stopping: Promise<void> | undefined;
  #started = false;

  constructor(options: RuntimeOptions) {
    this.#options = options;
    this.#log = options.log;
    const names = new Set<string>();
    for (const channel of options.channels) {
      if (names.has(channel.name)) throw new Error(`two channels are named "${channel.name}"; channel names must be unique`);
      names.add(channel.name);
    }
    this.#inbox = new Inbox(options.db);
    this.#outbox = new Outbox(options.db);
    this.#history = new History(options.db);
    this.#pool = new KeyedPool<number>({
      concurrency: options.maxInFlight,
      maxQueued: options.maxQueued,
      worker: (seq, conversation) => this.#turn(seq, conversation),
      onError: (error, seq, conversation) => this.#log.error({ err: error, seq, conversation }, 'turn crashed; the message stays queued for the next start'),
    });
    const channels = new Map(options.channels.map((channel) => [channel.name, channel]));
    this.#delivery = new Delivery(this.#outbox, channels, options.delivery, this.#log, { onSent: () => this.#counters.sent++ });
    this.#supervisors = options.channels.map(
      (channel) =>
        new ChannelSupervisor(channel, this.push, options.supervisor, this.#log.child({ channel: channel.name }), {
          onReady: (name) => this.#channelReady(name),
        }),
    );
    this.#ready = new Promise((resolve) => (this.#resolveReady = resolve));

    this.#commitTurn = options.db.transaction((seq: number, conversation: string, output: TurnOutput, message: InboundMessage) => {
      output.commit?.();
      this.#history.append(conversation, seq, output.messages);
      if (output.reply !== '') this.#outbox.add({ ...refOf(message), text: output.reply, replyTo: message.id }, seq);
      return this.#inbox.markDone(seq);
    });
    this.#commitFailure = options.db.transaction((seq: number, message: InboundMessage, text: string, error: string) => {
      this.#outbox.add({ ...refOf(message), text, replyTo: message.id }, seq);
      return this.#inbox.markFailed(seq, error);
    });
  }

  /** Resolves once every channel has reported ready (the first time). */
  get ready(): Promise<void> {
    return this.#ready;
  }

  /** Takes one inbound message (the {@link Push} given to every channel). */
  readonly push: Push = async (message): Promise<PushResult> => {
    if (this.#stopping) throw new Error('Switchboard is shutting down; the message was not accepted');
    await this.#pool.acquire();
    if (this.#stopping) {
      this.#pool.release();
      throw new Error('Switchboard is shutting down; the message was not accepted');
    }
    let entry;
    try {
      entry = this.#inbox.accept(message);
    } catch (error) {
      this.#pool.release();
      throw error;
    }
    if (!entry) {
      this.#pool.release();
      this.#counters.duplicates++;
      this.#log.debug({ channel: message.channel, id: message.id }, 'redelivered message ignored');
      return 'duplicate';
    }
    this.#counters.received++;
    this.#pool.enqueue(entry.conversation, entry.seq, { reserved: true });
    return 'accepted';
  };

  /** Re-queues unanswered messages, starts every channel, and begins retrying unsent replies. */
  start(): void {
    if (this.#started) throw new Error('runtime already started');
    this.#started = true;
    const recovered = this.#inbox.queued();
    for (const { seq, conversation } of recovered) this.#pool.enqueue(conversation, seq);
    const unsent = this.#outbox.pendingCount();
    if (recovered.length > 0 || unsent > 0) {
      this.#log.info({ unanswered: recovered.length, unsent }, 'recovering work left from the last run');
    }
    this.#prune();
    this.#runs = this.#supervisors.map((supervisor) => supervisor.run(this.#listening.signal));
    const sweep = setInterval(() => void this.#delivery.deliverAll(this.#working.signal), this.#options.sweepIntervalMs ?? 30_000);
    const prune = setInterval(() => this.#prune(), 3_600_000);
    sweep.unref();
    prune.unref();
    this.#timers.push(sweep, prune);
    if (this.#supervisors.length === 0) this.#resolveReady();
  }

  /** Resolves when nothing is queued, running or being sent. */
  async idle(): Promise<void> {
    do {
      await this.#pool.idle();
      await this.#delivery.idle();
    } while (this.#pool.queued > 0 || this.#pool.inFlight > 0);
  }

  health(): RuntimeHealth {
    return {
      channels: this.#supervisors.map((supervisor) => supervisor.health()),
      queued: this.#pool.queued,
      inFlight: this.#pool.inFlight,
      pendingReplies: this.#outbox.pendingCount(),
      counters: { ...this.#counters },
    };
  }

  /**
   * Stops listening, lets in-flight turns finish within the grace period, then cuts them
   * off. Queued and cut-off messages stay in the inbox for the next start.
   */
  stop(): Promise<void> {
    this.#stopping ??= this.#stop();
    return this.#stopping;
  }

  async #stop(): Promise<void> {
    const started = Date.now();
    this.#log.info({ inFlight: this.#pool.inFlight, queued: this.#pool.queued }, 'shutting down');
    for (const timer of this.#timers) clearInterval(timer);
    this.#listening.abort(new Error('shutdown'));
    await Promise.all(this.#runs);
    const left = this.#pool.clearQueued();
    const grace = new AbortController();
    const finished = await Promise.race([
      this.idle().then(() => true),
      sleep(Math.max(0, this.#options.shutdownGraceMs - (Date.now() - started)), grace.signal).then(() => false, () => false),
    ]);
    grace.abort();
    if (!finished) {
      this.#log.warn({ inFlight: this.#pool.inFlight }, 'shutdown grace period over; cutting off running turns (they will run again on the next start)');
      this.#working.abort(new Error('shutdown deadline'));
      await Promise.race([this.idle(), sleep(2000)]);
    }
    this.#log.info({ queuedForNextStart: left, ms: Date.now() - started }, 'stopped');
  }

  #channelReady(name: string): void {
    void this.#delivery.deliverAll(this.#working.signal, name);
    if (this.#readyChannels.has(name)) return;
    this.#readyChannels.add(name);
    if (this.#readyChannels.size === this.#supervisors.length) this.#resolveReady();
  }

  async #turn(seq: number, conversation: string): Promise<void> {
    const entry = this.#inbox.queuedEntry(seq);
    if (!entry) return; // answered before a crash; its reply (if unsent) goes out via the outbox
    const { message } = entry;
    const log = this.#log.child({ channel: message.channel, conversation, seq });
    const started = Date.now();
    const signal = AbortSignal.any([this.#working.signal, AbortSignal.timeout(this.#options.turnTimeoutMs)]);
    try {
      const output = await this.#options.agent({
        message,
        conversation,
        turnId: seq,
        history: this.#history.recent(conversation, this.#options.historyTurns),
        signal,
        log,
      });
      this.#commitTurn(seq, conversation, output, message);
      this.#counters.answered++;
      if (output.reply === '') log.warn('the model returned an empty reply; nothing sent');
      log.info({ ms: Date.now() - started }, 'turn done');
    } catch (error) {
      if (this.#working.signal.aborted) {
        log.warn('turn cut off by shutdown; it runs again on the next start');
        return;
      }
      this.#counters.failed++;
      log.error({ err: error, ms: Date.now() - started }, 'turn failed; telling the user');
      this.#commitFailure(seq, message, apology(error, signal), error instanceof Error ? error.message : String(error));
    }
    await this.#delivery.deliver(conversation, this.#working.signal);
  }

  #prune(): void {
    const before = Date.now() - (this.#options.retentionMs ?? 7 * DAY_MS);
    const inbox = this.#inbox.prune(before);
    const outbox = this.#outbox.prune(before);
    if (inbox + outbox > 0) this.#log.debug({ inbox, outbox }, 'pruned finished messages');
  }
}

/** What the user is told when their turn failed: what happened, without internals. */
function apology(error: unknown, signal: AbortSignal): string {
  if (signal.aborted) return 'Sorry — that took too long and I had to stop. Please try again, perhaps with a simpler request.';
  if (error instanceof ProviderError) {
    return error.status === 429
      ? 'Sorry — the model is rate-limiting me right now. Please try again in a minute.'
      : 'Sorry — I could not reach the model to answer that. Please try again in a moment.';
  }
  return 'Sorry — something went wrong while answering that. Please try again.';
}
