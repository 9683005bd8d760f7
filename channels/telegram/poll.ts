/**
 * Long polling: our own getUpdates loop, because the ack point matters. A batch's updates are
 * each pushed (and so durably in the inbox) before the next batch is requested with offset =
 * last update_id + 1, which is what confirms them to Telegram. A crash before that makes Telegram
 * hand the batch out again, and the inbox recognises the messages by their ids. Within a batch,
 * a chat's updates are handled in order and chats side by side (see {@link handleBatch}).
 */
import type { Api } from 'grammy';
import type { Update } from 'grammy/types';
import type { Logger } from 'pino';
import { pause } from '../../src/abort.ts';
import type { ListenLink } from '../../src/channel.ts';
import { whileAlive } from '../../src/listen.ts';
import { apiFailure, describeError, grammySignal } from './errors.ts';
import { messageOf } from './inbound.ts';

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
    const { handled, failure } = await handleBatch(updates, options, link, signal);
    // an update without a usable update_id cannot be confirmed by it (the next one's confirms it)
    for (const update of updates.slice(0, handled)) if (Number.isSafeInteger(update.update_id)) state.offset = update.update_id + 1;
    if (failure) throw failure.error;
    if (signal.aborted) return; // what was not handled is unconfirmed: Telegram hands it out again
    if (updates.length > 0) await options.save?.(state.offset);
  }
}

/** The chat an update belongs to ('' when it has no message, or a malformed one: handle() skips those). */
function chatOf(update: Update): { readonly chat: string; readonly moves: boolean } {
  try {
    const message = messageOf(update);
    const moves = typeof message?.migrate_to_chat_id === 'number' || typeof message?.migrate_from_chat_id === 'number';
    return { chat: String((message?.chat as { id?: unknown } | undefined)?.id ?? ''), moves };
  } catch {
    return { chat: '', moves: false };
  }
}

/**
 * Handles a batch: a chat's updates in order, each after the one before it was pushed, and chats
 * side by side — one after another, each push's transaction (on PostgreSQL a few round trips) held
 * up every chat behind it, and a busy bot's batch of 100 took the holder ~0.5 s to store. A group's
 * move to a supergroup is handled alone, after every update before it and before every update
 * after it (the supergroup's messages look the move up). A chat stops at its first failure
 * (a later message must not go in before an earlier one). Returns how many updates from the
 * start were all handled (what may be confirmed) and the first failure in batch order.
 */
async function handleBatch(
  updates: readonly Update[],
  options: PollOptions,
  link: ListenLink,
  signal: AbortSignal,
): Promise<{ handled: number; failure: { readonly error: unknown } | undefined }> {
  const outcomes: Array<Promise<boolean>> = [];
  let chains = new Map<string, Promise<boolean>>();
  /** The last move's outcome: what comes after it waits for it, and is not handled when it failed. */
  let barrier: Promise<boolean> = Promise.resolve(true);
  const handle = async (update: Update): Promise<boolean> => {
    if (signal.aborted) return false; // unconfirmed: Telegram hands it out again
    await whileAlive(link, options.livenessMs, () => options.handle(update));
    return true;
  };
  for (const update of updates) {
    const { chat, moves } = chatOf(update);
    let outcome: Promise<boolean>;
    if (moves) {
      outcome = Promise.allSettled(outcomes).then(() => handle(update));
      barrier = outcome;
      chains = new Map();
    } else {
      const before = chains.get(chat);
      // after the chat's previous update, and only if that one went in
      outcome = (before ?? barrier).then((went) => (went ? handle(update) : false));
      chains.set(chat, outcome);
    }
    outcomes.push(outcome);
  }
  const settled = await Promise.allSettled(outcomes);
  const firstFailed = settled.findIndex((result) => result.status === 'rejected');
  const failure = firstFailed === -1 ? undefined : { error: (settled[firstFailed] as PromiseRejectedResult).reason };
  const notHandled = settled.findIndex((result) => result.status === 'rejected' || !result.value);
  return { handled: notHandled === -1 ? updates.length : notHandled, failure };
}
