/**
 * One turn, from a queued inbox entry to a recorded reply: admission (access, mention gating,
 * pairing, chat commands), the reads (context, history, the conversation's model), the agent with
 * typing and a streamed draft, then the commit — or an apology when the turn failed. The reply
 * is sent by the node that holds its channel.
 */
import type { Logger } from 'pino';
import { canEdit, hasTyping, type Channel, type InboundMessage, type MessageEditor } from '../channel.ts';
import { conversationKey, parseConversationKey, refOf } from '../conversation.ts';
import { parseCommand, runCommand } from '../policy/commands.ts';
import { decideAccess, pairingReply } from '../policy/access.ts';
import { turnText } from '../policy/turn-text.ts';
import type { Drafts } from '../store/settings.ts';
import type { History } from '../store/history.ts';
import type { Inbox } from '../store/inbox.ts';
import { damagedDatabaseError } from '../store/integrity.ts';
import { ProviderError, type ChatMessage } from '../provider.ts';
import type { Clock } from '../clock.ts';
import { deadline } from '../abort.ts';
import { startDraft, type Draft } from './draft.ts';
import type { FloodGate } from './flood.ts';
import type { ChannelPolicy, RuntimeCounters, RuntimeOptions } from './options.ts';
import type { PendingAhead } from './delivery.ts';
import type { TurnRecords } from './records.ts';
import { stoppedOnStore, type StoreRetry } from './store-retry.ts';
import type { TurnSettle } from './turn-queue.ts';

export interface TurnsOptions {
  /** The runtime's options as they are now (a reload replaces them; a running turn keeps what it read). */
  options(): RuntimeOptions;
  readonly log: Logger;
  readonly databaseName: string;
  readonly inbox: Inbox;
  readonly history: History;
  readonly drafts: Drafts;
  readonly records: TurnRecords;
  readonly retry: StoreRetry;
  /** The channels running here, by name. */
  readonly channels: ReadonlyMap<string, Channel>;
  readonly flood: FloodGate;
  readonly clock: Clock;
  readonly counters: RuntimeCounters;
  /** Aborted when the shutdown grace runs out: running turns are cut off. */
  readonly signal: AbortSignal;
  stopping(): boolean;
  /** Sends the conversation's recorded replies now, if this node sends them (starting from `ahead`'s rows when they are still good). */
  deliver(conversation: string, channel: string, ahead?: PendingAhead): Promise<void>;
  /** A read of the conversation's pending replies to issue with a turn's commit, if this node sends them (see PendingAhead). */
  ahead?(conversation: string, channel: string): PendingAhead | undefined;
  /** The /status command's answer. */
  statusLine(): string;
}

export class Turns {
  readonly #o: TurnsOptions;
  /** Conversations whose last message here was ignored as not addressed to the bot (see #earlyReads). */
  readonly #unaddressed = new Set<string>();

  constructor(options: TurnsOptions) {
    this.#o = options;
  }

  /** The queue's worker: 'retry' when the turn crashed or this node stopped before it was answered. */
  readonly work = async (seq: number, conversation: string, settle?: TurnSettle): Promise<'done' | 'retry'> => {
    try {
      await this.#durably(seq, conversation, settle);
    } catch (error) {
      // A page that went bad while running: the paragraph that says what to do, not a stack.
      const damaged = damagedDatabaseError(error, this.#o.databaseName);
      if (damaged) this.#o.log.error({ seq, conversation, code: damaged.code }, `turn crashed on a damaged database; the message stays queued. ${damaged.message}. Check it with switchboard doctor`);
      else this.#o.log.error({ err: error, seq, conversation }, 'turn crashed; the message stays queued and is tried again');
      return 'retry';
    }
    if (this.#o.stopping() && (await this.#o.inbox.queuedEntry(seq).catch(() => undefined))) return 'retry';
    return 'done';
  };

  /**
   * A turn whose writes may meet a full disk: the message stays queued in the inbox and the turn
   * runs again once the data_dir takes writes (a turn that got as far as the model keeps its
   * output and only its commit is tried again). At shutdown it is left for the next start.
   */
  #durably(seq: number, conversation: string, settle: TurnSettle | undefined): Promise<void> {
    return this.#o.retry.untilStopped(
      `finish the turn of message ${seq}`,
      () => this.#turn(seq, conversation, settle),
      () => this.#o.log.warn({ seq, conversation }, 'shutdown while the store fails: the message stays in the inbox for the next start'),
    );
  }

