/**
 * The durable pipeline every channel shares:
 *
 *   listen → push → inbox (the database, deduped) → keyed pool → agent → outbox → send
 *
 * A message is in the inbox before `push` resolves; a reply is in the outbox (in the same
 * transaction that marks its message answered) before it is sent. On start, every
 * accepted-but-unanswered message is queued again and every unsent reply is sent.
 */
import type { Logger } from 'pino';
import { canEdit, hasTyping, skipsInterrupted, type Channel, type InboundMessage, type MessageEditor, type Push, type PushResult } from '../channel.ts';
import { conversationKey, parseConversationKey, refOf } from '../conversation.ts';
import { parseCommand, runCommand, type CommandDeps } from '../policy/commands.ts';
import { decideAccess, pairingReply, type PairingStore } from '../policy/access.ts';
import { turnText } from '../policy/turn-text.ts';
import { Drafts } from '../store/settings.ts';
import { startDraft, type Draft } from './draft.ts';
import { FloodGate } from './flood.ts';
import type { TurnHandler, TurnOutput } from '../agent/agent.ts';
import { ProviderError } from '../provider.ts';
import { systemClock, type Clock } from '../clock.ts';
import type { Database, Sql } from '../store/sql.ts';
import { History } from '../store/history.ts';
import { Inbox } from '../store/inbox.ts';
import { Outbox, type Reply } from '../store/outbox.ts';
import { deadline } from '../abort.ts';
import { DiskFullError, StorageHealth, diskFullCode, transientStoreError, type StorageState } from '../store/storage.ts';
import { damagedDatabaseError } from '../store/integrity.ts';
import { backoffDelay, sleep } from '../backoff.ts';
import { Delivery, type DeliveryOptions } from './delivery.ts';
import { KeyedPool } from './pool.ts';
// eslint-disable-next-line no-restricted-imports -- the one back-arrow left (runtime → cluster): removed by i27-queue, which moves the TurnQueue port into src/runtime
import type { TurnQueue } from '../cluster/queue.ts';
// eslint-disable-next-line no-restricted-imports -- removed by i27-queue (see above)
import type { ClusterNode } from '../cluster/nodes.ts';
import { SupervisorSet, type ChannelHealth, type SupervisorOptions } from './supervisor.ts';

/**
 * What a config reload may change while the runtime runs (see {@link Runtime.reconfigure}).
 * A turn reads these when it starts, so a turn already running finishes with the old ones.
 */
export interface RuntimeSettings {
  readonly agent: TurnHandler;
  readonly historyTurns: number;
  readonly turnTimeoutMs: number;
  readonly policies?: ReadonlyMap<string, ChannelPolicy>;
  readonly commands?: Omit<CommandDeps, 'status' | 'clearHistory'>;
}

export interface RuntimeOptions {
  /** Where the inbox, outbox, history and drafts live (SQLite or PostgreSQL: the runtime does not care which). */
  readonly database: Database;
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
  /**
   * The conversation policy per chat channel (access, mention gating, streaming). A channel
   * without an entry (the terminal) is exempt: everything it pushes is answered (chat commands still apply).
   */
  readonly policies?: ReadonlyMap<string, ChannelPolicy>;
  /** Pairing codes and approved senders (required when a policy has no `allow`). */
  readonly pairing?: PairingStore;
  /** Chat commands (/new, /model, /status, /help) on every channel; omitted = commands go to the model. */
  readonly commands?: Omit<CommandDeps, 'status' | 'clearHistory'>;
  /** Told what happens, for metrics. Hooks must be cheap and must not throw. */
  readonly events?: RuntimeEvents;
  /** Where failed writes (a full disk) are reported; shared with the channels. @default one without a probe */
  readonly storage?: StorageHealth;
  /** Turn and shutdown durations and the uptime run on its monotonic clock; retention on its wall clock. @default systemClock */
  readonly clock?: Clock;
  /**
   * Cluster mode: turns go through this shared queue (any node may run them) instead of the
   * in-process pool, and `channels` start empty — each is added when this node takes its lease.
   */
  readonly queue?: TurnQueue;
  /** Told, inside the transaction, that a reply to `conversation` was recorded (cluster mode: wakes the channel's node). */
  readonly onReplyRecorded?: (tx: Sql, conversation: string) => Promise<void>;
}

