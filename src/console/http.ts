/**
 * HTTP helpers of the console: security headers on every answer, bounded JSON bodies, and a
 * small validator that turns a wrong body into a clear 400 before anything is changed. The
 * writing and reading themselves are the gateway's (src/http/).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { BodyTooLarge, readBody as readRequestBody } from '../http/body.ts';
import { sendJson } from '../http/json.ts';

/** No inline script, nothing framed, nothing loaded from elsewhere. */
export const contentSecurityPolicy =
  "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

export const securityHeaders: Readonly<Record<string, string>> = {
  'content-security-policy': contentSecurityPolicy,
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-resource-policy': 'same-origin',
};

/** An answer the client caused (4xx), with the message it gets. */
export class HttpError extends Error {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  constructor(status: number, message: string, headers: Record<string, string> = {}) {
    super(message);
    this.name = 'HttpError';
    this.status = status;
    this.headers = headers;
  }
}

/** A JSON answer with the console's security headers. */
export function send(response: ServerResponse, status: number, body: unknown, headers: Readonly<Record<string, string>> = {}): void {
  sendJson(response, status, body, { ...securityHeaders, ...headers });
}

/** Reads at most `max` bytes; a larger body is a 413 (and the rest is not read). */
export async function readBody(request: IncomingMessage, max: number): Promise<Buffer> {
  try {
    return await readRequestBody(request, max);
  } catch (error) {
    if (error instanceof BodyTooLarge) throw new HttpError(413, `request body larger than ${max} bytes`, { connection: 'close' });
    throw error;
  }
}

/** A JSON object body (Content-Type application/json, at most `max` bytes). */
export async function readJson(request: IncomingMessage, max: number): Promise<Record<string, unknown>> {
  const type = (request.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
  if (type !== 'application/json') {
    request.resume();
    throw new HttpError(415, 'send the body as JSON (Content-Type: application/json)');
  }
  const body = await readBody(request, max);
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch {
    throw new HttpError(400, 'the body is not valid JSON');
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new HttpError(400, 'the body must be a JSON object');
  return parsed as Record<string, unknown>;
}

/** A required string field of at most `max` characters (non-empty unless `allowEmpty`). */
export function str(body: Record<string, unknown>, key: string, max: number, allowEmpty = false): string {
  const value = body[key];
  if (typeof value !== 'string') throw new HttpError(400, `"${key}" must be a string`);
  if (!allowEmpty && value.trim() === '') throw new HttpError(400, `"${key}" must not be empty`);
  if (value.length > max) throw new HttpError(400, `"${key}" is longer than ${max} characters`);
  return value;
}

/** An optional string field. */
export function optStr(body: Record<string, unknown>, key: string, max: number): string | undefined {
  return body[key] === undefined ? undefined : str(body, key, max, true);
}

/** A query-string parameter (undefined when absent), at most `max` characters. */
export function query(url: URL, key: string, max: number): string | undefined {
  const value = url.searchParams.get(key);
  if (value === null) return undefined;
  if (value.length > max) throw new HttpError(400, `query parameter "${key}" is longer than ${max} characters`);
  return value;
}
