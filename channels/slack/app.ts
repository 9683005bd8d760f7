/**
 * The Bolt App of the Slack channel: events come in through a Receiver — socket.ts for Socket
 * Mode, Bolt's HTTPReceiver for the HTTP Events API (http.ts) — and go through
 * `App.processEvent` to one listener; replies go out through `app.client`.
 *
 * Acknowledging: processEvent calls an Events API event's `ack` *before* its listeners run
 * ("Events API requests are acknowledged right away"). That call only tells the receiver what
 * to answer. Both receivers answer Slack once processEvent has resolved — after the listener
 * wrote the raw event to the channel's journal (intake.ts), well within Slack's 3 seconds;
 * the lookups and the push come after — and not at all (Socket Mode) or with a 503 (HTTP)
 * when it rejected (the journal could not be written), so Slack delivers the event again.
 *
 * - authorize: the identity from the channel's one auth.test (index.ts). Bolt is not given the
 *   token itself: it would then call auth.test from its constructor (where a failure is an
 *   unhandled rejection) or, with token verification off, on every event. So `app.client`
 *   carries no token and every call passes it (`token: …`), as Bolt's docs do for apps with
 *   an `authorize`.
 * - ignoreSelf off: the bot's own messages arrive as events too — their echo in a thread tells
 *   the intake the bot is in that thread (intake.ts), which then drops them.
 * - No conversation store (Bolt's default keeps state per conversation in memory).
 * - A listener error is logged once here, with the event id, and rethrown: processEvent rejects.
 * - Slash commands, actions, shortcuts (this app subscribes to none) are acknowledged and dropped.
 */
import { App, type Receiver } from '@slack/bolt';
import type { Logger } from 'pino';
import type { SlackIdentity } from './inbound.ts';
import { slackLogger } from './logger.ts';

/** Bolt's Web API client (@slack/web-api's WebClient). */
export type SlackWebClient = App['client'];

/** What an extended error handler gets (the last overload of App#error; Bolt's index does not export the type). */
type ErrorHandlerArgs = Parameters<Parameters<App['error']>[0]>[0];

export interface BoltAppOptions {
  readonly botToken: string;
  /** The Web API's base URL (tests point it at a local peer). @default https://slack.com/api/ */
  readonly apiUrl: string | undefined;
  readonly receiver: Receiver;
  readonly log: Logger;
  /** Who the bot is, once the channel has asked (undefined before its first listen). */
  readonly identity: () => SlackIdentity | undefined;
  /** Takes one `message` or `app_mention` event; resolves once it is journaled (or was not one to push). */
  readonly onMessage: (event: unknown) => Promise<void>;
}

export function createBoltApp(options: BoltAppOptions): App {
  const { log } = options;
  const app = new App({
    receiver: options.receiver,
    authorize: async () => {
      // Never throws: Bolt acknowledges an event whose authorization failed, and it would be lost.
      const me = options.identity();
      return { botToken: options.botToken, ...(me ? { botUserId: me.userId, teamId: me.teamId, ...(me.botId ? { botId: me.botId } : {}) } : {}) };
    },
    logger: slackLogger(log),
    ignoreSelf: false,
    convoStore: false,
    extendedErrorHandler: true,
    // No retries of its own and 429s rejected at once: the outbox retries every send durably,
    // honouring Retry-After (errors.ts) — a second retry layer here would only stack delays
    // (and repeat posts whose answer was lost).
    clientOptions: {
      ...(options.apiUrl === undefined ? {} : { slackApiUrl: options.apiUrl }),
      retryConfig: { retries: 0 },
      rejectRateLimitedCalls: true,
      timeout: 30_000,
    },
  });

  // Only events go on to listeners; whatever else carries an `ack` is answered and dropped.
  app.use(async (args) => {
    if ('ack' in args && args.ack && args.body.type !== 'event_callback') return args.ack();
    await args.next();
  });
  app.event(/^(?:message|app_mention)$/, async ({ event }) => options.onMessage(event));
  app.error(async ({ error, body, context }: ErrorHandlerArgs) => {
    const cause = 'original' in error && error.original instanceof Error ? error.original : error;
    log.warn({ err: cause, event: (body as { event_id?: unknown }).event_id, retry: context.retryNum }, 'slack event not taken; Slack will deliver it again');
    throw error;
  });
  return app;
}
