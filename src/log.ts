/**
 * pino logger: JSON lines for journald/Docker, pretty when writing to a terminal, secrets
 * redacted wherever they appear under a known key.
 */
import type { Writable } from 'node:stream';
import { createRequire } from 'node:module';
import { pino, type Logger, type LevelWithSilent, type DestinationStream } from 'pino';

export type { Logger };

const secretKeys = ['api_key', 'apiKey', 'token', 'password', 'secret', 'authorization', 'access_token', 'cookie'];

/** Paths pino censors, at the top level and up to three levels deep. */
export const redactPaths: string[] = secretKeys.flatMap((key) => [key, `*.${key}`, `*.*.${key}`, `*.*.*.${key}`]);

export interface LoggerOptions {
  readonly level: LevelWithSilent;
  /** `auto` = pretty when `stream` is a TTY. */
  readonly format: 'auto' | 'json' | 'pretty';
  /** Where lines go. @default process.stdout */
  readonly stream?: Writable & { isTTY?: boolean; fd?: number };
  /** Pretty format only: each entry on one line, its fields inline (beside a conversation). @default false */
  readonly singleLine?: boolean;
}

export function createLogger(options: LoggerOptions): Logger {
  const stream = options.stream ?? process.stdout;
  const pretty = options.format === 'pretty' || (options.format === 'auto' && stream.isTTY === true);
  const base = {
    level: options.level,
    base: { pid: process.pid },
    redact: { paths: redactPaths, censor: '[redacted]' },
    serializers: { err: pino.stdSerializers.err },
  };
  if (!pretty) {
    const destination: DestinationStream =
      typeof stream.fd === 'number' ? pino.destination({ fd: stream.fd, sync: true }) : (stream as DestinationStream);
    return pino(base, destination);
  }
  // pino-pretty is loaded only for a human at a terminal; daemons never pay for it.
  const require = createRequire(import.meta.url);
  const pinoPretty = require('pino-pretty') as (options: Record<string, unknown>) => DestinationStream;
  return pino(base, pinoPretty({ destination: stream, sync: true, colorize: stream.isTTY === true, ignore: 'pid,hostname', translateTime: 'HH:MM:ss.l', singleLine: options.singleLine === true, ...(options.singleLine ? { errorLikeObjectKeys: ['err'] } : {}) }));
}
