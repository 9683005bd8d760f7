/**
 * HTTP Events API: Slack POSTs each event to `http://<listen>/slack/events`, received by
 * Bolt's HTTPReceiver with `processBeforeResponse: true`.
 *
 * - Every request is verified by Bolt (X-Slack-Signature = v0=HMAC-SHA256(signing_secret,
 *   "v0:" + X-Slack-Request-Timestamp + ":" + raw body), compared in constant time; a timestamp
 *   more than 5 minutes old refused) — and here a timestamp more than 5 minutes ahead is
 *   refused too, which Bolt does not check. Refused: 401, and nothing else happens.
 * - url_verification: the challenge is echoed (by Bolt).
 * - event_callback: processBeforeResponse holds the answer until App.processEvent resolved,
 *   i.e. until the raw event is in the channel's journal (intake.ts; milliseconds, where
 *   Slack allows 3 s): then 200. When processEvent rejects (the journal could not be written)
 *   the answer is 503, so Slack retries. A retry (X-Slack-Retry-Num) of an event already taken
 *   is answered 200 (the intake and the inbox recognise its id).
 * - Our own node:http server (not HTTPReceiver.start) runs Bolt's request listener, so the
 *   listen address is ours to choose and shutdown can cut connections that linger.
 */
import type { IncomingMessage } from 'node:http';
import { createServer } from '../../src/http/node-http.ts';
import type { AddressInfo } from 'node:net';
import { HTTPReceiver } from '@slack/bolt';
import type { Logger } from 'pino';
import type { ListenLink } from '../../src/channel.ts';
import { parseListen } from '../../src/net.ts';
import { slackLogger } from './logger.ts';

export const eventsPath = '/slack/events';
const maxBodyBytes = 1024 * 1024;
const maxSkewSeconds = 5 * 60;

/** Bolt's HTTPReceiver, answering only once processEvent settled: 200 when it resolved, 503 when it rejected. */
export function eventsReceiver(signingSecret: string, log: Logger): HTTPReceiver {
  return new HTTPReceiver({
    signingSecret,
    endpoints: eventsPath,
    processBeforeResponse: true,
    bodyLimit: maxBodyBytes,
    logger: slackLogger(log),
    // processEvent rejected: the event is not journaled (app.ts logged why).
    processEventErrorHandler: async ({ response }) => {
      if (!response.headersSent) response.writeHead(503, { 'content-type': 'text/plain' }).end('try again');
      return false;
    },
    // processEvent resolved without anyone acknowledging (a body type Bolt does not know): nothing to take, nothing to retry.
    unhandledRequestHandler: ({ response }) => {
      if (!response.headersSent) response.writeHead(200).end();
    },
  });
}

/** Whether a request's timestamp lies more than 5 minutes ahead (Bolt refuses only those 5 minutes behind). */
export function fromTheFuture(timestamp: string | undefined, nowMs = Date.now()): boolean {
  const seconds = Number(timestamp);
  return Number.isFinite(seconds) && seconds - nowMs / 1000 > maxSkewSeconds;
}

export interface EventsListenerOptions {
  /** host:port ("[::1]:3000" for IPv6). */
  readonly listen: string;
  readonly log: Logger;
}

/** Serves `receiver` on `listen` until `signal` aborts. */
export async function serveEvents(receiver: HTTPReceiver, options: EventsListenerOptions, signal: AbortSignal, link: ListenLink): Promise<void> {
  const { log } = options;
  const server = createServer((req, res) => {
    // A request Slack signed (answered, or refused for now) is a sign of life.
    res.once('finish', () => (res.statusCode === 200 || res.statusCode === 503) && link.alive());
    const path = (req.url ?? '').split('?')[0];
    if (path !== eventsPath) return void res.writeHead(404, { 'content-type': 'text/plain' }).end('not found');
    if (req.method !== 'POST') return void res.writeHead(405, { 'content-type': 'text/plain' }).end('method not allowed');
    if (fromTheFuture(header(req, 'x-slack-request-timestamp'))) {
      log.warn({ remote: req.socket.remoteAddress }, 'slack event with a timestamp from the future rejected');
      return void res.writeHead(401, { 'content-type': 'text/plain' }).end('invalid signature');
    }
    receiver.requestListener(req, res);
  });

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
    // Requests still waiting on the journal get their answer; whatever is left is cut after a second.
    const timer = setTimeout(() => server.closeAllConnections(), 1000);
    await closed;
    clearTimeout(timer);
  }
}

function header(req: IncomingMessage, name: string): string | undefined {
  const value = req.headers[name];
  return Array.isArray(value) ? value[0] : value;
}
