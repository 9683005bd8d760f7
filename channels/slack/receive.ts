/**
 * Turns one Slack event into a pushed message, the same for Socket Mode and HTTP events (the
 * App's listener calls it, app.ts). `handle` resolves once the message is in the inbox (or the
 * event was not one to push) — only then may the event be acknowledged — and rejects when
 * push rejects.
 *
 * Events of one chat are handled one after another, in arrival order (names and files are
 * fetched before pushing, which must not reorder a conversation); different chats do not wait
 * for each other. A message handled once is not handled again: the `message` and `app_mention`
 * events of one mention, and redeliveries, share an id (see inbound.ts).
 */
import type { Logger } from 'pino';
import type { AttachmentStore, InboundMessage, Push } from '../../src/channel.ts';
import type { SlackWebClient } from './app.ts';
import { MalformedPayload } from '../../src/inbound/malformed.ts';
import { checkEvent, fileKind, fromABot, isDirect, isMessageEvent, mentions, messageId, normalise, threadOf, type SlackFile, type SlackIdentity, type SlackMessageEvent } from './inbound.ts';

/** A bounded map that forgets its oldest entries. */
export class Recent<V> {
  readonly #limit: number;
  readonly #map = new Map<string, V>();

  constructor(limit: number) {
    this.#limit = limit;
  }

  get(key: string): V | undefined {
    return this.#map.get(key);
  }

  has(key: string): boolean {
    return this.#map.has(key);
  }

  set(key: string, value: V): void {
    this.#map.delete(key);
    this.#map.set(key, value);
    if (this.#map.size > this.#limit) this.#map.delete(this.#map.keys().next().value!);
  }
}

/** Threads the bot has posted in: a message in one is addressed to the bot. */
export class BotThreads {
  readonly #known = new Recent<boolean>(20_000);

  /** The bot posted in this thread (called on every send into a thread). */
  mark(chat: string, thread: string): void {
    this.#known.set(`${chat}/${thread}`, true);
  }

  has(chat: string, thread: string): boolean {
    return this.#known.get(`${chat}/${thread}`) === true;
  }

  /**
   * Makes sure a thread is known, asking Slack (conversations.replies) about one not seen
   * since start — after a restart the bot may have answered in it before. Failures count as
   * "no" (the message is then handled as unaddressed chatter).
   */
  async learn(chat: string, thread: string, lookup: () => Promise<boolean>): Promise<void> {
    const key = `${chat}/${thread}`;
    if (this.#known.has(key)) return;
    this.#known.set(key, await lookup().catch(() => false));
  }
}

/**
 * Events being handled or waiting their turn, across chats, at most. Past it an event is
 * refused at once (not acknowledged, so Slack delivers it again later) instead of waiting in
 * memory while the runtime's queue is full.
 */
export const MAX_WAITING_EVENTS = 1000;

export interface IntakeOptions {
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
  readonly #handled = new Recent<true>(5000);
  /** The tail of each chat's chain of events. */
  readonly #chains = new Map<string, Promise<unknown>>();
  /** Display names by user id, looked up again after a day (a failed lookup after ten minutes). */
  readonly #names = new Recent<{ readonly name: string | undefined; readonly until: number }>(2000);
  /** Events in the chains, handled or waiting. */
  #waiting = 0;

  constructor(options: IntakeOptions) {
    this.#options = options;
  }

  /** Events being handled or waiting (for tests and health). */
  get waiting(): number {
    return this.#waiting;
  }

