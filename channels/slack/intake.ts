/**
 * Turns one Slack event into a pushed message, the same for Socket Mode and HTTP events (the
 * App's listener calls it, app.ts).
 *
 * Slack wants every event acknowledged within 3 seconds and sends it again otherwise — at
 * once, after 1 minute, after 5 minutes — then gives up
 * (https://api.slack.com/apis/events-api#responding, "Responding to events" and "Retries";
 * Socket Mode the same, https://api.slack.com/apis/connections/socket-implement). Looking up a
 * name (users.info), a thread (conversations.replies) or downloading files can take longer. So
 * `handle` only writes the raw event to the channel's journal (its durable state, in the
 * database beside the inbox) and resolves — the event may be acknowledged then — and the
 * work that needs Slack runs after: enrich, push, then drop the journal entry. A push that is
 * refused (shutdown, a failing store) is tried again while the listen runs; whatever is still
 * in the journal when a listen starts (a restart, a crash, a cluster takeover) is enriched and
 * pushed then (`replay`). The inbox dedupes by message id, so an event pushed twice (a crash
 * between push and journal delete, a redelivery) is still answered once.
 *
 * `handle` rejects (no ack: Slack delivers it again) only when the journal write failed, or
 * more than `maxWaiting` events are already waiting.
 *
 * Events of one chat are enriched and pushed one after another, in arrival order; different
 * chats do not wait for each other. A message handled once is not handled again: the `message`
 * and `app_mention` events of one mention, and redeliveries, share an id (see inbound.ts).
 */
import type { Logger } from 'pino';
import { pause } from '../../src/abort.ts';
import type { AttachmentStore, InboundMessage, Push } from '../../src/channel.ts';
import type { ChannelState } from '../../src/channel-state.ts';
import type { SlackWebClient } from './app.ts';
import { platformError, toSendError } from './errors.ts';
import { MalformedPayload } from '../../src/inbound/malformed.ts';
import { BoundedMap } from '../../src/bounded-map.ts';
import { checkEvent, fileKind, fromABot, isDirect, isMessageEvent, mentions, messageId, normalise, threadOf, type SlackFile, type SlackIdentity, type SlackMessageEvent } from './inbound.ts';
import { withAttachments, type FileInput } from '../../src/inbound/with-attachments.ts';

/** Threads the bot has posted in: a message in one is addressed to the bot. */
export class BotThreads {
  readonly #known = new BoundedMap<string, boolean>(20_000);

  /** The bot posted in this thread (called on every send into a thread). */
  mark(chat: string, thread: string): void {
    this.#known.setNewest(`${chat}/${thread}`, true);
  }

  has(chat: string, thread: string): boolean {
    return this.#known.get(`${chat}/${thread}`) === true;
  }

  /**
   * Whether the bot is in a thread, asking Slack (conversations.replies) about one not seen
   * since start — after a restart the bot may have answered in it before. A failed lookup is
   * not a "no": `again(attempt, error)` says whether to try once more (after its wait);
   * undefined when Slack never said (nothing is remembered then, the next message asks again).
   */
  async learn(chat: string, thread: string, lookup: () => Promise<boolean>, again: (attempt: number, error: unknown) => Promise<boolean>): Promise<boolean | undefined> {
    const key = `${chat}/${thread}`;
    const known = this.#known.get(key);
    if (known !== undefined) return known;
    for (let attempt = 0; ; attempt++) {
      try {
        const inThread = await lookup();
        // The bot's own echo may have marked it meanwhile.
        if (!this.has(chat, thread)) this.#known.setNewest(key, inThread);
        return this.has(chat, thread) || inThread;
      } catch (error) {
        if (!(await again(attempt, error))) return undefined;
      }
    }
  }
}

/** Journal keys: `received/<message id>`, the raw event as JSON. */
const JOURNAL = 'received/';

/** Waits between tries of a refused push or a failed lookup (the last one repeats). */
export const RETRY_MS: readonly number[] = [500, 1000, 2000, 5000, 10_000, 30_000];

/**
 * Events being handled or waiting their turn, across chats, at most. Past it an event is
 * refused at once (not acknowledged, so Slack delivers it again later) instead of waiting in
 * memory while the runtime's queue is full.
 */
