/**
 * Socket Mode: one SocketModeClient per connection, reconnected here until the listen's
 * signal aborts.
 *
 * - Ack: an events_api envelope's body goes through Bolt's App (bolt.ts: `App.processEvent`
 *   via our Receiver) and is acknowledged only once that resolved — the push is done and the
 *   message in the inbox; when it rejects (shutdown) it is left unacknowledged and Slack
 *   redelivers it on a later connection, where the inbox recognises it.
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
import type { Logger } from 'pino';
import { pause } from '../../src/abort.ts';
import type { ListenLink } from '../../src/channel.ts';
import type { SlackApp, TakeEvent } from './bolt.ts';
import { platformError } from './errors.ts';
import { slackLogger, socketModeClient, type SocketModeClientLike } from './web.ts';

export interface SocketModeOptions {
  readonly appToken: string;
  readonly apiUrl: string | undefined;
  /** Runs an envelope's body through Bolt's App (bolt.ts). */
  readonly dispatch: SlackApp['dispatch'];
  /** Pushes the event (into the inbox); given to dispatch. */
  readonly take: TakeEvent;
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

export async function runSocketMode(options: SocketModeOptions, signal: AbortSignal, link: ListenLink): Promise<void> {
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
      outcome = await session(options, signal, sessionLink);
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

interface Envelope {
  ack(response?: Record<string, unknown>): Promise<void>;
  readonly type: string;
  readonly envelope_id: string;
  readonly body?: { readonly event?: unknown; readonly event_id?: string };
  readonly retry_num?: number;
  readonly retry_reason?: string;
}

/** One connection, from apps.connections.open until it closes. */
async function session(options: SocketModeOptions, signal: AbortSignal, link: ListenLink): Promise<SessionEnd> {
  const { log } = options;
  const silenceMs = options.silenceMs ?? 12_000;
  let detail: string | undefined;
  const client: SocketModeClientLike = socketModeClient({
    appToken: options.appToken,
    logger: slackLogger(log, (text) => (detail ??= text)),
    autoReconnectEnabled: false,
    clientPingTimeout: options.clientPingTimeoutMs ?? 5000,
    serverPingTimeout: options.serverPingTimeoutMs ?? 30_000,
    clientOptions: { ...(options.apiUrl === undefined ? {} : { slackApiUrl: options.apiUrl }), retryConfig: { retries: 0 } },
  });

  let lastLife = Date.now();
  let refresh = false;
  let connectedAt: number | undefined;
  const life = (): void => {
    lastLife = Date.now();
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
    if (envelope.type === 'events_api') {
      try {
        await options.dispatch(envelope.body, options.take, { num: envelope.retry_num, reason: envelope.retry_reason });
      } catch (error) {
        log.warn({ err: error, envelope: envelope.envelope_id, event: envelope.body?.event_id, retry: envelope.retry_num }, 'slack event not acknowledged; Slack will deliver it again');
        return;
      }
    }
    // Other envelope types (slash commands, interactivity) are not used: acknowledged so Slack stops resending.
    try {
      await envelope.ack();
    } catch (error) {
      log.debug({ err: error, envelope: envelope.envelope_id }, 'slack ack not sent (the socket closed); Slack will deliver the event again');
    }
  };

  let resolveEnd!: (end: SessionEnd) => void;
  const ended = new Promise<SessionEnd>((resolve) => (resolveEnd = resolve));
  const settle = (end: Omit<SessionEnd, 'upMs'>): void =>
    resolveEnd({ ...end, upMs: connectedAt === undefined ? 0 : Date.now() - connectedAt, ...(detail === undefined ? {} : { detail }) });
  const onDisconnected = (): void => settle({ reason: refresh ? 'refresh' : 'closed' });
  const onAbort = (): void => settle({ reason: 'aborted' });
  const watchdog = setInterval(() => {
    if (Date.now() - lastLife > silenceMs) settle({ reason: 'silent' });
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
        connectedAt = lastLife = Date.now();
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
