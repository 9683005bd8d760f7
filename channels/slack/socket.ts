/**
 * Socket Mode as a Bolt Receiver (Bolt's extension point for transports): one
 * SocketModeClient per connection, reconnected here until the listen's signal aborts.
 *
 * Why not Bolt's own SocketModeReceiver: it hands processEvent an `ack` that answers Slack at
 * once, and processEvent calls it before the listeners run — a message would be acknowledged
 * before it is stored anywhere, and lost if the process died then. Here that `ack` only
 * records the answer; the envelope is acknowledged after `await app.processEvent(…)`
 * resolved, i.e. after the listener journaled the raw event (intake.ts; the push follows).
 * When processEvent rejects (the journal could not be written, too many events waiting) the
 * envelope is left unacknowledged and the connection is replaced: Slack redelivers it on the
 * next one, where the intake and the inbox recognise it. Envelopes that are not events (slash commands,
 * interactivity: not used) are acknowledged the same way, so Slack stops resending them.
 *
 * - Liveness: every frame (hello, envelopes), every server ping and every pong to the
 *   client's own pings (sent every clientPingTimeout / 3) counts as life and calls
 *   `link.alive()`. The client drops a connection whose pongs stop (clientPingTimeout) or
 *   whose server pings stop (serverPingTimeout); should even its close handshake hang, our
 *   own watchdog abandons the connection after `silenceMs` without life.
 * - `{type: "disconnect"}` (Slack recycling the connection): reconnect at once. Any other
 *   loss: reconnect after a short backoff (250 ms doubling to 30 s). Auth failures of
 *   apps.connections.open are thrown: the supervisor restarts us with its own backoff.
 */
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import type { App, Receiver, ReceiverEvent } from '@slack/bolt';
import { SocketModeClient } from '@slack/socket-mode';
import type { Logger } from 'pino';
import { pause } from '../../src/abort.ts';
import type { ListenLink } from '../../src/channel.ts';
import { platformError } from './errors.ts';
import { slackLogger } from './logger.ts';

export interface SocketReceiverOptions {
  readonly appToken: string;
  readonly apiUrl: string | undefined;
  readonly log: Logger;
  /** @default 5000 */
  readonly clientPingTimeoutMs?: number;
  /** @default 30000 */
  readonly serverPingTimeoutMs?: number;
  /** @default 12000 */
  readonly silenceMs?: number;
}

/** Connection-level failures the supervisor should see (retrying at once cannot help). */
const fatal = new Set(['invalid_auth', 'not_authed', 'account_inactive', 'token_revoked', 'not_allowed_token_type', 'missing_scope']);

/** Bolt Receiver for Socket Mode that acknowledges an envelope only once App.processEvent resolved. */
export class SocketReceiver implements Receiver {
  readonly #options: SocketReceiverOptions;
  #app: App | undefined;
  #stop: AbortController | undefined;

  constructor(options: SocketReceiverOptions) {
    this.#options = options;
  }

  /** Called by the App's constructor. */
  init(app: App): void {
    this.#app = app;
  }

