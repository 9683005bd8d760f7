/**
 * Long polling: our own getUpdates loop, because the ack point matters. A batch's updates are
 * handled in order, each pushed (and so durably in the inbox) before the next; only then is
 * the next batch requested with offset = last update_id + 1, which is what confirms them to
 * Telegram. A crash before that makes Telegram hand the batch out again, and the inbox
 * recognises the messages by their ids.
 */
import type { Api } from 'grammy';
import type { Update } from 'grammy/types';
import type { Logger } from 'pino';
import { pause } from '../../src/abort.ts';
import type { ListenLink } from '../../src/channel.ts';
import { whileAlive } from '../../src/listen.ts';
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
  readonly livenessMs: number;
  readonly log: Logger;
  readonly state: PollState;
  /** Handles one update; rejects only when it must not be confirmed (push rejected: shutdown). */
  handle(update: Update): Promise<void>;
}

/** Failed polls in a row retried here before giving up to the supervisor (which backs off further). */
const MAX_RETRIES = 5;

export async function poll(options: PollOptions, signal: AbortSignal, link: ListenLink): Promise<void> {
  const { api, log, state } = options;
  let failures = 0;
  while (!signal.aborted) {
    let updates: Update[];
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
    for (const update of updates) {
      if (signal.aborted) return; // unconfirmed: Telegram hands it out again
      await whileAlive(link, options.livenessMs, () => options.handle(update));
      state.offset = update.update_id + 1;
    }
  }
}
