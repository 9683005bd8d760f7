/**
 * Delivers a late reply to the request's `callback_url`: a POST of
 * `{"id", "conversation", "reply"}` signed like requests to us (X-Switchboard-Signature:
 * t=<unix>,v1=<HMAC of "<t>.<id>.<body>">, or sha256=<HMAC of the body> with legacy_signature) and
 * carrying the message id as `Idempotency-Key` (the outbox retries, so the receiver may see a
 * reply twice). Redirects are not followed: the URL was checked, where it redirects was not.
 */
import { SendError } from '../../src/channel.ts';
import { sign, signLegacy } from './signature.ts';

export interface CallbackPayload {
  readonly id: string;
  readonly conversation: string;
  readonly reply: string;
}

export interface CallbackOptions {
  readonly secret: string;
  /** Sign the old body-only way (sha256=…), for receivers not yet migrated. @default false */
  readonly legacySignature?: boolean;
  /** Longest wait for the receiver. @default 30000 */
  readonly timeoutMs?: number;
  /** @default globalThis.fetch */
  readonly fetch?: typeof fetch;
}

/** Throws SendError: permanent for a 4xx (but 408 / 425 / 429) or a redirect, retryable otherwise. */
export async function postCallback(url: string, payload: CallbackPayload, options: CallbackOptions): Promise<void> {
  const body = JSON.stringify(payload);
  const doFetch = options.fetch ?? fetch;
  let response: Response;
  try {
    response = await doFetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-switchboard-signature': options.legacySignature === true ? signLegacy(options.secret, body) : sign(options.secret, { key: payload.id, body }), 'idempotency-key': payload.id },
      body,
      redirect: 'manual',
      signal: AbortSignal.timeout(options.timeoutMs ?? 30_000),
    });
  } catch (error) {
    throw new SendError(`callback to ${origin(url)} failed: ${(error as Error).message}`, { cause: error });
  }
  // The receiver's answer is not needed; draining it frees the connection.
  await response.body?.cancel().catch(() => undefined);
  const status = response.status;
  if (status >= 200 && status < 300) return;
  const what = `callback to ${origin(url)} answered ${status}`;
  if (status === 429) throw new SendError(what, retryAfter(response.headers));
  if (status === 408 || status === 425 || status >= 500) throw new SendError(what);
  throw new SendError(status >= 300 && status < 400 ? `${what} (redirects are not followed)` : what, { permanent: true });
}

/** Scheme, host and port only: a path or query may carry a token, and this goes to the log. */
function origin(url: string): string {
  try {
    return new URL(url).origin;
  } catch {
    return '(bad URL)';
  }
}

function retryAfter(headers: Headers): { retryAfterMs?: number } {
  const header = headers.get('retry-after');
  if (header === null) return {};
  const seconds = Number(header);
  if (Number.isFinite(seconds) && seconds >= 0) return { retryAfterMs: seconds * 1000 };
  const date = Date.parse(header);
  if (Number.isNaN(date)) return {};
  // Against the receiver's own `Date` when it sent one, so a stepped local clock does not distort the wait.
  const served = Date.parse(headers.get('date') ?? '');
  return { retryAfterMs: Math.max(0, date - (Number.isNaN(served) ? Date.now() : served)) };
}
