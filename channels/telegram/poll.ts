/**
 * Long polling: our own getUpdates loop, because the ack point matters. A batch's updates are
 * pushed (and so durably in the inbox) — each chat's in order, different chats side by side
 * (batch.ts) — and only then is the next batch requested with offset = last update_id + 1,
 * which is what confirms them to Telegram. A crash before that makes Telegram hand the batch
 * out again, and the inbox recognises the messages by their ids.
 */
import type { Api } from 'grammy';
import type { Update } from 'grammy/types';
import type { Logger } from 'pino';
import { pause } from '../../src/abort.ts';
import type { ListenLink } from '../../src/channel.ts';
import { whileAlive } from '../../src/listen.ts';
import { handleBatch } from './batch.ts';
import { apiFailure, describeError, grammySignal } from './errors.ts';

/** Only messages: edits are not answered again (the turn already ran on the original), channel posts are not for us. */
export const ALLOWED_UPDATES = ['message'] as const;

export interface PollState {
  /** The next offset to ask for; kept across listens so a restart does not re-read confirmed updates. */
  offset: number | undefined;
}

export interface PollOptions {
  readonly api: Api;
  readonly token: string;
  readonly timeoutSeconds: number;
  /** The Bot API server, for log lines (its root URL: never the token). */
  readonly server: string;
  readonly livenessMs: number;
  readonly log: Logger;
  readonly state: PollState;
  /** Stores the offset once a batch is handled (see offset.ts); never rejects. */
  save?(offset: number | undefined): Promise<void>;
  /** Handles one update; rejects only when it must not be confirmed (push rejected: shutdown). */
  handle(update: Update): Promise<void>;
}

/** Failed polls in a row retried here before giving up to the supervisor (which backs off further). */
const MAX_RETRIES = 5;

/**
 * A server that answers an empty getUpdates long before the `timeout` it was asked to hold
 * it for (telegram-test-api, some proxies and self-hosted Bot API servers) would make this
 * loop spin at thousands of requests a second. An empty answer sooner than this share of the
 * timeout counts as early; early answers in a row wait before the next poll, doubling from
 * EARLY_PAUSE_MS up to EARLY_PAUSE_MAX_MS — so a message is still picked up within about a
 * second, at about one request a second. A held poll or an update resets it.
 */
const EARLY_SHARE = 0.5;
const EARLY_PAUSE_MS = 50;
const EARLY_PAUSE_MAX_MS = 1000;

/** How long to wait after the `streak`-th early empty answer in a row. */
export function earlyPauseMs(streak: number): number {
  return Math.min(EARLY_PAUSE_MAX_MS, EARLY_PAUSE_MS * 2 ** Math.max(0, streak - 1));
}

/** The server's root URL as it may be logged: no user or password (a proxy's), query or fragment. */
export function loggableServer(apiRoot: string): string {
  try {
    const url = new URL(apiRoot);
    return `${url.protocol}//${url.host}${url.pathname === '/' ? '' : url.pathname}`;
  } catch {
    return '(the configured api_root)';
  }
}

/** Whether an empty answer after `elapsedMs` to a poll asking for `timeoutSeconds` came early. */
export function answeredEarly(timeoutSeconds: number, elapsedMs: number): boolean {
  return timeoutSeconds > 0 && elapsedMs < timeoutSeconds * 1000 * EARLY_SHARE;
}

export async function poll(options: PollOptions, signal: AbortSignal, link: ListenLink): Promise<void> {
  const { api, log, state } = options;
  let failures = 0;
  let early = 0;
  let warned = false;
  while (!signal.aborted) {
    let updates: Update[];
    const asked = performance.now();
    try {
      updates = await api.getUpdates(
        { ...(state.offset === undefined ? {} : { offset: state.offset }), timeout: options.timeoutSeconds, allowed_updates: [...ALLOWED_UPDATES] },
        grammySignal(signal),
      );
    } catch (error) {
      if (signal.aborted) return;
      const failure = apiFailure(error);
      const reason = describeError(error, options.token);
      // 401/404: the token is wrong; other 4xx besides 409 (another poller) and 429: a bug. The supervisor backs off.
      // eslint-disable-next-line preserve-caught-error -- grammY's error would carry the token (see describeError)
      if (failure && failure.error_code !== 409 && failure.error_code !== 429 && failure.error_code < 500) throw new Error(`getUpdates failed: ${reason}`);
      // eslint-disable-next-line preserve-caught-error -- as above
      if (++failures > MAX_RETRIES) throw new Error(`getUpdates failed ${MAX_RETRIES} times in a row: ${reason}`);
      const retryAfter = failure?.parameters?.retry_after;
      const waitMs = retryAfter !== undefined ? retryAfter * 1000 : Math.min(250 * 2 ** (failures - 1), 4000);
      log.warn({ reason, attempt: failures, retryInMs: waitMs }, 'getUpdates failed; polling again');
      if (!(await pause(waitMs, signal))) return;
      continue;
    }
    failures = 0;
    link.alive();
    if (updates.length === 0 && answeredEarly(options.timeoutSeconds, performance.now() - asked)) {
      early++;
      if (!warned) {
        warned = true;
        const answeredInMs = Math.round(performance.now() - asked);
        log.warn(
          { server: loggableServer(options.server), timeoutSeconds: options.timeoutSeconds, answeredInMs },
          'this Bot API server answers getUpdates at once instead of holding it (no long polling); polling about once a second instead of spinning',
        );
      }
      if (!(await pause(earlyPauseMs(early), signal))) return;
      continue;
    }
    early = 0;
    if (signal.aborted) return; // unconfirmed: Telegram hands them out again
    const batch = await whileAlive(link, options.livenessMs, () => handleBatch(updates, options.handle));
    // Confirmed up to the first update not handled; an update without a usable update_id cannot be confirmed by it (the next one's confirms it).
    for (const update of updates.slice(0, batch.handled)) if (Number.isSafeInteger(update.update_id)) state.offset = update.update_id + 1;
    if (batch.handled > 0) await options.save?.(state.offset);
    if (batch.failure !== undefined) throw batch.failure;
  }
}
