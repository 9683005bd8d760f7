/**
 * Matrix errors (standard error responses: `errcode`, `error`, `retry_after_ms`) → SendError
 * for the outbox, and descriptions for the log that never carry the access token.
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
  let retryAfterMs = typeof e.data?.retry_after_ms === 'number' ? e.data.retry_after_ms : undefined;
  if (retryAfterMs === undefined && typeof e.getRetryAfterMs === 'function') {
    try {
      retryAfterMs = e.getRetryAfterMs() ?? undefined;
    } catch {
      // a malformed Retry-After header: no hint
    }
  }
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
  if (isRateLimit(failure)) return new SendError(reason, { retryAfterMs: failure?.retryAfterMs ?? 1000 });
  if (isTokenRejected(failure)) return new SendError(`${reason} — the access token was rejected; set a valid access_token (or password) for this account`, { permanent: true });
  if (failure?.errcode !== undefined && PERMANENT.has(failure.errcode)) return new SendError(reason, { permanent: true });
  const status = failure?.httpStatus;
  // Other 4xx (but timeouts) are requests the server will never take; 5xx and network failures may pass later.
  if (status !== undefined && status >= 400 && status < 500 && status !== 408) return new SendError(reason, { permanent: true });
  return new SendError(reason);
}