export const MAX_WAITING_EVENTS = 1000;

export interface IntakeOptions {
  /** Where received events wait, durably, until they are in the inbox: the channel's own state. */
  readonly journal: ChannelState;
  /** The listen's: tries stop when it aborts (the journal keeps what was not pushed yet). */
  readonly signal: AbortSignal;
  /** @default {@link RETRY_MS} */
  readonly retryMs?: readonly number[];
  /** Tries of a thread lookup before the message counts as addressed anyway. @default 3 */
  readonly lookupAttempts?: number;
  readonly channel: string;
  readonly identity: SlackIdentity;
  /** Bolt's `app.client` (it carries no token: see app.ts). */
  readonly web: SlackWebClient;
  /** For the Web API calls and file downloads. */
  readonly botToken: string;
  /** Origins the bot token may be sent to when downloading files (Slack's, and the configured API's). */
  readonly fileOrigins: (url: URL) => boolean;
  readonly attachments: AttachmentStore;
  readonly threads: BotThreads;
  readonly log: Logger;
  /** @default {@link MAX_WAITING_EVENTS} */
  readonly maxWaiting?: number;
}

export class Intake {
  readonly #options: IntakeOptions;
  /** Ids pushed (or pushed as duplicates) lately. */
  readonly #handled = new BoundedMap<string, true>(5000);
  /** Ids journaled and waiting for their push. */
  readonly #pending = new Set<string>();
  /** The tail of each chat's chain of events. */
  readonly #chains = new Map<string, Promise<unknown>>();
  /** Display names by user id, looked up again after a day (a failed lookup after ten minutes). */
  readonly #names = new BoundedMap<string, { readonly name: string | undefined; readonly until: number }>(2000);
  /** Events in the chains, handled or waiting. */
  #waiting = 0;

  constructor(options: IntakeOptions) {
    this.#options = options;
  }

  /** Events being handled or waiting (for tests and health). */
  get waiting(): number {
    return this.#waiting;
  }

