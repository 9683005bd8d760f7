/**
 * HTTP Events API: Slack POSTs each event to `http://<listen>/slack/events`.
 *
 * - Every request is verified with Bolt's `isValidSlackRequest`: X-Slack-Signature must be
 *   v0=HMAC-SHA256(signing_secret, "v0:" + X-Slack-Request-Timestamp + ":" + raw body)
 *   (compared in constant time) and the timestamp no more than 5 minutes off; otherwise 401
 *   and nothing else happens.
 * - url_verification: the challenge is echoed.
 * - event_callback: run through Bolt's App (bolt.ts) and answered 200 only once that
 *   resolved — the message is in the inbox (Bolt's processBeforeResponse, done by our
 *   Receiver); when it rejects (shutdown) 503, so Slack retries. (Bolt's own HTTPReceiver
 *   answers a failed listener with 500 and would own the port; this listener keeps the 503.) A retry (X-Slack-Retry-Num) of an
 *   event already taken is answered 200 (the inbox recognises its id).
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { isValidSlackRequest } from '@slack/bolt';
import type { Logger } from 'pino';
import type { ListenLink } from '../../src/channel.ts';
import { parseListen } from '../../src/net.ts';
import type { SlackApp, TakeEvent } from './bolt.ts';

export const eventsPath = '/slack/events';
const maxBodyBytes = 1024 * 1024;

export interface EventsListenerOptions {
  readonly signingSecret: string;
  /** host:port ("[::1]:3000" for IPv6). */
  readonly listen: string;
  /** Runs an event body through Bolt's App (bolt.ts). */
  readonly dispatch: SlackApp['dispatch'];
  /** Pushes the event (into the inbox); given to dispatch. */
  readonly take: TakeEvent;
  readonly log: Logger;
}

/** Whether a request's signature is Slack's (and recent): Bolt's check (v0 HMAC-SHA256, 5 minutes, constant time). */
export function verifySignature(secret: string, timestamp: string | undefined, signature: string | undefined, body: Buffer, nowMs = Date.now()): boolean {
  if (!timestamp || !signature || !/^\d{1,12}$/.test(timestamp)) return false;
  // Bolt refuses timestamps over 5 minutes old; one from over 5 minutes ahead is as suspect.
  if (Number(timestamp) - nowMs / 1000 > 5 * 60) return false;
  return isValidSlackRequest({ signingSecret: secret, body: body.toString('utf8'), headers: { 'x-slack-signature': signature, 'x-slack-request-timestamp': Number(timestamp) }, nowMilliseconds: nowMs });
}


export async function runEventsListener(options: EventsListenerOptions, signal: AbortSignal, link: ListenLink): Promise<void> {
  const { log } = options;
  const server = createServer((req, res) => void serve(req, res));

  const answer = (res: ServerResponse, status: number, body = '', type = 'text/plain'): void => {
    if (res.headersSent) return;
    res.writeHead(status, body === '' ? {} : { 'content-type': type }).end(body);
  };

  async function serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? '').split('?')[0];
    if (path !== eventsPath) return answer(res, 404, 'not found');
    if (req.method !== 'POST') return answer(res, 405, 'method not allowed');
    let body: Buffer;
    try {
      body = await readBody(req);
    } catch {
      return answer(res, 413, 'too large');
    }
    const timestamp = header(req, 'x-slack-request-timestamp');
    if (!verifySignature(options.signingSecret, timestamp, header(req, 'x-slack-signature'), body)) {
      log.warn({ remote: req.socket.remoteAddress }, 'slack event with a bad or stale signature rejected');
      return answer(res, 401, 'invalid signature');
    }
    link.alive();
    let payload: { type?: unknown; challenge?: unknown; event?: unknown; event_id?: unknown };
    try {
      const text = body.toString('utf8');
      // Slash commands and interactivity arrive form-encoded; this channel subscribes to neither.
      payload = (req.headers['content-type'] ?? '').includes('application/x-www-form-urlencoded') ? {} : (JSON.parse(text) as typeof payload);
    } catch {
      return answer(res, 400, 'not JSON');
    }
    if (payload.type === 'url_verification') return answer(res, 200, JSON.stringify({ challenge: payload.challenge }), 'application/json');
    if (payload.type !== 'event_callback') return answer(res, 200);
    try {
      const retry = header(req, 'x-slack-retry-num');
      await options.dispatch(payload, options.take, { num: retry === undefined ? undefined : Number(retry), reason: header(req, 'x-slack-retry-reason') });
    } catch (error) {
      log.warn({ err: error, event: payload.event_id, retry: header(req, 'x-slack-retry-num') }, 'slack event not taken; answering 503 so Slack retries');
      return answer(res, 503, 'try again');
    }
    answer(res, 200);
  }

  const { host, port } = parseListen(options.listen);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  server.on('error', (error) => log.error({ err: error }, 'slack events listener error'));
  const address = server.address() as AddressInfo;
  const shown = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  log.info({ url: `http://${shown}:${address.port}${eventsPath}` }, 'slack events listener');
  link.ready();
  try {
    await new Promise<void>((resolve) => {
      if (signal.aborted) return resolve();
      signal.addEventListener('abort', () => resolve(), { once: true });
    });
  } finally {
    server.closeIdleConnections();
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    // Requests still waiting on push get their 503 as push rejects; whatever is left is cut after a second.
    const timer = setTimeout(() => server.closeAllConnections(), 1000);
    await closed;
    clearTimeout(timer);
  }
}

function header(req: IncomingMessage, name: string): string | undefined {
  const value = req.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > maxBodyBytes) {
        req.destroy();
        reject(new Error('body too large'));
      } else {
        chunks.push(chunk);
      }
    });
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}
