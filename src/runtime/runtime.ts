/**
 * The durable pipeline every channel shares:
 *
 *   listen → push → inbox (the database, deduped) → turn queue → agent → outbox → send
 *
 * A message is in the inbox before `push` resolves; a reply is in the outbox (in the same
 * transaction that marks its message answered) before it is sent. On start, every
 * accepted-but-unanswered message is queued again and every unsent reply is sent.
 *
 * This file is the lifecycle (admission, start, stop, channels); one turn is turn.ts, its
 * records records.ts, the store retries store-retry.ts. Where turns wait — in memory on one
 * node, in pg-boss in a cluster — is the {@link TurnQueue} the composition root gives it.
 */
import type { Logger } from 'pino';
import { skipsInterrupted, type Channel, type InboundMessage, type Push, type PushResult } from '../channel.ts';
import { parseConversationKey } from '../conversation.ts';
import { Drafts } from '../store/settings.ts';
import { FloodGate } from './flood.ts';
import { systemClock, type Clock } from '../clock.ts';
import { History } from '../store/history.ts';
import { Inbox } from '../store/inbox.ts';
import { Outbox } from '../store/outbox.ts';
import { StorageHealth, transientStoreError } from '../store/storage.ts';
import { sleep } from '../backoff.ts';
import { Delivery, type PendingAhead } from './delivery.ts';
import { createLocalQueue } from './local-queue.ts';
import { localReplies, type ReplyRoute } from './reply-route.ts';
import type { QueuedTurn, TurnQueue } from './turn-queue.ts';
import { SupervisorSet } from './supervisor.ts';
import type { RuntimeCounters, RuntimeHealth, RuntimeOptions, RuntimeSettings } from './options.ts';
import { TurnRecords } from './records.ts';
import { StoreRetry } from './store-retry.ts';
import { Turns } from './turn.ts';
import { statusLine } from './status-line.ts';
import { prune } from './prune.ts';
import { PendingCount } from './pending-count.ts';

export type { ChannelPolicy, RuntimeCounters, RuntimeEvents, RuntimeHealth, RuntimeOptions, RuntimeSettings } from './options.ts';

export class Runtime {
  /** Replaced (never mutated) by `reconfigure`. */
  #options: RuntimeOptions;
  readonly #log: Logger;
  readonly #inbox: Inbox;
  readonly #outbox: Outbox;
  readonly #queue: TurnQueue;
  readonly #replies: ReplyRoute;
  readonly #turns: Turns;
  readonly #delivery: Delivery;
  readonly #supervisors: SupervisorSet;
  /** Replies recorded and not yet sent, as last counted (health() is synchronous). */
  readonly #pendingReplies: PendingCount;
  readonly #storage: StorageHealth;
  /** Shared with delivery: a replaced channel's pending replies go out through the new one. */
  readonly #channels: Map<string, Channel>;
  readonly #clock: Clock;
  /** Monotonic: the uptime in /status must not jump with the wall clock. */
  readonly #startedAt: number;
  /** Aborted on stop: listeners end. */
  readonly #listening = new AbortController();
  /** Aborted when the shutdown grace runs out: turns and sends end. */
  readonly #working = new AbortController();
  readonly #counters: RuntimeCounters = { received: 0, duplicates: 0, answered: 0, failed: 0, ignored: 0, sent: 0 };
  readonly #readyChannels = new Set<string>();
  readonly #ready: Promise<void>;
  #resolveReady!: () => void;
  #timers: NodeJS.Timeout[] = [];
  #stopping: Promise<void> | undefined;
  #started = false;

