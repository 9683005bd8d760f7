/**
 * Bot API failures → SendError: 429 carries retry_after, errors retrying cannot fix are
 * permanent (bot blocked or kicked, chat or message gone, any other 400 that is not a markup
 * problem — that one is handled by resending as plain text first).
 */
import { GrammyError, HttpError, type Api } from 'grammy';
import { SendError } from '../../src/channel.ts';

/** The part of a Bot API error the mapping needs (GrammyError has it). */
export interface ApiFailure {
  readonly error_code: number;
  readonly description: string;
  readonly parameters?: { readonly retry_after?: number; readonly migrate_to_chat_id?: number };
}

export function apiFailure(error: unknown): ApiFailure | undefined {
  if (error instanceof GrammyError) return error;
  return undefined;
}

/** The supergroup a group was upgraded to, when a write to the group's old id was refused for that (400 with migrate_to_chat_id). */
export function migratedTo(error: unknown): number | undefined {
  const failure = apiFailure(error);
  return failure?.error_code === 400 ? failure.parameters?.migrate_to_chat_id : undefined;
}

/** Telegram rejected the HTML (resend as plain text). */
export function isMarkupError(error: unknown): boolean {
  const failure = apiFailure(error);
  return failure?.error_code === 400 && /can't parse entities|unsupported start tag|can't find end tag/i.test(failure.description);
}

/** An edit that changed nothing: not an error. */
export function isNotModified(error: unknown): boolean {
  const failure = apiFailure(error);
  return failure?.error_code === 400 && /message is not modified/i.test(failure.description);
}

/**
 * A loggable description of a failure, with the token blanked out. Never log grammY's errors
 * themselves: an HttpError carries node-fetch's error, whose message holds the request URL
 * (and so the token); a GrammyError carries the request payload (people's messages).
 */
export function describeError(error: unknown, token: string): string {
  const redact = (text: string): string => (token === '' ? text : text.split(token).join('<token>'));
  const failure = apiFailure(error);
  if (failure) return `${failure.error_code} ${failure.description}`;
  if (error instanceof HttpError) {
    const inner = error.error instanceof Error ? `: ${withCause(error.error)}` : '';
    return redact(`${error.message}${inner}`);
  }
  return redact(error instanceof Error ? error.message : String(error));
}

/** fetch's "fetch failed" says nothing by itself: the system error (ECONNREFUSED, socket hang up) is its cause. */
function withCause(error: Error): string {
  return error.cause instanceof Error ? `${error.message}: ${error.cause.message}` : error.message;
}

/** The SendError for a failed Bot API call (`what`, e.g. "sendMessage"). No cause attached: see {@link describeError}. */
export function toSendError(error: unknown, what: string, token: string): SendError {
  if (error instanceof SendError) return error;
  const message = `${what} failed: ${describeError(error, token)}`;
  const failure = apiFailure(error);
  if (!failure) return new SendError(message); // network failures, timeouts: try again
  if (failure.error_code === 429) {
    const seconds = failure.parameters?.retry_after;
    return new SendError(message, { retryAfterMs: seconds !== undefined && seconds >= 0 ? seconds * 1000 : 1000 });
  }
  // 403: blocked by the user, kicked from the group, no right to post. 400: chat not found,
  // thread gone, text empty or too long, group migrated… — the same request would fail again.
  if (failure.error_code === 403 || failure.error_code === 400) return new SendError(message, { permanent: true });
  // 401/404 (token revoked or wrong: fixable by the operator), 409, 5xx: keep the reply pending.
  return new SendError(message);
}

/** grammY types its signals with the abort-controller polyfill's class; Node's AbortSignal works the same. */
export const grammySignal = (signal: AbortSignal): NonNullable<Parameters<Api['getMe']>[0]> => signal as unknown as NonNullable<Parameters<Api['getMe']>[0]>;
