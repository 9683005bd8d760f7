/**
 * Webhook mode: Telegram POSTs each update to `webhook.url`; we serve `webhook.listen` (a
 * reverse proxy terminates TLS in front of it). A request counts only with the secret header;
 * it is answered 200 once the update is pushed (durably in the inbox), 500 otherwise so
 * Telegram delivers it again.
 */
import type { IncomingMessage, Server } from 'node:http';
import { createServer } from '../../src/http/node-http.ts';
import type { Api } from 'grammy';
import type { Update } from 'grammy/types';
import type { Logger } from 'pino';
import type { ListenLink } from '../../src/channel.ts';
import { describeError, grammySignal } from './errors.ts';
import { whileAlive } from '../../src/listen.ts';
import { isRecord } from '../../src/inbound/malformed.ts';
import { parseListen, secretsEqual } from '../../src/net.ts';
import { ALLOWED_UPDATES } from './poll.ts';

export interface WebhookConfig {
  readonly url: string;
  readonly listen: string;
  readonly secret: string;
}

export interface WebhookOptions {
  readonly api: Api;
  readonly token: string;
  readonly config: WebhookConfig;
  readonly livenessMs: number;
  readonly log: Logger;
  handle(update: Update): Promise<void>;
}

/** Updates are small; anything bigger is not Telegram. */
const MAX_BODY = 1024 * 1024;

export async function serveWebhook(options: WebhookOptions, signal: AbortSignal, link: ListenLink): Promise<void> {
  const { config, log } = options;
  const path = new URL(config.url).pathname;
  const secret = Buffer.from(config.secret);
  const server = createServer((request, response) => {
    const reply = (status: number, body = ''): void => {
      if (!response.headersSent) response.writeHead(status, { 'content-type': 'text/plain' }).end(body);
    };
    void (async () => {
      if (request.method !== 'POST' || new URL(request.url ?? '/', 'http://localhost').pathname !== path) return reply(404, 'not found');
      if (!secretsEqual(String(request.headers['x-telegram-bot-api-secret-token'] ?? ''), secret)) {
        log.warn({ remote: request.socket.remoteAddress }, 'webhook request without the right secret token; rejected');
        request.resume();
        return reply(401, 'unauthorized');
      }
      let update: Update;
      try {
        const body: unknown = JSON.parse(await readBody(request));
        // `null` or `"x"` would reach handle() (and the log line below) as an update and throw there, unhandled
        if (!isRecord(body)) return reply(400, 'an update must be a JSON object');
        update = body as unknown as Update;
      } catch (error) {
        return reply(400, describeError(error, options.token));
      }
      link.alive();
      try {
        await whileAlive(link, options.livenessMs, () => options.handle(update));
        reply(200);
      } catch (error) {
        log.warn({ reason: describeError(error, options.token), update: update.update_id }, 'update not accepted; Telegram will deliver it again');
        reply(500, 'not accepted');
      }
    })();
  });
  const { host, port } = parseListen(config.listen);
  await listenOn(server, host, port);
  try {
    // One connection at a time: Telegram then sends a chat's updates strictly in order (the inbox keeps arrival order).
    await options.api.setWebhook(config.url, { secret_token: config.secret, allowed_updates: [...ALLOWED_UPDATES], max_connections: 1 }, grammySignal(signal));
    if (!signal.aborted) {
      link.ready();
      log.info({ listen: config.listen, path }, 'webhook set; receiving updates');
      await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
    }
  } finally {
    server.close();
    server.closeAllConnections();
  }
}

function readBody(request: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    request.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY) {
        reject(new Error('request body too large'));
        request.destroy();
      } else chunks.push(chunk);
    });
    request.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    request.on('error', reject);
  });
}

function listenOn(server: Server, host: string, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
}
