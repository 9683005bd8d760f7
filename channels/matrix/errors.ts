/**
 * Matrix errors (standard error responses: `errcode`, `error`, `retry_after_ms`, and the
 * `Retry-After` header) → SendError for the outbox, and descriptions for the log that never
 * carry the access token.
 *
 * Rate limits (matrix-org/matrix-spec content/client-server-api/_index.md, "Rate limiting"):
 * since v1.10 homeservers SHOULD send `Retry-After` on every 429 and `retry_after_ms` is
 * deprecated in its favour, so the header wins and the body is the fallback (Synapse sends both,
 * the header in whole seconds rounded up: element-hq/synapse synapse/api/errors.py
 * LimitExceededError). Synapse's message limit (`rc_message`) counts every event a user sends,
 * in any room, so a 429 holds the whole channel (`scope: 'channel'`), not one room.
 */
import { SendError } from '../../src/channel.ts';

/** What the SDK's MatrixError carries (duck-typed: errors also come from our own fetches). */
export interface MatrixFailure {
  readonly errcode?: string;
  readonly httpStatus?: number;
  readonly retryAfterMs?: number;
  readonly message: string;
}

/** Error codes retrying cannot fix. */
const PERMANENT = new Set([
  'M_FORBIDDEN',
  'M_UNKNOWN_TOKEN',
  'M_MISSING_TOKEN',
  'M_NOT_FOUND',
  'M_BAD_JSON',
  'M_NOT_JSON',
  'M_TOO_LARGE',
  'M_INVALID_PARAM',
  'M_UNRECOGNIZED',
  'M_USER_DEACTIVATED',
  'M_GUEST_ACCESS_FORBIDDEN',
  'M_CANNOT_LEAVE_SERVER_NOTICE_ROOM',
]);

/** The Matrix facts of an error, if it is one (the SDK's MatrixError, or a response we parsed). */
export function matrixFailure(error: unknown): MatrixFailure | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  const e = error as { errcode?: unknown; httpStatus?: unknown; data?: { retry_after_ms?: unknown }; message?: unknown; getRetryAfterMs?: () => number | null };
  if (typeof e.errcode !== 'string' && typeof e.httpStatus !== 'number') return undefined;
  // The SDK's getRetryAfterMs reads the Retry-After header (seconds or an HTTP date) first, then
  // retry_after_ms; it throws on a malformed header, and then the body is all there is.
  let retryAfterMs: number | undefined;
  if (typeof e.getRetryAfterMs === 'function') {
    try {
      retryAfterMs = e.getRetryAfterMs() ?? undefined;
    } catch {
      // a malformed Retry-After header: the body's hint, if any
    }
  }
  if (retryAfterMs === undefined && typeof e.data?.retry_after_ms === 'number') retryAfterMs = e.data.retry_after_ms;
  if (retryAfterMs !== undefined) retryAfterMs = Math.max(0, retryAfterMs); // an HTTP date already past
  return {
    ...(typeof e.errcode === 'string' ? { errcode: e.errcode } : {}),
    ...(typeof e.httpStatus === 'number' ? { httpStatus: e.httpStatus } : {}),
    ...(retryAfterMs === undefined ? {} : { retryAfterMs }),
    message: typeof e.message === 'string' ? e.message : String(error),
  };
}

export const isRateLimit = (failure: MatrixFailure | undefined): boolean => failure?.errcode === 'M_LIMIT_EXCEEDED' || failure?.httpStatus === 429;
export const isTokenRejected = (failure: MatrixFailure | undefined): boolean => failure?.errcode === 'M_UNKNOWN_TOKEN' || failure?.errcode === 'M_MISSING_TOKEN';

/** One line for the log: the errcode and message (the SDK sends the token in a header, never in URLs). */
export function describeError(error: unknown, token?: string): string {
  const failure = matrixFailure(error);
  let text = failure ? `${failure.errcode ?? `HTTP ${failure.httpStatus}`}: ${failure.message}` : error instanceof Error ? `${error.name}: ${error.message}` : String(error);
  const cause = error instanceof Error && error.cause instanceof Error ? error.cause.message : undefined;
  if (cause && !text.includes(cause)) text += ` (${cause})`;
  return token ? text.split(token).join('<token>') : text;
}

/** How the outbox should treat a failed request. */
export function toSendError(error: unknown, what: string, token?: string): SendError {
  if (error instanceof SendError) return error;
  const failure = matrixFailure(error);
  const reason = `${what}: ${describeError(error, token)}`;
  if (isRateLimit(failure)) return new SendError(reason, { retryAfterMs: failure?.retryAfterMs ?? 1000, scope: 'channel' });
  if (isTokenRejected(failure)) return new SendError(`${reason} — the access token was rejected; set a valid access_token (or password) for this account`, { permanent: true });
  if (failure?.errcode !== undefined && PERMANENT.has(failure.errcode)) return new SendError(reason, { permanent: true });
  const status = failure?.httpStatus;
  // Other 4xx (but timeouts) are requests the server will never take; 5xx and network failures may pass later.
  if (status !== undefined && status >= 400 && status < 500 && status !== 408) return new SendError(reason, { permanent: true });
  return new SendError(reason);
}