  async #turn(seq: number, conversation: string, settle: TurnSettle | undefined): Promise<void> {
    const o = this.#o;
    const options = o.options();
    const early = this.#earlyReads(conversation, options);
    const entry = await o.inbox.queuedEntry(seq);
    if (!entry) {
      // Answered already (before a crash, or by a commit whose answer was lost): its reply, if
      // unsent, goes out now rather than at the next sweep.
      const channel = parseConversationKey(conversation)?.channel;
      if (channel !== undefined) await o.deliver(conversation, channel);
      return;
    }
    const { message } = entry;
    const log = o.log.child({ channel: message.channel, conversation, seq });
    const policy = options.policies?.get(message.channel);
    if ((policy && (await this.#applyPolicy(seq, conversation, message, policy, log, settle))) || (await this.#applyCommand(seq, conversation, message, log, settle))) {
      await o.deliver(conversation, message.channel);
      return;
    }
    const registered = o.channels.get(message.channel);
    const channel = registered && o.flood.wrap(registered);
    const started = o.clock.monotonic();
    const elapsed = (): number => Math.round(o.clock.monotonic() - started);
    const limit = deadline(o.signal, options.turnTimeoutMs);
    const { signal } = limit;
    /** The pending replies read in the transaction that recorded this turn's reply, when it committed. */
    let committed: PendingAhead | undefined;
    // The turn's reads first: a store failure here is the store's, retried by #durably —
    // not a failed turn to apologise for (and no typing timer or draft is left behind).
    // Issued together: on PostgreSQL the pool pipelines them, one round trip instead of four.
    const [context, model, history, existingDraft] = await Promise.all([
      policy && message.direct === false ? o.inbox.contextBefore(seq, conversation, conversationKey({ ...refOf(message), thread: '' })) : [],
      early ? early.model : options.commands?.model(conversation),
      early ? early.history : o.history.recent(conversation, options.historyTurns),
      channel && policy?.stream && canEdit(channel) ? o.drafts.get(seq) : undefined,
    ]);
    const stopTyping = channel ? startTyping(channel, message, log) : () => undefined;
    const draft = channel && policy?.stream && canEdit(channel) ? this.#startDraft(channel, seq, message, existingDraft, log) : undefined;
    try {
      const output = await options.agent({
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
      const ahead = o.ahead?.(conversation, message.channel);
      if (await o.retry.commit(`record the reply to message ${seq}`, () => o.records.turn(seq, conversation, output, message, draftId, settle, ahead))) committed = ahead;
      o.counters.answered++;
      options.events?.onTurn?.(message.channel, elapsed(), 'answered');
      if (output.reply === '') log.warn('the model returned an empty reply; nothing sent');
      log.info({ ms: elapsed() }, 'turn done');
    } catch (error) {
      stopTyping();
      const draftId = await draft?.finish();
      if (stoppedOnStore(error)) {
        log.warn('shutdown while the store fails: the reply was not recorded; the message stays in the inbox for the next start');
        return;
      }
      if (o.signal.aborted) {
        log.warn('turn cut off by shutdown; it stays in the inbox for the next start');
        return;
      }
      o.counters.failed++;
      options.events?.onTurn?.(message.channel, elapsed(), 'failed');
      log.error({ ...failureFields(error, signal, options.turnTimeoutMs), ms: elapsed() }, 'turn failed; telling the user');
      try {
        const ahead = o.ahead?.(conversation, message.channel);
        if (await o.retry.commit(`record the apology for message ${seq}`, () => o.records.failure(seq, message, apology(error, signal), error instanceof Error ? error.message : String(error), draftId, settle, ahead))) committed = ahead;
      } catch (failure) {
        if (!stoppedOnStore(failure)) throw failure;
        log.warn('shutdown while the store fails: the apology was not recorded; the message stays in the inbox for the next start');
        return;
      }
    } finally {
      limit.dispose();
    }
    await o.deliver(conversation, message.channel, committed);
  }

  /**
   * The reads that need only the conversation, issued with the inbox row's: on PostgreSQL one
   * write and one round trip for the three, not two of each. Left out in a conversation whose last
   * message was not addressed to the bot (a group talking among itself), whose next message likely
   * ends ignored too: its reads would be wasted. Unused (the message answered already, ignored, or
   * a command), their answers are dropped.
   */
  #earlyReads(conversation: string, options: RuntimeOptions): { model: Promise<string | undefined> | undefined; history: Promise<ChatMessage[]> } | undefined {
    if (this.#unaddressed.delete(conversation)) return undefined;
    const model = options.commands?.model(conversation);
    const history = this.#o.history.recent(conversation, options.historyTurns);
    model?.catch(() => undefined);
    history.catch(() => undefined);
    return { model, history };
  }

  /**
   * Access, mention gating and pairing. Returns true when the message was dealt with here
   * (ignored, or answered with a pairing code).
   */
  async #applyPolicy(seq: number, conversation: string, message: InboundMessage, policy: ChannelPolicy, log: Logger, settle: TurnSettle | undefined): Promise<boolean> {
    const { pairing } = this.#o.options();
    if (!pairing && policy.allow === undefined) throw new Error('a channel without `allow` needs the pairing store');
    const decision = await decideAccess(message, { ...(policy.allow ? { allow: policy.allow } : {}), mentionOnly: policy.mentionOnly }, pairing!);
    if (decision.kind === 'ignore') {
      await this.#o.inbox.markIgnored(seq, decision.reason);
      if (decision.reason === 'not addressed') {
        // a bound, not an eviction order: forgetting costs one wasted early read per conversation
        if (this.#unaddressed.size >= 10_000) this.#unaddressed.clear();
        this.#unaddressed.add(conversation);
      }
      this.#o.counters.ignored++;
      log.info({ sender: message.sender.id, reason: decision.reason }, decision.reason === 'not addressed' ? 'not addressed to the bot; kept as context' : 'message ignored');
      return true;
    }
    if (decision.kind === 'pair') {
      log.warn({ sender: message.sender.id, code: decision.code }, 'unknown sender: sent a pairing code; approve with `switchboard pairing approve`');
      await this.#o.records.answer(seq, message, pairingReply(message.channel, decision.code), undefined, settle);
      return true;
    }
    return false;
  }

  /**
   * Chat commands (/new, /model, /status, /help), in every chat — also on channels the policy
   * exempts, like the terminal. Returns true when the message was one and has been answered.
   */
  async #applyCommand(seq: number, conversation: string, message: InboundMessage, log: Logger, settle: TurnSettle | undefined): Promise<boolean> {
    const { commands } = this.#o.options();
    const command = commands ? parseCommand(message.text) : undefined;
    if (!commands || !command) return false;
    const result = await runCommand(command, conversation, {
      ...commands,
      clearHistory: async (tx, key) => void (await this.#o.history.in(tx).clear(key)),
      status: () => this.#o.statusLine(),
    });
    log.info({ command: command.name }, 'chat command');
    await this.#o.records.answer(seq, message, result.reply, result.commit, settle);
    return true;
  }

  #startDraft(channel: Channel & MessageEditor, seq: number, message: InboundMessage, existing: string | undefined, log: Logger): Draft {
    return startDraft({
      channel,
      target: { ...refOf(message), text: '', replyTo: message.id },
      ...(existing === undefined ? {} : { existingId: existing }),
      onCreated: (id) => void this.#o.drafts.set(seq, id).catch((error: unknown) => log.warn({ err: error }, 'could not remember the streamed draft; a re-run after a crash would start a new one')),
      log,
    });
  }
}

function startTyping(channel: Channel, message: InboundMessage, log: Logger): () => void {
  if (!hasTyping(channel)) return () => undefined;
  const ref = refOf(message);
  const show = (): void => void channel.typing(ref).catch((error: unknown) => log.debug({ err: error }, 'typing indicator failed'));
  show();
  const timer = setInterval(show, Math.max(1000, channel.typingIntervalMs));
  timer.unref();
  return () => clearInterval(timer);
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
