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
  /** Also gets every line as written to the log (JSON, secrets already redacted): the console's live tail. */
  readonly tap?: LogTail;
}

/** One log line as the console shows it. */
export interface TailLine {
  readonly seq: number;
  readonly level: number;
  readonly time: number;
  readonly msg: string;
  readonly channel?: string;
  /** The whole line (JSON, redacted). */
  readonly line: string;
}

/**
 * The last `max` log lines in memory, and who listens for new ones (the web console's Logs
 * page). Lines arrive already serialized and redacted by pino; a listener must not throw.
 */
export interface LogTail {
  write(line: string): void;
  lines(): TailLine[];
  subscribe(listener: (line: TailLine) => void): () => void;
}

export function createLogTail(max = 500): LogTail {
  // A line is parsed when it is read (the console's Logs page) or someone listens (its live
  // tail), once: a daemon whose console nobody watches parses none of its lines.
  const kept: Array<{ readonly seq: number; readonly text: string; readonly at: number; entry?: TailLine }> = [];
  const listeners = new Set<(line: TailLine) => void>();
  let seq = 0;
  const entryOf = (item: (typeof kept)[number]): TailLine => (item.entry ??= parseTailLine(item.seq, item.text, item.at));
  return {
    write(chunk) {
      for (const text of chunk.split('\n')) {
        if (text.trim() === '') continue;
        const item = { seq: ++seq, text, at: Date.now() };
        kept.push(item);
        if (kept.length > max) kept.shift();
        if (listeners.size === 0) continue;
        const entry = entryOf(item);
        for (const listener of listeners) listener(entry);
      }
    },
    lines: () => kept.map(entryOf),
    subscribe(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
  };
}

/** One written line as the console shows it; `at` (when it was written) stands in for a time the line lacks. */
function parseTailLine(seq: number, text: string, at: number): TailLine {
  let parsed: { level?: unknown; time?: unknown; msg?: unknown; channel?: unknown } = {};
  try {
    parsed = JSON.parse(text) as typeof parsed;
  } catch {
    // not JSON: kept as the message
  }
  return {
    seq,
    level: typeof parsed.level === 'number' ? parsed.level : 30,
    time: typeof parsed.time === 'number' ? parsed.time : at,
    msg: typeof parsed.msg === 'string' ? parsed.msg : text,
    ...(typeof parsed.channel === 'string' ? { channel: parsed.channel } : {}),
    line: text,
  };
}

/** Sends what the logger writes to `main` and, as JSON, to the tail. */
function withTap(main: DestinationStream, tap: LogTail | undefined): DestinationStream {
  if (!tap) return main;
  return pino.multistream([
    { level: 'trace', stream: main },
    { level: 'trace', stream: { write: (line: string) => tap.write(line) } },
  ]);
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
    return primitivesAsThey(pino(base, withTap(destination, options.tap)));
  }
  // pino-pretty is loaded only for a human at a terminal; daemons never pay for it.
  const require = createRequire(import.meta.url);
  const pinoPretty = require('pino-pretty') as (options: Record<string, unknown>) => DestinationStream;
  return primitivesAsThey(pino(base, withTap(pinoPretty({ destination: stream, sync: true, colorize: stream.isTTY === true, ignore: 'pid,hostname', translateTime: 'HH:MM:ss.l', singleLine: options.singleLine === true, ...(options.singleLine ? { errorLikeObjectKeys: ['err'] } : {}) }), options.tap)));
}

type Stringify = (value: unknown, safe?: unknown) => string | undefined;

/**
 * pino runs its wildcard redactor (the `*.…` paths) on every value of every line and of every
 * child's bindings, a string or a number too, where there is nothing to redact; @pinojs/redact
 * parses its 24 paths character by character on each call: ~30 % of the bytes the daemon
 * allocated per webhook message (a turn's child logger and its "turn done" line). A string,
 * number or boolean is written as the redactor would end up writing it (JSON.stringify);
 * objects still go through it. Children share their root's stringifiers (unless given a
 * `redact` of their own, which nothing here does).
 */
function primitivesAsThey(logger: Logger): Logger {
  const stringifiers = (logger as unknown as Record<symbol, Record<symbol, Stringify | undefined> | undefined>)[pino.symbols.stringifiersSym];
  const redacting = stringifiers?.[pino.symbols.wildcardFirstSym];
  if (stringifiers === undefined || redacting === undefined) return logger;
  stringifiers[pino.symbols.wildcardFirstSym] = (value, safe) =>
    typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean' ? JSON.stringify(value) : redacting(value, safe);
  return logger;
}
