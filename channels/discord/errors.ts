/**
 * Discord REST failures → SendError. @discordjs/rest waits out short rate limits by itself;
 * longer ones reject (RateLimitError) so the outbox schedules the retry. A 429 that still
 * comes through as an API error carries `retry_after` (seconds).
 *
 * What a wait covers (discord/discord-api-docs, developers/topics/rate-limits.mdx): a route
 * bucket counts per top-level resource — the channel — so it holds that chat ('chat'); the
 * global limit (`global: true`, X-RateLimit-Global) counts every request of the bot, so it
 * holds the whole channel ('channel').
 */
import { DiscordAPIError, HTTPError, RateLimitError } from 'discord.js';
import { SendError } from '../../src/channel.ts';

/** Bad request (not a markup problem: Discord takes any text), no access, no such channel, too large. */
const PERMANENT_STATUSES: ReadonlySet<number> = new Set([400, 403, 404, 413]);

/** JSON error codes that retrying cannot fix although the status alone would not say so. */
const PERMANENT_CODES: ReadonlySet<number> = new Set([
  10003, // Unknown Channel
  10008, // Unknown Message
  10013, // Unknown User
  50001, // Missing Access
  50007, // Cannot send messages to this user
  50013, // Missing Permissions
  50035, // Invalid Form Body
  50006, // Cannot send an empty message
  40005, // Request entity too large
]);

export function toSendError(error: unknown, what: string): SendError {
  if (error instanceof SendError) return error;
  if (error instanceof RateLimitError) {
    const wait = Math.max(error.timeToReset, error.retryAfter, error.sublimitTimeout, 0);
    return new SendError(`${what}: rate limited by Discord${error.global ? ' (global limit)' : ''} for ${Math.ceil(wait)} ms`, {
      retryAfterMs: Math.ceil(wait),
      scope: error.global ? 'channel' : 'chat',
      cause: error,
    });
  }
  if (error instanceof DiscordAPIError) {
    const message = `${what}: Discord answered ${error.status} (${error.code}) ${error.message}`;
    if (error.status === 429) {
      const body = error.rawError as { retry_after?: unknown; global?: unknown };
      const seconds = Number(body.retry_after);
      return new SendError(message, { ...(Number.isFinite(seconds) ? { retryAfterMs: Math.ceil(seconds * 1000) } : {}), scope: body.global === true ? 'channel' : 'chat', cause: error });
    }
    const code = typeof error.code === 'number' ? error.code : Number(error.code);
    const permanent = PERMANENT_STATUSES.has(error.status) || PERMANENT_CODES.has(code);
    return new SendError(message, { permanent, cause: error });
  }
  if (error instanceof HTTPError) {
    return new SendError(`${what}: Discord answered ${error.status} ${error.message}`, { permanent: PERMANENT_STATUSES.has(error.status), cause: error });
  }
  return new SendError(`${what}: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
}

/** Whether a REST failure means the channel is gone or closed to the bot (stop backfilling it). */
export function isGone(error: unknown): boolean {
  return error instanceof DiscordAPIError && (error.status === 403 || error.status === 404);
}
