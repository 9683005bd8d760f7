/**
 * The Slack SDK pieces this channel uses, and why not Bolt's App:
 *
 * Bolt acknowledges every Events API event *before* its listeners run ("Events API requests
 * are acknowledged right away", App.processEvent), in Socket Mode and over HTTP alike. Our
 * contract is the opposite: acknowledge only after the message is durably in the inbox
 * (`await push(…)` resolved), and not at all when push rejects, so Slack redelivers. So we use
 * the building blocks Bolt itself is made of: @slack/socket-mode's SocketModeClient (every
 * envelope comes with an explicit `ack()`), @slack/web-api's WebClient, and for HTTP events a
 * plain node:http listener that verifies signatures itself (http.ts).
 */
import { LogLevel, type Logger as SlackLogger } from '@slack/logger';
import { SocketModeClient } from '@slack/socket-mode';
import { WebClient } from '@slack/web-api';
import type { Logger } from 'pino';

/**
 * What the Slack SDK logs goes to pino (its debug and info one level lower: the SDK is
 * chatty). With `onProblem`, its warnings and errors go to debug and to `onProblem` instead:
 * the caller reports them with what it did about them.
 */
export function slackLogger(log: Logger, onProblem?: (text: string) => void): SlackLogger {
  const text = (parts: unknown[]): string => parts.map((part) => (typeof part === 'string' ? part : part instanceof Error ? part.message : JSON.stringify(part))).join(' ');
  const problem = (level: 'warn' | 'error') => (...parts: unknown[]) => {
    if (!onProblem) return log[level](text(parts));
    log.debug(text(parts));
    onProblem(text(parts));
  };
  return {
    debug: (...parts: unknown[]) => log.trace(text(parts)),
    info: (...parts: unknown[]) => log.debug(text(parts)),
    warn: problem('warn'),
    error: problem('error'),
    setLevel: () => undefined,
    setName: () => undefined,
    getLevel: () => (log.isLevelEnabled('trace') ? LogLevel.DEBUG : log.isLevelEnabled('debug') ? LogLevel.INFO : LogLevel.WARN),
  };
}

/**
 * The bot's Web API client. No retries of its own and 429s rejected at once: the outbox
 * retries every send durably, honouring Retry-After (see errors.ts) — a second retry layer
 * here would only stack delays (and repeat posts whose answer was lost).
 */
export function botClient(token: string, apiUrl: string | undefined, log: Logger): WebClient {
  return new WebClient(token, {
    ...(apiUrl === undefined ? {} : { slackApiUrl: apiUrl }),
    logger: slackLogger(log),
    retryConfig: { retries: 0 },
    rejectRateLimitedCalls: true,
    timeout: 30_000,
  });
}

/** The parts of SocketModeClient (@slack/socket-mode 3) this channel uses. */
export interface SocketModeClientLike {
  start(): Promise<unknown>;
  disconnect(): Promise<void>;
  on(event: string, listener: (...args: never[]) => void): unknown;
  off(event: string, listener: (...args: never[]) => void): unknown;
  /** The current socket wrapper; its `disconnect()` during a close handshake forces the socket shut. */
  readonly websocket?: { disconnect(): void; readonly websocket?: unknown } | undefined;
}

export interface SocketModeClientOptions {
  readonly appToken: string;
  readonly logger: SlackLogger;
  readonly autoReconnectEnabled: boolean;
  readonly clientPingTimeout: number;
  readonly serverPingTimeout: number;
  readonly clientOptions: { readonly slackApiUrl?: string; readonly retryConfig: { readonly retries: number } };
}

/** A Socket Mode client (Socket Mode only). */
export function socketModeClient(options: SocketModeClientOptions): SocketModeClientLike {
  return new SocketModeClient(options) as unknown as SocketModeClientLike;
}