  /** Handles one Events API `event`; resolves when it may be acknowledged. */
  handle(event: unknown, push: Push): Promise<void> {
    if (!isMessageEvent(event) || !event.channel || typeof event.channel !== 'string') return Promise.resolve();
    const max = this.#options.maxWaiting ?? MAX_WAITING_EVENTS;
    if (this.#waiting >= max) return Promise.reject(new Error(`${this.#waiting} Slack events are waiting for the runtime; this one is left for Slack to deliver again`));
    const chat = event.channel;
    const previous = this.#chains.get(chat) ?? Promise.resolve();
    this.#waiting++;
    const next = previous.catch(() => undefined).then(() => this.#handle(event, push));
    this.#chains.set(chat, next);
    void next
      .finally(() => {
        this.#waiting--;
        if (this.#chains.get(chat) === next) this.#chains.delete(chat);
      })
      .catch(() => undefined);
    return next;
  }

  async #handle(event: SlackMessageEvent, push: Push): Promise<void> {
    const { identity, threads, web, botToken } = this.#options;
    try {
      checkEvent(event);
    } catch (error) {
      if (!(error instanceof MalformedPayload)) throw error;
      // acknowledged: Slack would deliver the same event again, and it would fail the same way
      this.#options.log.warn({ chat: event.channel, ts: typeof event.ts === 'string' ? event.ts : undefined, reason: error.message }, 'could not read a Slack event; skipped');
      return;
    }
    const chat = event.channel!;
    const thread = threadOf(event);
    if (fromABot(event, identity)) {
      // Our own post in a thread (its echo) also tells us the bot is in that thread.
      if (event.user === identity.userId && thread !== undefined) threads.mark(chat, thread);
      return;
    }
    if (!event.ts || this.#handled.has(messageId(chat, event.ts))) return;
    // A mention addresses the bot anyway; only otherwise does it matter whether the bot is in the thread.
    if (thread !== undefined && !isDirect(event) && event.type !== 'app_mention' && !mentions(event.text ?? '', identity.userId)) {
      await threads.learn(chat, thread, async () => {
        const replies = await web.conversations.replies({ token: botToken, channel: chat, ts: thread, limit: 200 });
        return (replies.messages ?? []).some((m) => m.user === identity.userId || (identity.botId !== undefined && m.bot_id === identity.botId));
      });
    }
    const normalised = normalise(event, { channel: this.#options.channel, identity, botInThread: (c, t) => threads.has(c, t) });
    if (!normalised) return;
    let message: InboundMessage = normalised.message;
    if (message.sender.name === undefined) {
      const name = await this.#name(message.sender.id);
      if (name) message = { ...message, sender: { id: message.sender.id, name } };
    }
    if (normalised.files.length > 0) {
      const attachments = [];
      for (const file of normalised.files) attachments.push(await this.#save(message.id, file));
      message = { ...message, attachments };
    }
    await push(message);
    this.#handled.set(message.id, true);
  }

  /** A person's display name (users.info, cached; none when the lookup fails). */
  async #name(user: string): Promise<string | undefined> {
    const cached = this.#names.get(user);
    if (cached !== undefined && cached.until > performance.now()) return cached.name; // monotonic cache ages
    try {
      const info = await this.#options.web.users.info({ token: this.#options.botToken, user });
      const name = info.user?.profile?.display_name || info.user?.real_name || info.user?.name || undefined;
      this.#names.set(user, { name, until: performance.now() + 24 * 3_600_000 });
      return name;
    } catch (error) {
      this.#options.log.debug({ err: error, user }, 'users.info failed; the sender stays nameless for now');
      this.#names.set(user, { name: cached?.name, until: performance.now() + 10 * 60_000 });
      return cached?.name;
    }
  }

  #save(id: string, file: SlackFile): ReturnType<AttachmentStore['save']> {
    const { attachments, botToken, fileOrigins } = this.#options;
    const location = file.url_private_download ?? file.url_private;
    return attachments.save({
      channel: this.#options.channel,
      messageId: id,
      kind: fileKind(file),
      ...(file.name || file.title ? { name: file.name || file.title } : {}),
      ...(file.mimetype ? { mime: file.mimetype } : {}),
      ...(typeof file.size === 'number' ? { size: file.size } : {}),
      async download(signal) {
        if (!location) throw new Error(file.mode === 'tombstone' ? 'the file was deleted' : 'Slack gave no download URL');
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
    });
  }
}