  /**
   * Connects, and reconnects, until `signal` aborts or `stop()` is called; resolves then.
   * Rejects when Slack refuses the app token (the supervisor retries with its backoff).
   */
  async start(signal: AbortSignal, link: ListenLink): Promise<void> {
    const app = this.#app;
    if (!app) throw new Error('SocketReceiver.start before App init');
    const stop = new AbortController();
    this.#stop = stop;
    try {
      await runSocketMode(this.#options, app, AbortSignal.any([signal, stop.signal]), link);
    } finally {
      if (this.#stop === stop) this.#stop = undefined;
    }
  }

  async stop(): Promise<void> {
    this.#stop?.abort();
  }
}

async function runSocketMode(options: SocketReceiverOptions, app: App, signal: AbortSignal, link: ListenLink): Promise<void> {
  // ready() once per listen, however often we reconnect inside it.
  let ready = false;
  const sessionLink: ListenLink = {
    ready: () => {
      if (!ready) link.ready();
      ready = true;
    },
    alive: () => link.alive(),
    deaf: (reason) => link.deaf(reason),
  };
  let failures = 0;
  while (!signal.aborted) {
    let outcome: SessionEnd;
    try {
      outcome = await session(options, app, signal, sessionLink);
    } catch (error) {
      const code = platformError(error);
      if (code !== undefined && fatal.has(code)) throw error;
      outcome = { reason: 'failed', upMs: 0, error };
    }
    if (signal.aborted) break;
    // A connection that held for a while starts the backoff afresh; one dropped at once does not.
    if (outcome.upMs >= 10_000) failures = 0;
    const delay = outcome.reason === 'refresh' ? 0 : Math.min(30_000, 250 * 2 ** failures++);
    options.log[outcome.reason === 'refresh' ? 'debug' : 'warn'](
      {
        reason: outcome.reason,
        reconnectInMs: delay,
        ...(outcome.detail === undefined ? {} : { detail: outcome.detail }),
        ...(outcome.error === undefined ? {} : { err: outcome.error }),
      },
      'slack socket closed; reconnecting',
    );
    await pause(delay, signal);
  }
}

interface SessionEnd {
  readonly reason: 'refresh' | 'closed' | 'silent' | 'failed' | 'aborted';
  /** How long the connection was up (since Slack's hello); 0 when it never was. */
  readonly upMs: number;
  readonly error?: unknown;
  /** The SDK's last complaint (a pong that never came, a socket error…). */
  readonly detail?: string;
}

/** What SocketModeClient emits as `slack_event` (@slack/socket-mode 3). */
interface Envelope {
  ack(response?: unknown): Promise<void>;
  readonly type: string;
  readonly envelope_id: string;
  readonly body?: Record<string, unknown>;
  readonly retry_num?: number;
  readonly retry_reason?: string;
}

/** One connection, from apps.connections.open until it closes. */
async function session(options: SocketReceiverOptions, app: App, signal: AbortSignal, link: ListenLink): Promise<SessionEnd> {
  const { log } = options;
  const silenceMs = options.silenceMs ?? 12_000;
  let detail: string | undefined;
  const client = new SocketModeClient({
    appToken: options.appToken,
    logger: slackLogger(log, (text) => (detail ??= text)),
    autoReconnectEnabled: false,
    clientPingTimeout: options.clientPingTimeoutMs ?? 5000,
    serverPingTimeout: options.serverPingTimeoutMs ?? 30_000,
    clientOptions: { ...(options.apiUrl === undefined ? {} : { slackApiUrl: options.apiUrl }), retryConfig: { retries: 0 } },
  }) as unknown as SocketModeClientLike;

  // Monotonic: a wall clock step forward must not look like a silent socket.
  let lastLife = performance.now();
  let refresh = false;
  let connectedAt: number | undefined;
  const life = (): void => {
    lastLife = performance.now();
    if (connectedAt !== undefined) link.alive();
  };
  const onFrame = (data: string | ArrayBuffer): void => {
    life();
    if (typeof data === 'string' && data.includes('"disconnect"')) {
      try {
        if ((JSON.parse(data) as { type?: unknown }).type === 'disconnect') refresh = true;
      } catch {
        // not JSON: the client ignores it too
      }
    }
  };
  // undici reports ping and pong frames of every WebSocket in the process: keep this socket's.
  const onPingPong = (message: unknown): void => {
    const socket = client.websocket?.websocket;
    if (socket === undefined || (message as { websocket?: unknown } | null)?.websocket === socket) life();
  };
  const onEnvelope = (envelope: Envelope): void => void acknowledge(envelope);
  const acknowledge = async (envelope: Envelope): Promise<void> => {
    life();
    // What a listener acknowledged with (Bolt calls this before its listeners run): sent below, once processEvent resolved.
    let answer: unknown;
    const event: ReceiverEvent = {
      body: envelope.body ?? {},
      ack: async (response?: unknown) => void (answer = response),
      ...(envelope.retry_num === undefined ? {} : { retryNum: envelope.retry_num }),
      ...(envelope.retry_reason ? { retryReason: envelope.retry_reason } : {}),
    };
    try {
      await app.processEvent(event);
    } catch (error) {
      // app.ts logged why (with the event id). Slack retries an event it got no ack for, but on
      // its own schedule (the Events API's: at once, after 1 and 5 minutes); the envelope left
      // unacknowledged is handed out again on the next connection, so an event refused while the
      // store failed (a full disk, a lock) is tried again within a reconnect, not minutes later.
      log.debug({ envelope: envelope.envelope_id }, 'slack envelope not acknowledged; reconnecting so Slack delivers it again');
      settle({ reason: 'failed', error });
      return;
    }
    try {
      await envelope.ack(answer);
    } catch (error) {
      log.debug({ err: error, envelope: envelope.envelope_id }, 'slack ack not sent (the socket closed); Slack will deliver the event again');
    }
  };

  let resolveEnd!: (end: SessionEnd) => void;
  const ended = new Promise<SessionEnd>((resolve) => (resolveEnd = resolve));
  const settle = (end: Omit<SessionEnd, 'upMs'>): void =>
    resolveEnd({ ...end, upMs: connectedAt === undefined ? 0 : performance.now() - connectedAt, ...(detail === undefined ? {} : { detail }) });
  const onDisconnected = (): void => settle({ reason: refresh ? 'refresh' : 'closed' });
  const onAbort = (): void => settle({ reason: 'aborted' });
  const watchdog = setInterval(() => {
    if (performance.now() - lastLife > silenceMs) settle({ reason: 'silent' });
  }, Math.min(1000, silenceMs / 4));
  watchdog.unref();

  client.on('ws_message', onFrame);
  client.on('slack_event', onEnvelope);
  client.on('disconnected', onDisconnected);
  subscribe('undici:websocket:ping', onPingPong);
  subscribe('undici:websocket:pong', onPingPong);
  signal.addEventListener('abort', onAbort, { once: true });
  if (signal.aborted) onAbort();
  let finished = false;
  try {
    client.start().then(
      () => {
        // A connection that completes after the session ended (aborted while connecting) is closed again.
        if (finished) return void close(client);
        connectedAt = lastLife = performance.now();
        link.ready();
        link.alive();
      },
      (error: unknown) => settle({ reason: 'failed', error }),
    );
    const end = await ended;
    const code = end.reason === 'failed' ? platformError(end.error) : undefined;
    if (code !== undefined && fatal.has(code)) throw end.error;
    return end;
  } finally {
    finished = true;
    clearInterval(watchdog);
    signal.removeEventListener('abort', onAbort);
    unsubscribe('undici:websocket:ping', onPingPong);
    unsubscribe('undici:websocket:pong', onPingPong);
    client.off('ws_message', onFrame);
    client.off('slack_event', onEnvelope);
    client.off('disconnected', onDisconnected);
    await close(client);
  }
}

/** Closes a client: a close handshake, forced shut if the other side does not answer within a second. */
async function close(client: SocketModeClientLike): Promise<void> {
  const closed = client.disconnect().catch(() => undefined);
  const timer = new Promise<'timeout'>((resolve) => setTimeout(() => resolve('timeout'), 1000).unref());
  if ((await Promise.race([closed, timer])) === 'timeout') {
    // A second disconnect during the close handshake makes the SDK destroy the socket.
    try {
      client.websocket?.disconnect();
    } catch {
      // already gone
    }
  }
}

/** The parts of SocketModeClient (@slack/socket-mode 3) this receiver uses. */
interface SocketModeClientLike {
  start(): Promise<unknown>;
  disconnect(): Promise<void>;
  on(event: string, listener: (...args: never[]) => void): unknown;
  off(event: string, listener: (...args: never[]) => void): unknown;
  /** The current socket wrapper; its `disconnect()` during a close handshake forces the socket shut. */
  readonly websocket?: { disconnect(): void; readonly websocket?: unknown } | undefined;
}
