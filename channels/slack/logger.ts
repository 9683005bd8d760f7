/**
 * Bolt's logging (App, receivers, WebClient, SocketModeClient — all take @slack/logger's
 * Logger) routed to pino. Every Slack SDK object is given one of these: left without, each
 * would make its own ConsoleLogger and write to the console.
 */
import { LogLevel, type Logger as SlackLogger } from '@slack/bolt';
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
