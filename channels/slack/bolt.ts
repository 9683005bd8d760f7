/**
 * Slack through Bolt's `App`: events go through `App.processEvent`, sends through `app.client`.
 *
 * Bolt acknowledges an Events API event before its listeners run — the ack it is handed is
 * called first thing in `processEvent`. Our contract is the opposite (acknowledge only once
 * the message is durably in the inbox, never when that failed, so Slack redelivers), and
 * Bolt's documented way to change how events arrive and are acknowledged is a custom
 * `Receiver`. Ours, {@link Relay}, owns no socket or port: the Socket Mode session
 * (socket.ts) and the HTTP listener (http.ts) hand it each event body, it runs it through
 * `App.processEvent` with an `ack` that only notes the request, and resolves once the App's
 * middleware — which pushes the message — has finished. The transport sends the real
 * acknowledgement (envelope ack, HTTP 200) after that, and none when it rejects.
 *
 * The App is built once per process, after one `auth.test` (with the bot's ids Bolt's
 * authorization needs no call of its own), with no conversation store (it would only keep
 * state we do not use) and without `ignoreSelf` (receive.ts already drops the bot's own
 * messages, and sees every event it is handed).
 */
import { App, LogLevel, webApi, type Receiver as BoltReceiver, type ReceiverEvent } from '@slack/bolt';
import type { Logger } from 'pino';
import { slackLogger } from './web.ts';

type WebClient = App['client'];

/** Takes one event (the `event` of an Events API body): resolves once it is in the inbox. */
export type TakeEvent = (event: unknown) => Promise<void>;

/** One retry's details as Slack sends them (envelope retry_num / X-Slack-Retry-Num). */
export interface RetryInfo {
  readonly num?: number | undefined;
  readonly reason?: string | undefined;
}

export interface SlackAppOptions {
  readonly botToken: string;
  readonly apiUrl: string | undefined;
  readonly log: Logger;
}

export interface AuthTest {
  readonly user_id?: string;
  readonly team_id?: string;
  readonly bot_id?: string;
  readonly user?: string;
}

export interface SlackApp {
  /** Bolt's Web API client, with the bot token. */
  readonly client: WebClient;
  /** What auth.test said about the bot. */
  readonly auth: AuthTest;
  /** Runs one Events API body through the App; resolves once its event was pushed, rejects when that failed. */
  dispatch(body: unknown, take: TakeEvent, retry?: RetryInfo): Promise<void>;
}

/**
 * Web API options for every client: no retries and 429s rejected at once — the outbox retries
 * every send durably, honouring Retry-After (errors.ts); a second layer would only stack
 * delays and repeat posts whose answer was lost.
 */
export function clientOptions(apiUrl: string | undefined, log: Logger) {
  return {
    ...(apiUrl === undefined ? {} : { slackApiUrl: apiUrl }),
    logger: slackLogger(log),
    retryConfig: { retries: 0 },
    rejectRateLimitedCalls: true,
    timeout: 30_000,
  };
}

/** What one dispatch carries into the App's middleware. */
interface Delivery {
  readonly take: TakeEvent;
  taken: boolean;
}

/** Bolt's extension point for event intake: it hands events to the App and never acknowledges by itself. */
class Relay implements BoltReceiver {
  #app: App | undefined;

  init(app: App): void {
    this.#app = app;
  }

  start(): Promise<void> {
    return Promise.resolve();
  }

  stop(): Promise<void> {
    return Promise.resolve();
  }

  async dispatch(body: Record<string, unknown>, take: TakeEvent, retry: RetryInfo = {}): Promise<void> {
    if (!this.#app) throw new Error('the Slack app is not initialised');
    const delivery: Delivery = { take, taken: false };
    const event: ReceiverEvent = {
      body,
      // Bolt calls this before its listeners run; the transport acknowledges after dispatch resolves.
      ack: () => Promise.resolve(),
      ...(retry.num === undefined ? {} : { retryNum: retry.num }),
      ...(retry.reason === undefined ? {} : { retryReason: retry.reason }),
      customProperties: { switchboard: delivery },
    };
    await this.#app.processEvent(event);
    // An event callback the middleware never saw (Bolt could not type or authorise it) was not
    // stored: not acknowledging it is the safe side.
    if (body.type === 'event_callback' && !delivery.taken) throw new Error('Bolt did not hand the event on');
  }
}

/** Builds the App after one auth.test (Bolt's Web API client, same options). */
export async function createSlackApp(options: SlackAppOptions): Promise<SlackApp> {
  const relay = new Relay();
  const logger = slackLogger(options.log);
  // Bolt's authorization needs the bot's ids up front (else it calls auth.test per event).
  const auth = (await new webApi.WebClient(options.botToken, clientOptions(options.apiUrl, options.log)).auth.test()) as AuthTest;
  const app = new App({
    token: options.botToken,
    ...(auth.bot_id === undefined ? {} : { botId: auth.bot_id }),
    ...(auth.user_id === undefined ? {} : { botUserId: auth.user_id }),
    tokenVerificationEnabled: false,
    receiver: relay,
    logger,
    logLevel: LogLevel.WARN,
    ignoreSelf: false,
    convoStore: false,
    clientOptions: clientOptions(options.apiUrl, options.log),
  });
  app.use(async ({ body, context }) => {
    const delivery = context.switchboard as Delivery;
    delivery.taken = true;
    const event = (body as { event?: unknown }).event;
    if (event !== undefined) await delivery.take(event);
  });
  // The transports report a failed event with what they did about it; Bolt's own error log would say it twice.
  app.error((error) => Promise.reject(error));
  return {
    client: app.client,
    auth,
    dispatch: (body, take, retry) => relay.dispatch((body ?? {}) as Record<string, unknown>, take, retry),
  };
}
