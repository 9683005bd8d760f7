/**
 * The one JSON writer of every HTTP answer: the gateway's routes, the console's API (which adds
 * its security headers) and the webhook channel. No node:http import: loading it costs ~40 ms at start.
 */
import type { ServerResponse } from 'node:http';

export function sendJson(response: ServerResponse, status: number, body: unknown, headers: Readonly<Record<string, string>> = {}): void {
  const text = JSON.stringify(body);
  response.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text), 'cache-control': 'no-store', ...headers });
  response.end(text);
}
