/**
 * Web API failures → SendError, so the outbox knows whether and when to retry.
 *
 * Bolt's WebClient (`app.client`) is built with `rejectRateLimitedCalls: true` and no retries
 * of its own (see app.ts): a 429 surfaces at once as a rate-limited error carrying Retry-After
 * (@slack/web-api WebClient: with rejectRateLimitedCalls the 429 is thrown as
 * WebAPIRateLimitedError instead of pausing its request queue and retrying by itself), and
 * the runtime does the waiting: one mechanism that holds every call of the chat (or channel)
 * until Retry-After has passed, and the durable outbox that retries (also across restarts).
 */
import { SendError } from '../../src/channel.ts';

/** Platform errors retrying cannot fix. */
const permanentErrors = new Set([
  'channel_not_found',
  'not_in_channel',
  'is_archived',
  'invalid_auth',
  'not_authed',
  'account_inactive',
  'token_revoked',
  'token_expired',
  'no_permission',
  'missing_scope',
  'restricted_action',
  'restricted_action_read_only_channel',
  'restricted_action_thread_only_channel',
  'restricted_action_non_threadable_channel',
  'team_access_not_granted',
  'ekm_access_denied',
  'user_is_restricted',
  'cannot_reply_to_message',
  'msg_too_long',
  'no_text',
  'invalid_blocks',
  'invalid_arguments',
  'invalid_arg_name',
  'message_not_found',
  'cant_update_message',
  'edit_window_closed',
  'file_not_found',
  'thread_not_found',
  'invalid_thread_ts',
  'as_user_not_supported',
  'not_allowed_token_type',
]);

/** The fields of @slack/web-api's errors we look at (matched by their `code`, not their class). */
interface WebApiErrorLike {
  readonly code?: unknown;
  readonly retryAfter?: unknown;
  readonly statusCode?: unknown;
  readonly data?: { readonly error?: unknown };
}

/** The Slack error code (`channel_not_found`…) of a platform error, if it is one. */
export function platformError(error: unknown): string | undefined {
  const e = error as WebApiErrorLike | undefined;
  return e?.code === 'slack_webapi_platform_error' && typeof e.data?.error === 'string' ? e.data.error : undefined;
}

/**
 * Maps a failed Web API call to a SendError (a SendError passes through). `scope` is what a
 * rate limit of this call covers (https://api.slack.com/docs/rate-limits): chat.postMessage's
 * "1 per second per channel" limit one chat ('chat'); the tier limits of the other methods
 * (chat.update is Tier 3, files.* Tier 2–4) are per method per workspace, so the whole
 * channel ('channel'): the runtime then holds every call of the channel until the wait is over.
 */
export function toSendError(error: unknown, what: string, scope: 'chat' | 'channel' = 'chat'): SendError {
  if (error instanceof SendError) return error;
  const e = (error ?? {}) as WebApiErrorLike;
  const reason = error instanceof Error ? error.message : String(error);
  if (e.code === 'slack_webapi_rate_limited_error') {
    // WebAPIRateLimitedError.retryAfter: the Retry-After header, in seconds.
    const seconds = typeof e.retryAfter === 'number' && e.retryAfter >= 0 ? e.retryAfter : 1;
    return new SendError(`${what}: rate limited by Slack (retry after ${seconds} s)`, { retryAfterMs: seconds * 1000, scope, cause: error });
  }
  const code = platformError(error);
  if (code !== undefined) {
    if (code === 'ratelimited') return new SendError(`${what}: rate limited by Slack`, { retryAfterMs: 1000, scope, cause: error });
    return new SendError(`${what}: Slack answered ${code}`, { permanent: permanentErrors.has(code), cause: error });
  }
  if (e.code === 'slack_webapi_http_error' && typeof e.statusCode === 'number') {
    // Slack's Web API uses status codes only for 429 and its own outages: a 4xx is a request it will never take.
    const status = e.statusCode;
    return new SendError(`${what}: HTTP ${status}`, { permanent: status >= 400 && status < 500 && status !== 408, cause: error });
  }
  return new SendError(`${what}: ${reason}`, { cause: error });
}
