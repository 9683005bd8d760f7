/**
 * The Slack SDK pieces under Bolt's App (bolt.ts): the logger bridge to pino, and Socket
 * Mode's client — used directly, one per connection, because each envelope must be
 * acknowledged only after Bolt's App has handled it (socket.ts), and because the connection's
 * liveness (pings, silence, Slack's refresh) is watched here.
 */
import { LogLevel, type Logger as SlackLogger } from '@slack/logger';
import { SocketModeClient } from '@slack/socket-mode';
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
