/**
 * HTTP Events API: Slack POSTs each event to `http://<listen>/slack/events`.
 *
 * - Every request is verified: X-Slack-Signature must be v0=HMAC-SHA256(signing_secret,
 *   "v0:" + X-Slack-Request-Timestamp + ":" + raw body) (compared in constant time) and the
 *   timestamp no more than 5 minutes off; otherwise 401 and nothing else happens.
 * - url_verification: the challenge is echoed.
 * - event_callback: answered 200 only after the message is in the inbox (`await push`);
 *   when push rejects (shutdown) 503, so Slack retries. A retry (X-Slack-Retry-Num) of an
 *   event already taken is answered 200 (the inbox recognises its id).
 */
import { createHmac } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import type { ListenLink, Push } from '../../src/channel.ts';
import { parseListen, secretsEqual } from '../../src/net.ts';
import type { Receiver } from './receive.ts';

export const eventsPath = '/slack/events';
const maxBodyBytes = 1024 * 1024;
const maxSkewSeconds = 5 * 60;

export interface EventsListenerOptions {
  readonly signingSecret: string;
  /** host:port ("[::1]:3000" for IPv6). */
  readonly listen: string;
  readonly receiver: Receiver;
  readonly log: Logger;
}

/** Whether a request's signature is Slack's (and recent). */
export function verifySignature(secret: string, timestamp: string | undefined, signature: string | undefined, body: Buffer, nowMs = Date.now()): boolean {
  if (!timestamp || !signature || !/^\d{1,12}$/.test(timestamp)) return false;
  if (Math.abs(nowMs / 1000 - Number(timestamp)) > maxSkewSeconds) return false;
  const expected = Buffer.from(`v0=${createHmac('sha256', secret).update(`v0:${timestamp}:`).update(body).digest('hex')}`);
  return secretsEqual(signature, expected);
}


export async function runEventsListener(options: EventsListenerOptions, push: Push, signal: AbortSignal, link: ListenLink): Promise<void> {
  const { log, receiver } = options;
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
      await receiver.handle(payload.event, push);
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