/** What the runtime reports as it works (see src/metrics.ts). */
export interface RuntimeEvents {
  /** A new (not redelivered) message was accepted into the inbox. */
  onReceived?(channel: string): void;
  /** A reply message reached the platform. */
  onSent?(channel: string): void;
  /** A turn through the model ended: its reply (or apology) is recorded. */
  onTurn?(channel: string, ms: number, outcome: 'answered' | 'failed'): void;
  /** A channel's listener is being restarted after a failure. */
  onRestart?(channel: string): void;
}

export interface ChannelPolicy {
  /** Sender ids let through; ["*"] = anyone; undefined = pairing. */
  readonly allow?: readonly string[];
  readonly mentionOnly: boolean;
  /** Stream the reply into a growing message (channels that can edit). */
  readonly stream: boolean;
}

export interface RuntimeCounters {
  received: number;
  duplicates: number;
  answered: number;
  failed: number;
  /** Left unanswered by the policy (denied, awaiting pairing, not addressed). */
  ignored: number;
  sent: number;
}

export interface RuntimeHealth {
  readonly channels: readonly ChannelHealth[];
  readonly queued: number;
  readonly inFlight: number;
  readonly pendingReplies: number;
  readonly counters: Readonly<RuntimeCounters>;
  /** Whether the data_dir takes writes (not: its disk is full). Omitted = writable. */
  readonly storage?: StorageState;
  /** Cluster mode: this node's name and every node as last reported (queued counts the whole cluster). */
  readonly cluster?: { readonly node: string; readonly nodes: readonly ClusterNode[] };
}

const DAY_MS = 86_400_000;

/** A turn's write failed on a passing store failure and the runtime stopped before it went through. */
class StoreStoppedError extends Error {
  constructor(what: string, cause: unknown) {
    super(`could not ${what} before shutdown: the store kept failing`, { cause });
    this.name = 'StoreStoppedError';
  }
}