  /** Resolves once every event taken so far was pushed (or given up at the listen's end). */
  async settled(): Promise<void> {
    while (this.#chains.size > 0) await Promise.allSettled([...this.#chains.values()]);
  }

  /**
   * Takes one Events API `event`: resolves once it is journaled (or was not one to push), when
   * it may be acknowledged; the push follows.
   */
  async handle(event: unknown, push: Push): Promise<void> {
    if (!isMessageEvent(event) || !event.channel || typeof event.channel !== 'string') return;
    const { identity, threads } = this.#options;
    try {
      checkEvent(event);
    } catch (error) {
      if (!(error instanceof MalformedPayload)) throw error;
      // acknowledged: Slack would deliver the same event again, and it would fail the same way
      this.#options.log.warn({ chat: event.channel, ts: typeof event.ts === 'string' ? event.ts : undefined, reason: error.message }, 'could not read a Slack event; skipped');
      return;
    }
    const chat = event.channel;
    const thread = threadOf(event);
    if (fromABot(event, identity)) {
      // Our own post in a thread (its echo) also tells us the bot is in that thread.
      if (event.user === identity.userId && thread !== undefined) threads.mark(chat, thread);
      return;
    }
    if (!event.ts) return;
    const id = messageId(chat, event.ts);
    if (this.#handled.has(id) || this.#pending.has(id)) return;
    // Edits, joins, messages without a sender…: nothing to push, nothing to journal.
    if (!normalise(event, { channel: this.#options.channel, identity, botInThread: () => false })) return;
    const max = this.#options.maxWaiting ?? MAX_WAITING_EVENTS;
    if (this.#waiting >= max) throw new Error(`${this.#waiting} Slack events are waiting for the runtime; this one is left for Slack to deliver again`);
    this.#pending.add(id);
    this.#waiting++;
    try {
      await this.#options.journal.put(`${JOURNAL}${id}`, JSON.stringify(event));
    } catch (error) {
      this.#pending.delete(id);
      this.#waiting--;
      throw error;
    }
    this.#enqueue(chat, id, event, push);
  }

  /**
   * Pushes what an earlier listen journaled and did not push (oldest first). Call when a
   * listen starts; resolves once the entries are queued (not pushed).
   */
  async replay(push: Push): Promise<number> {
    const entries = await this.#options.journal.list(JOURNAL);
    let queued = 0;
    for (const { key, value } of entries) {
      const id = key.slice(JOURNAL.length);
      if (this.#handled.has(id) || this.#pending.has(id)) continue;
      let event: SlackMessageEvent;
      try {
        event = JSON.parse(value) as SlackMessageEvent;
        checkEvent(event);
      } catch (error) {
        this.#options.log.warn({ id, err: error }, 'a journaled Slack event could not be read; dropped');
        await this.#options.journal.delete([key]).catch(() => undefined);
        continue;
      }
      this.#pending.add(id);
      this.#waiting++;
      this.#enqueue(event.channel!, id, event, push);
      queued++;
    }
    if (queued > 0) this.#options.log.info({ events: queued }, 'slack events received before the last stop are pushed now');
    return queued;
  }

  #enqueue(chat: string, id: string, event: SlackMessageEvent, push: Push): void {
    const previous = this.#chains.get(chat) ?? Promise.resolve();
    const next = previous.then(() => this.#deliver(id, event, push));
    this.#chains.set(chat, next);
    void next
      .catch((error: unknown) => this.#options.log.error({ err: error, id }, 'slack event not pushed; it stays in the journal for the next start'))
      .finally(() => {
        this.#waiting--;
        this.#pending.delete(id);
        if (this.#chains.get(chat) === next) this.#chains.delete(chat);
      });
  }

  /** Enriches and pushes one journaled event, trying again while the listen runs. */
  async #deliver(id: string, event: SlackMessageEvent, push: Push): Promise<void> {
    const { journal, signal, log } = this.#options;
    for (let attempt = 0; !signal.aborted; attempt++) {
      try {
        const message = await this.#enrich(event);
        if (message) await push(message);
        this.#handled.setNewest(id, true);
        await journal.delete([`${JOURNAL}${id}`]).catch((error: unknown) => log.warn({ err: error, id }, 'could not drop a pushed Slack event from the journal (pushed again at the next start, and recognised)'));
        return;
      } catch (error) {
        if (signal.aborted) return;
        const wait = this.#wait(attempt);
        log.warn({ err: error, id, retryInMs: wait }, 'slack message not taken by the runtime yet; trying again');
        await pause(wait, signal);
      }
    }
  }

  #wait(attempt: number): number {
    const steps = this.#options.retryMs ?? RETRY_MS;
    return steps[Math.min(attempt, steps.length - 1)] ?? 1000;
  }

  /** The message to push for a journaled event (names, thread, files), or undefined when there is none. */
  async #enrich(event: SlackMessageEvent): Promise<InboundMessage | undefined> {
    const { identity, threads } = this.#options;
    const chat = event.channel!;
    const thread = threadOf(event);
    let inThread: boolean | undefined;
    // A mention addresses the bot anyway; only otherwise does it matter whether the bot is in the thread.
    if (thread !== undefined && !isDirect(event) && event.type !== 'app_mention' && !mentions(event.text ?? '', identity.userId) && event.parent_user_id !== identity.userId) {
      inThread = await this.#inThread(chat, thread);
    }
    const normalised = normalise(event, { channel: this.#options.channel, identity, botInThread: (c, t) => inThread ?? threads.has(c, t) });
    if (!normalised) return undefined;
    let message: InboundMessage = normalised.message;
    if (message.sender.name === undefined) {
      const name = await this.#name(message.sender.id);
      if (name) message = { ...message, sender: { id: message.sender.id, name } };
    }
    return withAttachments(this.#options.attachments, message, normalised.files, async (file) => this.#fileInput(await this.#fileInfo(file)), { oneByOne: true });
  }

  /**
   * Whether the bot is in a thread (see BotThreads.learn). A lookup that keeps failing does not
   * turn a follow-up into chatter: it counts as addressed (a thread reply the bot may owe an
   * answer to), and the next message of the thread asks again.
   */
  async #inThread(chat: string, thread: string): Promise<boolean> {
    const { identity, threads, web, botToken, log, signal } = this.#options;
    const attempts = this.#options.lookupAttempts ?? 3;
    const known = await threads.learn(
      chat,
      thread,
      async () => {
        const replies = await web.conversations.replies({ token: botToken, channel: chat, ts: thread, limit: 200 });
        return (replies.messages ?? []).some((m) => m.user === identity.userId || (identity.botId !== undefined && m.bot_id === identity.botId));
      },
      async (attempt, error) => {
        const code = platformError(error);
        // The thread is gone: the bot cannot be in it.
        if (code === 'thread_not_found') throw error;
        const failure = toSendError(error, 'conversations.replies');
        if (failure.permanent || attempt + 1 >= attempts) {
          log.warn({ err: error, chat, thread }, `could not ask Slack whether the bot is in this thread (conversations.replies${code === 'missing_scope' ? ': the app needs the channels:history / groups:history scopes' : ''}); the message counts as addressed`);
          return false;
        }
        return pause(failure.retryAfterMs ?? this.#wait(attempt), signal);
      },
    ).catch((error: unknown) => (platformError(error) === 'thread_not_found' ? false : Promise.reject(error)));
    return known ?? true;
  }

  /**
   * A Slack Connect file can arrive as a stub (`file_access: "check_file_info"`: no name, size
   * or URL) that files.info completes (https://api.slack.com/types/file, Slack Connect). When
   * files.info fails the stub stays, and the file is described as not downloaded.
   */
  async #fileInfo(file: SlackFile): Promise<SlackFile> {
    if (file.file_access !== 'check_file_info' || !file.id) return file;
    try {
      const info = await this.#options.web.files.info({ token: this.#options.botToken, file: file.id });
      if (info.file) return info.file as SlackFile;
    } catch (error) {
      this.#options.log.warn({ err: error, file: file.id }, 'files.info failed for a Slack Connect file; it is described, not downloaded');
    }
    return file;
  }

  /** A person's display name (users.info, cached; none when the lookup fails). */
  async #name(user: string): Promise<string | undefined> {
    const cached = this.#names.get(user);
    if (cached !== undefined && cached.until > performance.now()) return cached.name; // monotonic cache ages
    try {
      const info = await this.#options.web.users.info({ token: this.#options.botToken, user });
      const name = info.user?.profile?.display_name || info.user?.real_name || info.user?.name || undefined;
      this.#names.setNewest(user, { name, until: performance.now() + 24 * 3_600_000 });
      return name;
    } catch (error) {
      this.#options.log.debug({ err: error, user }, 'users.info failed; the sender stays nameless for now');
      this.#names.setNewest(user, { name: cached?.name, until: performance.now() + 10 * 60_000 });
      return cached?.name;
    }
  }

  #fileInput(file: SlackFile): FileInput {
    const { botToken, fileOrigins } = this.#options;
    const location = file.url_private_download ?? file.url_private;
    return {
      kind: fileKind(file),
      ...(file.name || file.title ? { name: file.name || file.title } : {}),
      ...(file.mimetype ? { mime: file.mimetype } : {}),
      ...(typeof file.size === 'number' ? { size: file.size } : {}),
      async download(signal) {
        if (!location) {
          throw new Error(file.mode === 'tombstone' ? 'the file was deleted' : file.file_access === 'check_file_info' ? 'a Slack Connect file whose details files.info did not give (does the app have the files:read scope?)' : 'Slack gave no download URL');
        }
        const url = new URL(location);
        if (!fileOrigins(url)) throw new Error(`refusing to send the bot token to ${url.host}`);
        const response = await fetch(url, { headers: { authorization: `Bearer ${botToken}` }, signal });
        if (!response.ok || !response.body) throw new Error(`download failed: HTTP ${response.status}`);
        if ((response.headers.get('content-type') ?? '').startsWith('text/html') && !(file.mimetype ?? '').startsWith('text/html')) {
          // Slack answers a file URL it will not serve this token with its sign-in page.
          await response.body.cancel();
          throw new Error('download failed: Slack answered with a web page (does the app have the files:read scope?)');
        }
        return response.body;
      },
    };
  }
}