  constructor(options: RuntimeOptions) {
    this.#options = options;
    this.#clock = options.clock ?? systemClock;
    this.#startedAt = this.#clock.monotonic();
    this.#log = options.log;
    const { database } = options;
    this.#inbox = new Inbox(database);
    this.#outbox = new Outbox(database);
    this.#pendingReplies = new PendingCount(() => this.#outbox.pendingCount(), this.#log);
    this.#storage = options.storage ?? new StorageHealth({ log: options.log });
    this.#queue = options.queue ?? createLocalQueue({ concurrency: options.maxInFlight, maxQueued: options.maxQueued });
    this.#replies = options.replies ?? localReplies;
    const channels = new Map<string, Channel>();
    this.#channels = channels;
    this.#supervisors = new SupervisorSet(
      {
        push: this.push,
        supervisor: options.supervisor,
        log: this.#log,
        events: { onReady: (name) => this.#channelReady(name), onRestart: (name) => this.#options.events?.onRestart?.(name) },
        shutdown: this.#listening.signal,
        channels,
      },
      options.channels,
    );
    const drafts = new Drafts(database);
    const history = new History(database);
    /** Every outbound call (outbox, draft, typing) goes through it: a platform's "wait" holds them all. */
    const flood = new FloodGate({ log: this.#log, now: () => this.#clock.monotonic() });
    const retry = new StoreRetry({ storage: this.#storage, log: this.#log, signal: this.#working.signal, stopping: () => this.#stopping !== undefined });
    this.#delivery = new Delivery(this.#outbox, flood.view(channels), options.delivery, this.#log, {
      onSent: (channel) => {
        this.#counters.sent++;
        options.events?.onSent?.(channel);
      },
      onRoundEnd: async () => this.#pendingReplies.stale(),
      onWriteFailed: (error, what) => this.#storage.failed(error, what) !== undefined || retry.passing(error, what) !== undefined,
    });
    this.#turns = new Turns({
      options: () => this.#options,
      log: this.#log,
      databaseName: database.name,
      inbox: this.#inbox,
      history,
      drafts,
      records: new TurnRecords({ database, inbox: this.#inbox, outbox: this.#outbox, history, drafts, replies: this.#replies }),
      retry,
      channels,
      flood,
      clock: this.#clock,
      counters: this.#counters,
      signal: this.#working.signal,
      stopping: () => this.#stopping !== undefined,
      deliver: (conversation, channel, ahead) => this.#deliverHere(conversation, channel, ahead),
      ahead: (conversation, channel) => (this.#replies.sendsHere(channel, this.#channels.has(channel)) ? this.#delivery.ahead(conversation) : undefined),
      statusLine: () => statusLine(this.health(), this.#clock.monotonic() - this.#startedAt),
    });
    this.#ready = new Promise((resolve) => (this.#resolveReady = resolve));
  }

  /** Resolves once every channel has reported ready (the first time). */
  get ready(): Promise<void> {
    return this.#ready;
  }

  /** Takes one inbound message (the {@link Push} given to every channel). */
  readonly push: Push = async (message): Promise<PushResult> => {
    if (this.#stopping) throw new Error('Switchboard is shutting down; the message was not accepted');
    const ticket = await this.#queue.reserve();
    if (this.#stopping) {
      ticket.release();
      throw new Error('Switchboard is shutting down; the message was not accepted');
    }
    let entry: QueuedTurn | undefined;
    try {
      // While the disk is full nothing is tried: the probe says when there is room again.
      const refused = this.#storage.refuse(`accept message ${message.id} of ${message.channel}`);
      if (refused) throw refused;
      // the message and its turn in one transaction (or one statement)
      entry = ticket.accept
        ? await ticket.accept(this.#options.database, message)
        : await this.#options.database.transaction(async (tx) => {
            const accepted = await this.#inbox.in(tx).accept(message);
            if (accepted) await ticket.enqueue(tx, accepted);
            return accepted;
          });
    } catch (error) {
      // A lost connection can lose only the answer to a COMMIT that went through: read back
      // before refusing, so a stored message is not reported refused (its platform would deliver
      // it again, and a webhook sender would get its reply both at its callback and on its retry).
      const stored = transientStoreError(error) === undefined ? undefined : await this.#inbox.waiting(message).catch(() => undefined);
      if (!stored) {
        ticket.release();
        // Not in the inbox, so not acknowledged: the channel's platform delivers it again.
        throw this.#storage.failed(error, `accept message ${message.id} of ${message.channel}`) ?? error;
      }
      this.#log.warn({ channel: message.channel, id: message.id, err: error }, 'the store said the accept failed, but the message is stored (only the answer was lost): accepted');
      entry = stored;
    }
    if (!entry) {
      this.#counters.duplicates++;
      this.#log.debug({ channel: message.channel, id: message.id }, 'redelivered message ignored');
      // Stored though its push failed (the accept's answer was lost after it committed): its turn
      // is queued now if the queue lost it. A second run of a turn already queued finds it answered and does nothing.
      await ticket.redelivered(() => this.#inbox.waiting(message));
      return 'duplicate';
    }
    this.#counters.received++;
    this.#options.events?.onReceived?.(message.channel);
    ticket.committed({ seq: entry.seq, conversation: entry.conversation });
    return 'accepted';
  };

  /** Sends a turn's reply now, unless another node sends it (in a cluster: the one holding its channel, woken by the reply route). */
  #deliverHere(conversation: string, channel: string, ahead?: PendingAhead): Promise<void> {
    if (!this.#replies.sendsHere(channel, this.#channels.has(channel))) return Promise.resolve();
    return this.#delivery.deliver(conversation, this.#working.signal, ahead);
  }

  /** Sends the recorded replies of `conversation` if this node holds its channel (in a cluster: another node's turn recorded them). */
  deliverRecorded(conversation: string): void {
    const channel = parseConversationKey(conversation)?.channel;
    if (channel !== undefined && this.#channels.has(channel)) void this.#delivery.deliver(conversation, this.#working.signal);
  }

  /** Sends the unsent replies this node sends (in a cluster: a missed wake-up). */
  deliverAllHeld(): void {
    void this.#sweep();
  }

  /** Re-queues unanswered messages, starts every channel, and begins retrying unsent replies. */
  async start(): Promise<void> {
    if (this.#started) throw new Error('runtime already started');
    this.#started = true;
    let unanswered = 0;
    await this.#queue.start(this.#turns.work, async () => {
      const recovered = await this.#recoverable();
      unanswered = recovered.length;
      return recovered;
    });
    const unsent = await this.#outbox.pendingCount();
    this.#pendingReplies.value = unsent;
    if (unanswered > 0 || unsent > 0) {
      this.#log.info({ unanswered, unsent }, 'recovering work left from the last run');
    }
    await this.#prune();
    this.#supervisors.start();
    const sweep = setInterval(() => void this.#sweep(), this.#options.sweepIntervalMs ?? 30_000);
    const pruning = setInterval(() => void this.#prune(), 3_600_000);
    sweep.unref();
    pruning.unref();
    this.#timers.push(sweep, pruning);
    if (this.#supervisors.size === 0) this.#resolveReady();
  }

  /** The inbox's unanswered messages to run again, less those whose channel skips interrupted turns. */
  async #recoverable(): Promise<QueuedTurn[]> {
    const skipped = new Map<string, InboundMessage[]>();
    const recovered = [];
    for (const entry of await this.#inbox.queued()) if (!(await this.#skipInterrupted(entry.seq, entry.conversation, skipped))) recovered.push(entry);
    this.#reportSkipped(skipped);
    return recovered;
  }

  /**
   * At start: marks an unanswered message `interrupted` instead of running it again when its
   * channel skips interrupted turns (see {@link SkipsInterrupted}), adding it to `skipped`
   * under its channel. Returns true when it did.
   */
  async #skipInterrupted(seq: number, conversation: string, skipped: Map<string, InboundMessage[]>): Promise<boolean> {
    const name = parseConversationKey(conversation)?.channel;
    const channel = name === undefined ? undefined : this.#channels.get(name);
    if (!channel || !skipsInterrupted(channel)) return false;
    const entry = await this.#inbox.queuedEntry(seq);
    if (!entry || entry.message.channel !== name || !(await this.#inbox.markIgnored(seq, 'interrupted'))) return false;
    const list = skipped.get(name);
    if (list) list.push(entry.message);
    else skipped.set(name, [entry.message]);
    return true;
  }

  /** Hands each channel the messages {@link #skipInterrupted} set aside, once. */
  #reportSkipped(skipped: ReadonlyMap<string, readonly InboundMessage[]>): void {
    for (const [name, messages] of skipped) {
      const channel = this.#channels.get(name);
      this.#log.info({ channel: name, messages: messages.length }, 'not running again what an earlier run left unanswered: this channel skips interrupted turns');
      try {
        if (channel && skipsInterrupted(channel)) channel.skipInterrupted(messages);
      } catch (error) {
        this.#log.error({ channel: name, err: error }, 'the channel failed to take its interrupted messages');
      }
    }
  }

  /** Retries the unsent replies this node sends. */
  #sweep(): Promise<void> {
    return this.#delivery.deliverAll(this.#working.signal, (channel) => this.#replies.sendsHere(channel, this.#channels.has(channel)));
  }

  #prune(): Promise<void> {
    const { pairing, retentionMs } = this.#options;
    return prune({ inbox: this.#inbox, outbox: this.#outbox, pairing, retentionMs, storage: this.#storage, log: this.#log, now: () => this.#clock.now() });
  }

  /** Resolves when nothing is queued, running or being sent. */
  async idle(): Promise<void> {
    do {
      await this.#queue.idle();
      await this.#delivery.idle();
      await this.#pendingReplies.settled();
    } while (this.#queue.busy);
  }

  health(): RuntimeHealth {
    return {
      channels: this.#supervisors.health(),
      queued: this.#queue.queued,
      inFlight: this.#queue.inFlight,
      pendingReplies: this.#pendingReplies.value,
      counters: { ...this.#counters },
      storage: this.#storage.state,
    };
  }

  /**
   * Stops listening, lets in-flight turns finish within the grace period, then cuts them
   * off. Queued and cut-off messages stay queued (in the inbox for the next start, or in the
   * shared queue for the other nodes).
   */
  stop(): Promise<void> {
    this.#stopping ??= this.#stop();
    return this.#stopping;
  }

  async #stop(): Promise<void> {
    const started = this.#clock.monotonic();
    const left = this.#queue.queued;
    this.#log.info({ inFlight: this.#queue.inFlight, queued: left }, 'shutting down');
    for (const timer of this.#timers) clearInterval(timer);
    this.#storage.close();
    this.#listening.abort(new Error('shutdown'));
    await this.#supervisors.stopped();
    const graceMs = Math.max(0, this.#options.shutdownGraceMs - (this.#clock.monotonic() - started));
    // Running turns, and the sends they started, get the rest of the grace period.
    const stopped = this.#queue.stop(graceMs).then(() => this.#delivery.idle());
    const grace = new AbortController();
    const finished = await Promise.race([stopped.then(() => true), sleep(graceMs, grace.signal).then(() => false, () => false)]);
    grace.abort();
    if (!finished) {
      this.#log.warn({ inFlight: this.#queue.inFlight }, 'shutdown grace period over; cutting off running turns (they will run again)');
      this.#working.abort(new Error('shutdown deadline'));
      await Promise.race([stopped, sleep(2000)]);
    }
    await this.#delivery.stop();
    this.#pendingReplies.stop();
    this.#log.info({ queued: left, ms: Math.round(this.#clock.monotonic() - started) }, 'stopped');
  }

  #channelReady(name: string): void {
    void this.#delivery.deliverAll(this.#working.signal, (channel) => channel === name);
    if (this.#readyChannels.has(name)) return;
    this.#readyChannels.add(name);
    if (this.#readyChannels.size >= this.#supervisors.size) this.#resolveReady();
  }

  /**
   * Applies a reload's settings to the turns that start from now on (running turns keep the
   * ones they started with).
   */
  reconfigure(settings: Partial<RuntimeSettings>): void {
    this.#options = { ...this.#options, ...settings };
  }

  /** Starts a channel that was not running (config reload). Rejects if one of that name is. */
  addChannel(channel: Channel): Promise<void> {
    return this.#supervisors.add(channel);
  }

  /**
   * Stops the running channel of the same name — waiting for its listen to return — and
   * starts `channel` in its place (config reload). Accepted messages and recorded replies are
   * kept: the replies go out through the new channel.
   */
  replaceChannel(channel: Channel): Promise<void> {
    return this.#supervisors.replace(channel);
  }

  /** Restarts a channel's listen at once (the console's restart button); false when there is no such channel. */
  restartChannel(name: string): boolean {
    return this.#supervisors.restart(name);
  }

  /** Stops a channel (config reload); its unsent replies wait in the outbox until it is back. */
  async removeChannel(name: string): Promise<void> {
    await this.#supervisors.remove(name);
    this.#readyChannels.delete(name);
  }
}