export class Runtime {
  /** Replaced (never mutated) by `reconfigure`. */
  #options: RuntimeOptions;
  readonly #log: Logger;
  readonly #inbox: Inbox;
  readonly #outbox: Outbox;
  readonly #history: History;
  readonly #pool: KeyedPool<number>;
  readonly #delivery: Delivery;
  readonly #supervisors: SupervisorSet;
  readonly #database: Database;
  readonly #drafts: Drafts;
  /** Replies recorded and not yet sent, as last counted (health() is synchronous; counted after each turn and round). */
  #pendingReplies = 0;
  readonly #storage: StorageHealth;
  /** Shared with delivery: a replaced channel's pending replies go out through the new one. */
  readonly #channels: Map<string, Channel>;
  /** Every outbound call (outbox, draft, typing) goes through it: a platform's "wait" holds them all. */
  readonly #flood: FloodGate;
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
    this.#database = options.database;
    this.#inbox = new Inbox(options.database);
    this.#outbox = new Outbox(options.database);
    this.#history = new History(options.database);
    this.#storage = options.storage ?? new StorageHealth({ log: options.log });
    this.#pool = new KeyedPool<number>({
      concurrency: options.maxInFlight,
      maxQueued: options.maxQueued,
      worker: (seq, conversation) => this.#turnDurably(seq, conversation),
      onError: (error, seq, conversation) => {
        // A page that went bad while running: the paragraph that says what to do, not a stack.
        const damaged = damagedDatabaseError(error, options.database.name);
        if (damaged) this.#log.error({ seq, conversation, code: damaged.code }, `turn crashed on a damaged database; the message stays queued. ${damaged.message}. Check it with switchboard doctor`);
        else this.#log.error({ err: error, seq, conversation }, 'turn crashed; the message stays queued for the next start');
      },
    });
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
    this.#drafts = new Drafts(options.database);
    this.#flood = new FloodGate({ log: this.#log, now: () => this.#clock.monotonic() });
    this.#delivery = new Delivery(this.#outbox, this.#flood.view(channels), options.delivery, this.#log, {
      onSent: (channel) => {
        this.#counters.sent++;
        options.events?.onSent?.(channel);
      },
      onRoundEnd: () => this.#countPending(),
      onWriteFailed: (error, what) => this.#storage.failed(error, what) !== undefined || this.#passing(error, what) !== undefined,
    });
    this.#ready = new Promise((resolve) => (this.#resolveReady = resolve));
  }

  /** Records a turn's output: its history, its reply, and its message answered — all or nothing. */
  #commitTurn(seq: number, conversation: string, output: TurnOutput, message: InboundMessage, draftId: string | undefined): Promise<boolean> {
    return this.#database.transaction(async (tx) => {
      // First, so a commit tried again after one that was applied (its answer lost with the
      // connection) records nothing twice: the message is no longer waiting.
      if (!(await this.#inbox.in(tx).markDone(seq))) return false;
      await output.commit?.(tx);
      await this.#history.in(tx).append(conversation, seq, output.messages);
      if (output.reply !== '' || (output.files?.length ?? 0) > 0) {
        await this.#recordReply(
          tx,
          {
            ...refOf(message),
            text: output.reply,
            replyTo: message.id,
            ...(output.files?.length ? { files: output.files } : {}),
            ...(draftId === undefined ? {} : { draftId }),
          },
          seq,
        );
      }
      await this.#drafts.in(tx).delete(seq);
      return true;
    });
  }

  /** Puts a reply in the outbox inside `tx`, and (cluster mode) wakes the node holding its channel once `tx` commits. */
  async #recordReply(tx: Sql, reply: Reply, seq: number): Promise<void> {
    await this.#outbox.in(tx).add(reply, seq);
    await this.#options.onReplyRecorded?.(tx, conversationKey(reply));
  }

  /** A reply the runtime gives itself (a pairing code, a command's answer). */
  #commitAnswer(seq: number, message: InboundMessage, text: string, commit: ((tx: Sql) => Promise<void>) | undefined): Promise<boolean> {
    return this.#database.transaction(async (tx) => {
      if (!(await this.#inbox.in(tx).markDone(seq))) return false; // see #commitTurn
      await commit?.(tx);
      await this.#recordReply(tx, { ...refOf(message), text, replyTo: message.id }, seq);
      return true;
    });
  }

  #commitFailure(seq: number, message: InboundMessage, text: string, error: string, draftId: string | undefined): Promise<boolean> {
    return this.#database.transaction(async (tx) => {
      if (!(await this.#inbox.in(tx).markFailed(seq, error))) return false; // see #commitTurn
      await this.#recordReply(tx, { ...refOf(message), text, replyTo: message.id, ...(draftId === undefined ? {} : { draftId }) }, seq);
      await this.#drafts.in(tx).delete(seq);
      return true;
    });
  }

  /** Counts the unsent replies again (for health(); a failed count keeps the last one). */
  async #countPending(): Promise<void> {
    try {
      this.#pendingReplies = await this.#outbox.pendingCount();
    } catch (error) {
      this.#log.debug({ err: error }, 'could not count unsent replies');
    }
  }

  /** Resolves once every channel has reported ready (the first time). */
  get ready(): Promise<void> {
    return this.#ready;
  }

  /** Takes one inbound message (the {@link Push} given to every channel). */
  readonly push: Push = async (message): Promise<PushResult> => {
    if (this.#stopping) throw new Error('Switchboard is shutting down; the message was not accepted');
    // Cluster mode: no slot here — the message goes to the shared queue, for any node to run.
    const queue = this.#options.queue;
    if (!queue) {
      await this.#pool.acquire();
      if (this.#stopping) {
        this.#pool.release();
        throw new Error('Switchboard is shutting down; the message was not accepted');
      }
    }
    let entry;
    try {
      // While the disk is full nothing is tried: the probe says when there is room again.
      const refused = this.#storage.refuse(`accept message ${message.id} of ${message.channel}`);
      if (refused) throw refused;
      entry = queue
        ? // the message and its turn's job in one transaction
          await this.#database.transaction(async (tx) => {
            const accepted = await this.#inbox.in(tx).accept(message);
            if (accepted) await queue.enqueue(tx, accepted.conversation, accepted.seq);
            return accepted;
          })
        : await this.#inbox.accept(message);
    } catch (error) {
      // A lost connection can lose only the answer to a COMMIT that went through: read back
      // before refusing, so a stored message is not reported refused (its platform would deliver
      // it again, and a webhook sender would get its reply both at its callback and on its retry).
      const stored = transientStoreError(error) === undefined ? undefined : await this.#inbox.waiting(message).catch(() => undefined);
      if (!stored) {
        if (!queue) this.#pool.release();
        // Not in the inbox, so not acknowledged: the channel's platform delivers it again.
        throw this.#storage.failed(error, `accept message ${message.id} of ${message.channel}`) ?? error;
      }
      this.#log.warn({ channel: message.channel, id: message.id, err: error }, 'the store said the accept failed, but the message is stored (only the answer was lost): accepted');
      entry = { ...stored, message };
    }
    if (!entry) {
      this.#counters.duplicates++;
      this.#log.debug({ channel: message.channel, id: message.id }, 'redelivered message ignored');
      // Stored though its push failed (the accept's answer was lost after it committed): its turn
      // is queued here now. A second run of a turn already queued finds it answered and does nothing.
      const waiting = queue ? undefined : await this.#inbox.waiting(message).catch(() => undefined);
      if (waiting) this.#pool.enqueue(waiting.conversation, waiting.seq, { reserved: true });
      else if (!queue) this.#pool.release();
      return 'duplicate';
    }
    this.#counters.received++;
    this.#options.events?.onReceived?.(message.channel);
    if (!queue) this.#pool.enqueue(entry.conversation, entry.seq, { reserved: true });
    return 'accepted';
  };

  /** A turn taken from the shared queue: 'retry' when this node stopped before it was answered. */
  async #turnShared(seq: number, conversation: string): Promise<'done' | 'retry'> {
    try {
      await this.#turnDurably(seq, conversation);
    } catch (error) {
      this.#log.error({ err: error, seq, conversation }, 'turn crashed; it is tried again');
      return 'retry';
    }
    if (this.#stopping && (await this.#inbox.queuedEntry(seq).catch(() => undefined))) return 'retry';
    return 'done';
  }

  /** Sends a turn's reply now, unless (cluster mode) another node holds its channel: that one is woken by onReplyRecorded. */
  #deliverHere(conversation: string, channel: string): Promise<void> {
    if (this.#options.queue && !this.#channels.has(channel)) return Promise.resolve();
    return this.#delivery.deliver(conversation, this.#working.signal);
  }

  /** Sends the recorded replies of `conversation` if this node holds its channel (cluster mode: another node's turn recorded them). */
  deliverRecorded(conversation: string): void {
    const channel = parseConversationKey(conversation)?.channel;
    if (channel !== undefined && this.#channels.has(channel)) void this.#delivery.deliver(conversation, this.#working.signal);
  }

  /** Cluster mode: sends the unsent replies of every channel this node holds (a missed wake-up). */
  deliverAllHeld(): void {
    void this.#sweep();
  }

  /** Re-queues unanswered messages, starts every channel, and begins retrying unsent replies. */
  async start(): Promise<void> {
    if (this.#started) throw new Error('runtime already started');
    this.#started = true;
    const skipped = new Map<string, InboundMessage[]>();
    const recovered = [];
    // Cluster mode: queued turns wait in the shared queue already (stored with their message).
    const queued = this.#options.queue ? [] : await this.#inbox.queued();
    for (const entry of queued) if (!(await this.#skipInterrupted(entry.seq, entry.conversation, skipped))) recovered.push(entry);
    for (const { seq, conversation } of recovered) this.#pool.enqueue(conversation, seq);
    this.#reportSkipped(skipped);
    const unsent = await this.#outbox.pendingCount();
    this.#pendingReplies = unsent;
    if (recovered.length > 0 || unsent > 0) {
      this.#log.info({ unanswered: recovered.length, unsent }, 'recovering work left from the last run');
    }
    await this.#prune();
    this.#supervisors.start();
    await this.#options.queue?.start((seq, conversation) => this.#turnShared(seq, conversation));
    const sweep = setInterval(() => void this.#sweep(), this.#options.sweepIntervalMs ?? 30_000);
    const prune = setInterval(() => void this.#prune(), 3_600_000);
    sweep.unref();
    prune.unref();
    this.#timers.push(sweep, prune);
    if (this.#supervisors.size === 0) this.#resolveReady();
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

  /** Retries unsent replies: all of them, or (cluster mode) those of the channels this node holds. */
  async #sweep(): Promise<void> {
    if (!this.#options.queue) return this.#delivery.deliverAll(this.#working.signal);
    await Promise.all([...this.#channels.keys()].map((name) => this.#delivery.deliverAll(this.#working.signal, name)));
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
      channels: this.#supervisors.health(),
      queued: this.#options.queue?.queued ?? this.#pool.queued,
      inFlight: this.#options.queue?.inFlight ?? this.#pool.inFlight,
      pendingReplies: this.#pendingReplies,
      counters: { ...this.#counters },
      storage: this.#storage.state,
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
    const started = this.#clock.monotonic();
    this.#log.info({ inFlight: this.#pool.inFlight, queued: this.#pool.queued }, 'shutting down');
    for (const timer of this.#timers) clearInterval(timer);
    this.#storage.close();
    this.#listening.abort(new Error('shutdown'));
    await this.#supervisors.stopped();
    // Cluster mode: running turns get the grace period; the rest stay in the shared queue for the other nodes.
    if (this.#options.queue) {
      const stopped = this.#options.queue.stop(Math.max(0, this.#options.shutdownGraceMs - (this.#clock.monotonic() - started)));
      await Promise.race([stopped, sleep(this.#options.shutdownGraceMs)]);
      this.#working.abort(new Error('shutdown deadline'));
      await Promise.race([stopped, sleep(2000)]);
      await Promise.race([this.#delivery.idle(), sleep(2000)]);
      await this.#delivery.stop();
      this.#log.info({ ms: Math.round(this.#clock.monotonic() - started) }, 'stopped');
      return;
    }
    const left = this.#pool.clearQueued();
    const grace = new AbortController();
    const finished = await Promise.race([
      this.idle().then(() => true),
      sleep(Math.max(0, this.#options.shutdownGraceMs - (this.#clock.monotonic() - started)), grace.signal).then(() => false, () => false),
    ]);
    grace.abort();
    if (!finished) {
      this.#log.warn({ inFlight: this.#pool.inFlight }, 'shutdown grace period over; cutting off running turns (they will run again on the next start)');
      this.#working.abort(new Error('shutdown deadline'));
      await Promise.race([this.idle(), sleep(2000)]);
    }
    await this.#delivery.stop();
    this.#log.info({ queuedForNextStart: left, ms: Math.round(this.#clock.monotonic() - started) }, 'stopped');
  }

  #channelReady(name: string): void {
    void this.#delivery.deliverAll(this.#working.signal, name);
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

  /**
   * A turn whose writes may meet a full disk: the message stays queued in the inbox and the turn
   * runs again once the data_dir takes writes (a turn that got as far as the model keeps its
   * output and only its commit is tried again, see {@link #commit}). At shutdown it is left for
   * the next start.
   */
  async #turnDurably(seq: number, conversation: string): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.#turn(seq, conversation);
      } catch (error) {
        const outcome = await this.#afterStoreFailure(error, `finish the turn of message ${seq}`, attempt);
        if (outcome === 'retry') continue;
        if (outcome === 'other') throw error;
        this.#log.warn({ seq, conversation }, 'shutdown while the store fails: the message stays in the inbox for the next start');
        return;
      }
    }
  }

  /**
   * After a failed read or write: 'retry' once the store may take writes again — a full disk
   * when the probe finds room, a passing failure (a lock, an I/O error, a lost connection)
   * after a backoff; a DiskFullError or 'stopped' when the runtime stops first; 'other' when
   * `error` is no store failure (a bug: the caller throws it).
   */
  async #afterStoreFailure(error: unknown, what: string, attempt: number): Promise<'retry' | 'other' | 'stopped' | DiskFullError> {
    const full = this.#storage.failed(error, what);
    if (!full && this.#passing(error, what, attempt) === undefined) return 'other';
    const stopped = full ?? 'stopped';
    if (this.#working.signal.aborted || this.#stopping) return stopped;
    try {
      if (full) await this.#storage.writable(this.#working.signal);
      else await sleep(backoffDelay(attempt, { initialMs: 100, maxMs: 10_000 }), this.#working.signal);
    } catch {
      return stopped;
    }
    return this.#stopping ? stopped : 'retry';
  }

  /** Whether `error` is a passing store failure; logs it (with `what`) when given one. */
  #passing(error: unknown, what?: string, attempt = 0): string | undefined {
    const code = transientStoreError(error);
    if (code !== undefined && what !== undefined) {
      const fields = { code, what, attempt: attempt + 1, err: error };
      if (attempt < 3) this.#log.warn(fields, `could not ${what}: the store failed (${code}); trying again`);
      else this.#log.error(fields, `could not ${what}: the store keeps failing (${code}); trying again. Check the database (switchboard doctor)`);
    }
    return code;
  }

  /**
   * Runs one of the turn's transactions, trying again while the store fails — a full disk, a
   * lock, an I/O error, a lost connection (the model's answer is kept in memory meanwhile: it is
   * neither lost nor asked for twice). Throws DiskFullError or StoreStoppedError when the
   * runtime stops first: nothing was recorded, so the message runs again at the next start and
   * is answered once.
   */
  async #commit<T>(what: string, work: () => Promise<T>): Promise<T> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await work();
      } catch (error) {
        const outcome = await this.#afterStoreFailure(error, what, attempt);
        if (outcome === 'retry') continue;
        if (outcome === 'other') throw error;
        throw outcome === 'stopped' ? new StoreStoppedError(what, error) : outcome;
      }
    }
  }

  async #turn(seq: number, conversation: string): Promise<void> {
    const entry = await this.#inbox.queuedEntry(seq);
    if (!entry) {
      // Answered already (before a crash, or by a commit whose answer was lost): its reply, if
      // unsent, goes out now rather than at the next sweep.
      const channel = parseConversationKey(conversation)?.channel;
      if (channel !== undefined) await this.#deliverHere(conversation, channel);
      return;
    }
    const { message } = entry;
    const log = this.#log.child({ channel: message.channel, conversation, seq });
    const policy = this.#options.policies?.get(message.channel);
    if ((policy && (await this.#applyPolicy(seq, conversation, message, policy, log))) || (await this.#applyCommand(seq, conversation, message, log))) {
      await this.#deliverHere(conversation, message.channel);
      return;
    }
    const registered = this.#channels.get(message.channel);
    const channel = registered && this.#flood.wrap(registered);
    const started = this.#clock.monotonic();
    const elapsed = (): number => Math.round(this.#clock.monotonic() - started);
    const limit = deadline(this.#working.signal, this.#options.turnTimeoutMs);
    const { signal } = limit;
    // The turn's reads first: a store failure here is the store's, retried by #turnDurably —
    // not a failed turn to apologise for (and no typing timer or draft is left behind).
    const context = policy && message.direct === false ? await this.#inbox.contextBefore(seq, conversation, conversationKey({ ...refOf(message), thread: '' })) : [];
    const model = await this.#options.commands?.model(conversation);
    const history = await this.#history.recent(conversation, this.#options.historyTurns);
    const existingDraft = channel && policy?.stream && canEdit(channel) ? await this.#drafts.get(seq) : undefined;
    const stopTyping = channel ? this.#startTyping(channel, message, log) : () => undefined;
    const draft = channel && policy?.stream && canEdit(channel) ? this.#startDraft(channel, seq, message, existingDraft, log) : undefined;
    try {
      const output = await this.#options.agent({
        message,
        conversation,
        turnId: seq,
        history,
        signal,
        log,
        prompt: turnText(message, context),
        ...(model === undefined ? {} : { model }),
        ...(draft ? { onTextDelta: draft.onTextDelta } : {}),
      });
      stopTyping();
      const draftId = await draft?.finish();
      await this.#commit(`record the reply to message ${seq}`, () => this.#commitTurn(seq, conversation, output, message, draftId));
      this.#counters.answered++;
      this.#options.events?.onTurn?.(message.channel, elapsed(), 'answered');
      if (output.reply === '') log.warn('the model returned an empty reply; nothing sent');
      log.info({ ms: elapsed() }, 'turn done');
    } catch (error) {
      stopTyping();
      const draftId = await draft?.finish();
      if (error instanceof DiskFullError || error instanceof StoreStoppedError) {
        log.warn('shutdown while the store fails: the reply was not recorded; the message stays in the inbox for the next start');
        return;
      }
      if (this.#working.signal.aborted) {
        log.warn('turn cut off by shutdown; it stays in the inbox for the next start');
        return;
      }
      this.#counters.failed++;
      this.#options.events?.onTurn?.(message.channel, elapsed(), 'failed');
      log.error({ ...failureFields(error, signal, this.#options.turnTimeoutMs), ms: elapsed() }, 'turn failed; telling the user');
      try {
        await this.#commit(`record the apology for message ${seq}`, () => this.#commitFailure(seq, message, apology(error, signal), error instanceof Error ? error.message : String(error), draftId));
      } catch (failure) {
        if (!(failure instanceof DiskFullError || failure instanceof StoreStoppedError)) throw failure;
        log.warn('shutdown while the store fails: the apology was not recorded; the message stays in the inbox for the next start');
        return;
      }
    } finally {
      limit.dispose();
    }
    await this.#deliverHere(conversation, message.channel);
  }

  /**
   * Access, mention gating and pairing. Returns true when the message was dealt with here
   * (ignored, or answered with a pairing code).
   */
  async #applyPolicy(seq: number, conversation: string, message: InboundMessage, policy: ChannelPolicy, log: Logger): Promise<boolean> {
    if (!this.#options.pairing && policy.allow === undefined) throw new Error('a channel without `allow` needs the pairing store');
    const decision = await decideAccess(message, { ...(policy.allow ? { allow: policy.allow } : {}), mentionOnly: policy.mentionOnly }, this.#options.pairing!);
    if (decision.kind === 'ignore') {
      await this.#inbox.markIgnored(seq, decision.reason);
      this.#counters.ignored++;
      log.info({ sender: message.sender.id, reason: decision.reason }, decision.reason === 'not addressed' ? 'not addressed to the bot; kept as context' : 'message ignored');
      return true;
    }
    if (decision.kind === 'pair') {
      log.warn({ sender: message.sender.id, code: decision.code }, 'unknown sender: sent a pairing code; approve with `switchboard pairing approve`');
      await this.#commitAnswer(seq, message, pairingReply(message.channel, decision.code), undefined);
      return true;
    }
    return false;
  }

  /**
   * Chat commands (/new, /model, /status, /help), in every chat — also on channels the policy
   * exempts, like the terminal. Returns true when the message was one and has been answered.
   */
  async #applyCommand(seq: number, conversation: string, message: InboundMessage, log: Logger): Promise<boolean> {
    const commands = this.#options.commands;
    const command = commands ? parseCommand(message.text) : undefined;
    if (!commands || !command) return false;
    const result = await runCommand(command, conversation, {
      ...commands,
      clearHistory: async (tx, key) => void (await this.#history.in(tx).clear(key)),
      status: () => this.#statusLine(),
    });
    log.info({ command: command.name }, 'chat command');
    await this.#commitAnswer(seq, message, result.reply, result.commit);
    return true;
  }

  #statusLine(): string {
    const health = this.health();
    const uptime = formatDuration(this.#clock.monotonic() - this.#startedAt);
    const channels = health.channels.map((c) => `${c.name} ${c.state}${c.notes?.length ? ` (${c.notes.join('; ')})` : ''}`).join(', ');
    return `Up ${uptime} and running · channels: ${channels || 'none'} · ${health.inFlight} in flight, ${health.queued} queued · ${health.counters.answered} answered since start`;
  }

  #startTyping(channel: Channel, message: InboundMessage, log: Logger): () => void {
    if (!hasTyping(channel)) return () => undefined;
    const ref = refOf(message);
    const show = (): void => void channel.typing(ref).catch((error: unknown) => log.debug({ err: error }, 'typing indicator failed'));
    show();
    const timer = setInterval(show, Math.max(1000, channel.typingIntervalMs));
    timer.unref();
    return () => clearInterval(timer);
  }

  #startDraft(channel: Channel & MessageEditor, seq: number, message: InboundMessage, existing: string | undefined, log: Logger): Draft {
    return startDraft({
      channel,
      target: { ...refOf(message), text: '', replyTo: message.id },
      ...(existing === undefined ? {} : { existingId: existing }),
      onCreated: (id) => void this.#drafts.set(seq, id).catch((error: unknown) => log.warn({ err: error }, 'could not remember the streamed draft; a re-run after a crash would start a new one')),
      log,
    });
  }

  async #prune(): Promise<void> {
    // Wall time: the rows carry wall stamps. A forward jump shortens the redelivery window by the jump.
    const before = this.#clock.now() - (this.#options.retentionMs ?? 7 * DAY_MS);
    try {
      const inbox = await this.#inbox.prune(before);
      const outbox = await this.#outbox.prune(before);
      if (inbox + outbox > 0) this.#log.debug({ inbox, outbox }, 'pruned finished messages');
      const codes = (await this.#options.pairing?.expire()) ?? 0;
      if (codes > 0) this.#log.info({ codes }, 'pairing codes expired');
    } catch (error) {
      // Deleting needs space too (WAL frames); the next hourly round tries again.
      if (diskFullCode(error) !== undefined) this.#storage.failed(error, 'prune finished messages');
      else this.#log.error({ err: error }, 'pruning finished messages failed; trying again in an hour');
    }
  }
}

function formatDuration(ms: number): string {
  const minutes = Math.floor(ms / 60_000);
  if (minutes < 1) return `${Math.max(1, Math.round(ms / 1000))}s`;
  if (minutes < 60) return `${minutes}m`;
  const hours = Math.floor(minutes / 60);
  return hours < 48 ? `${hours}h ${minutes % 60}m` : `${Math.floor(hours / 24)}d ${hours % 24}h`;
}

/**
 * What the log says about a failed turn, in one field. A model that cannot be reached or a turn
 * that ran out of time is an operating condition: its cause once (`error`), no stack — the
 * message of a ProviderError already carries its causes. Anything else is a bug: `err`, stack and all.
 */
function failureFields(error: unknown, signal: AbortSignal, turnTimeoutMs: number): { error: string } | { err: unknown } {
  if (signal.aborted) return { error: `the turn ran longer than agent.turn_timeout_seconds (${Math.round(turnTimeoutMs / 1000)} s)` };
  if (error instanceof ProviderError) return { error: error.message };
  return { err: error };
}

/** What the user is told when their turn failed: what happened, without internals. */
function apology(error: unknown, signal: AbortSignal): string {
  if (signal.aborted) return 'Sorry — that took too long and I had to stop. Please try again, perhaps with a simpler request.';
  if (error instanceof ProviderError) {
    if (error.status === 429) return 'Sorry — the model is rate-limiting me right now. Please try again in a minute.';
    // A 2xx that was not a usable answer (an HTML page, broken JSON): the model was reached, its answer was not readable.
    if (error.status !== undefined && error.status >= 200 && error.status < 300) return 'Sorry — the model service sent back something I could not read, so I have no answer. Please try again in a moment.';
    return 'Sorry — I could not reach the model to answer that. Please try again in a moment.';
  }
  return 'Sorry — something went wrong while answering that. Please try again.';
}
