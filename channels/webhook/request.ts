/**
 * What a `POST /webhook` must carry, checked after the signature: an `Idempotency-Key` (the
 * message id) and a JSON body `{"sender", "conversation", "text", "callback_url"?}`.
 */
import type { IncomingHttpHeaders } from 'node:http';

/** A request that passed validation. */
export interface WebhookRequest {
  /** The Idempotency-Key: the message id the inbox dedupes on. */
  readonly id: string;
  readonly sender: string;
  readonly conversation: string;
  readonly text: string;
  /** Where the reply goes when it is not ready within reply_timeout_seconds. */
  readonly callbackUrl?: string;
}

export type Parsed = { readonly ok: true; readonly request: WebhookRequest } | { readonly ok: false; readonly status: 400; readonly error: string };

/** Longest Idempotency-Key, sender and conversation (they become ids and conversation keys). */
export const maxIdLength = 200;

const bad = (error: string): Parsed => ({ ok: false, status: 400, error });

/** Printable ASCII without spaces at the ends: keys travel in headers and logs. */
const keyPattern = /^[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?$/;

/** C0 and C1 controls, DEL, and the Unicode line and paragraph separators: never part of an id. */
// eslint-disable-next-line no-control-regex
const controlPattern = /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/;

/**
 * Validates a signed request. Errors are meant for the caller (who holds the secret), so they
 * say exactly what is wrong.
 */
export function parseWebhookRequest(headers: IncomingHttpHeaders, body: Buffer): Parsed {
  const key = headers['idempotency-key'];
  if (typeof key !== 'string' || key === '') return bad('missing Idempotency-Key header: send a unique key per message (it is the message id; a retry with the same key gets the first answer)');
  if (key.length > maxIdLength) return bad(`Idempotency-Key is ${key.length} characters; at most ${maxIdLength}`);
  if (!keyPattern.test(key)) return bad('Idempotency-Key must be printable ASCII');

  let value: unknown;
  try {
    value = JSON.parse(body.toString('utf8'));
  } catch {
    return bad('body is not JSON: send {"sender": "…", "conversation": "…", "text": "…"}');
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return bad('body must be a JSON object: {"sender": "…", "conversation": "…", "text": "…"}');
  const fields = value as Record<string, unknown>;
  for (const name of ['sender', 'conversation', 'text'] as const) {
    if (typeof fields[name] !== 'string' || (fields[name] as string).trim() === '') return bad(`"${name}" must be a non-empty string`);
  }
  const sender = fields.sender as string;
  const conversation = fields.conversation as string;
  for (const [name, field] of [['sender', sender], ['conversation', conversation]] as const) {
    if (field.length > maxIdLength) return bad(`"${name}" is ${field.length} characters; at most ${maxIdLength}`);
    if (controlPattern.test(field)) return bad(`"${name}" contains a control character (such as \\u0000 or a line break); ids must be printable text`);
  }
  // PostgreSQL cannot store NUL in text: it would fail every insert, and the caller would retry forever.
  if ((fields.text as string).includes('\u0000')) return bad('"text" contains a NUL character (\\u0000), which cannot be stored; remove it');
  const callback = fields.callback_url;
  if (callback !== undefined && callback !== null) {
    if (typeof callback !== 'string') return bad('"callback_url" must be a string');
    if (controlPattern.test(callback)) return bad('"callback_url" contains a control character; send the URL percent-encoded');
    const problem = callbackProblem(callback);
    if (problem) return bad(`"callback_url" ${problem}`);
  }
  return {
    ok: true,
    request: { id: key, sender, conversation, text: fields.text as string, ...(typeof callback === 'string' ? { callbackUrl: callback } : {}) },
  };
}

/**
 * Why `url` cannot be a callback, or undefined when it can. Only http(s), and no credentials
 * in it (they would land in the state file; the signature authenticates us instead). Loopback
 * and private addresses are allowed on purpose: the caller proved it holds the secret, so it
 * is the operator's own system, and its callback receiver often runs on the same host.
 */
export function callbackProblem(url: string): string | undefined {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return 'is not a URL';
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') return `must be http or https, not ${parsed.protocol.replace(/:$/, '')}`;
  if (parsed.username !== '' || parsed.password !== '') return 'must not contain credentials (verify the X-Switchboard-Signature of our POST instead)';
  if (url.length > 2048) return 'is longer than 2048 characters';
  return undefined;
}
