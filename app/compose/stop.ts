/**
 * How the daemon stops: the first SIGINT/SIGTERM (or Ctrl-C at the prompt, or the end of
 * `chat`'s input once every reply is out) stops gracefully, the second at once; SIGHUP reloads.
 */
import type { Logger } from '../../src/log.ts';

/** `chat` exits with this (EX_TEMPFAIL: try again later) when a message could not be answered. */
export const EXIT_UNANSWERED = 75;

export interface StopDeps {
  readonly log: Logger;
  readonly mode: 'start' | 'chat';
  /** What is running: in flight and queued turns, failed ones, and when all are done. */
  readonly runtime: {
    health(): { readonly inFlight: number; readonly queued: number; readonly counters: { readonly failed: number } };
    idle(): Promise<void>;
  };
  /** SIGHUP = reload the config (`switchboard reload`); `chat` keeps the default (hang up). */
  readonly reload?: () => unknown;
  /** Called first on a stop (the ready announcement stops waiting). */
  readonly onStopping: () => void;
  /** Stops what runs, in order; errors are logged. */
  readonly shutdown: () => Promise<unknown>;
  /** Closes what is left (files, the database, the lock), after shutdown, whatever happened. */
  readonly release: () => void;
}

export interface Stopper {
  /** The exit code, once stopped. */
  readonly stopped: Promise<number>;
  /** Ctrl-C at the terminal's prompt; returns what to tell the person. */
  interrupt(): string | undefined;
  /** `chat`'s input ended: stop once every reply is out; returns what to tell the person. */
  finish(): string | undefined;
}

export function handleStop(deps: StopDeps): Stopper {
  const { log, runtime } = deps;
  let stopping = false;
  let resolveExit!: (code: number) => void;
  const stopped = new Promise<number>((resolve) => (resolveExit = resolve));
  const stop = (reason: string, code: number): void => {
    if (stopping) return;
    stopping = true;
    deps.onStopping();
    log.info({ reason }, 'stopping');
    void deps
      .shutdown()
      .catch((error: unknown) => log.error({ err: error }, 'error while stopping'))
      .finally(() => {
        // `chat` tells a script whether every message got an answer.
        const unanswered = deps.mode === 'chat' && runtime.health().counters.failed > 0;
        deps.release();
        resolveExit(code === 0 && unanswered ? EXIT_UNANSWERED : code);
      });
  };
  /** The first SIGINT/SIGTERM (or Ctrl-C at the prompt) stops gracefully, the second at once; returns what to tell a person. */
  const onStop = (signal: NodeJS.Signals): string | undefined => {
    if (stopping) {
      log.warn({ signal }, 'second signal: exiting now');
      process.exit(130);
    }
    const { inFlight } = runtime.health();
    stop(signal, 0);
    if (inFlight === 0) return undefined;
    return `stopping: finishing ${inFlight === 1 ? 'the reply' : `the ${inFlight} replies`} in progress — Ctrl-C again to quit now`;
  };
  const onSignal = (signal: NodeJS.Signals): void => {
    const note = onStop(signal);
    // The log may not show (chat logs errors only): a person at a terminal is told directly.
    if (note !== undefined && process.stderr.isTTY) process.stderr.write(`\n${note}\n`);
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  const reload = deps.reload;
  if (reload) process.on('SIGHUP', () => void (stopping ? undefined : reload()));
  return {
    stopped,
    interrupt: () => onStop('SIGINT'),
    finish: () => {
      const { inFlight, queued } = runtime.health();
      void runtime.idle().then(() => stop('input ended', 0));
      const waiting = inFlight + queued;
      if (waiting === 0) return undefined;
      return `waiting for ${waiting === 1 ? 'the reply' : `${waiting} replies`} still to come — Ctrl-C to stop now`;
    },
  };
}
