/**
 * `POST /webhook` on the gateway. Order matters: the signature's form and time are checked on
 * the headers before the body is read (so a stranger's stalled body holds little, briefly),
 * its HMAC before anything parses the body, so an unsigned request never reaches the runtime
 * (nor the model); then the
 * request is validated, a known Idempotency-Key is answered from the first result, and a new
 * one is recorded, pushed (durably in the inbox) and waited for.
 */
import { createHash } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import type { ChannelContext, InboundMessage, Push } from '../../src/channel.ts';
import { diskFullCode } from '../../src/disk-full.ts';
import type { HttpRoute } from '../../src/route.ts';
import { sendJson } from '../../src/http/json.ts';
import { parseWebhookRequest } from './request.ts';
import type { ResultStore } from './results.ts';
import { checkSignatureHeader, signatureHeader, signatureMatches } from './signature.ts';
import type { Waiters } from './waiters.ts';

export interface WebhookRouteOptions {
  /** Channel instance name (the `channel` of pushed messages). */
  readonly name: string;
  readonly secret: string;
  /** Accept the old body-only `sha256=` signature too ([channels.webhook] legacy_signature). @default false */
  readonly legacySignature?: boolean;
  /** Longest body, in bytes; read only once the signature header passed. @default 65536 */
  readonly maxBodyBytes?: number;
  /** How long the body may take once the headers are in. @default 10000 */
  readonly bodyTimeoutMs?: number;
  readonly replyTimeoutMs: number;
  readonly store: ResultStore;
  readonly waiters: Waiters;
  /** The runtime's push while the channel listens; undefined before and after. */
  readonly push: () => Push | undefined;
  readonly log: Logger;
  /** Where a failed write of a result is reported (see ChannelContext.storage). */
  readonly storage?: ChannelContext['storage'];
}

/** How long a caller is asked to wait after a 503 for a full disk. */
const DISK_FULL_RETRY_SECONDS = 10;

/** The `account` of every webhook message: there is no bot identity on the other side. */
export const webhookAccount = 'webhook';

export function createWebhookRoute(options: WebhookRouteOptions): HttpRoute {
  const { log, store, waiters } = options;
  const verifyOptions = { legacy: options.legacySignature === true };
  return {
    method: 'POST',
    path: '/webhook',
    // The HMAC signature is this route's authentication (callers need not know the gateway token).
    auth: 'signature',
    admit(request) {
      const checked = checkSignatureHeader(request.headers[signatureHeader], verifyOptions);
      if (!checked.ok) {
        log.warn({ remote: request.socket.remoteAddress, signed: request.headers[signatureHeader] !== undefined, problem: checked.error }, 'webhook request with a missing, malformed or stale signature; rejected before its body');
        return { refuse: { status: 401, error: checked.error } };
      }
      return { maxBodyBytes: options.maxBodyBytes ?? 64 * 1024, bodyTimeoutMs: options.bodyTimeoutMs ?? 10_000 };
    },
    async handle(request: IncomingMessage, response: ServerResponse, body: Buffer) {
      const checked = checkSignatureHeader(request.headers[signatureHeader], verifyOptions);
      const key = request.headers['idempotency-key'];
      if (!checked.ok || !signatureMatches(options.secret, checked.signature, typeof key === 'string' ? key : '', body)) {
        log.warn({ remote: request.socket.remoteAddress, signed: request.headers[signatureHeader] !== undefined }, 'webhook request with a wrong signature; rejected');
        return sendJson(response, 401, {
          error: checked.ok
            ? 'wrong X-Switchboard-Signature: v1 must be the hex HMAC-SHA256 of "<t>.<Idempotency-Key>.<raw body>" keyed with the webhook secret'
            : checked.error,
        });
      }
      const parsed = parseWebhookRequest(request.headers, body);
      if (!parsed.ok) return sendJson(response, parsed.status, { error: parsed.error });
      const { id, sender, conversation, text, callbackUrl } = parsed.request;
      const hash = createHash('sha256').update(body).digest('hex');

      const known = await store.get(id);
      if (known?.hash !== undefined && known.hash !== hash) {
        return sendJson(response, 422, { error: 'this Idempotency-Key was already used for a different request; use a new key per message' });
      }
      if (known?.reply !== undefined) {
        log.debug({ id, conversation }, 'replayed Idempotency-Key answered from the first result');
        return sendJson(response, 200, { id, reply: known.reply });
      }
      const push = options.push();
      if (!push) return sendJson(response, 503, { error: 'the webhook channel is not running (starting or stopping); try again' }, { 'retry-after': '5' });
      // Recorded before the push: the reply, whenever it comes, then knows its callback_url.
      if (!known) {
        try {
          await store.addRequest({ id, conversation, hash, at: Date.now(), ...(callbackUrl === undefined ? {} : { callbackUrl }) });
        } catch (error) {
          const full = options.storage?.failed(error, `record webhook request ${id}`) ?? (diskFullCode(error) === undefined ? undefined : error);
          if (!full) throw error;
          return refuseDiskFull(response);
        }
      }

      // Waiting before pushing, so even an instant reply finds us.
      const wait = waiters.wait(id, options.replyTimeoutMs);
      response.once('close', () => wait.cancel());
      const message: InboundMessage = { channel: options.name, account: webhookAccount, chat: conversation, id, sender: { id: sender }, text, timestamp: Date.now(), direct: true };
      let result;
      try {
        // A known but unanswered key is pushed again: harmless when it is in the inbox
        // ('duplicate'), and it is not when the daemon died between recording and pushing.
        result = await push(message);
      } catch (error) {
        wait.cancel();
        // A full disk is logged once by the runtime, not once per request.
        if (diskFullCode(error) !== undefined) return refuseDiskFull(response);
        log.warn({ err: error, id }, 'webhook message not accepted');
        return sendJson(response, 503, { error: 'not accepted (Switchboard is stopping); send it again with the same Idempotency-Key' }, { 'retry-after': '5' });
      }
      log.debug({ id, conversation, result }, 'webhook message in the inbox');
      const reply = await wait.reply;
      if (response.destroyed || response.headersSent) return;
      if (reply !== undefined) return sendJson(response, 200, { id, reply });
      if ((await store.get(id).catch(() => undefined))?.callbackUrl !== undefined) waiters.owe(id);
      sendJson(response, 202, { status: 'accepted', id });
    },
  };
}

/** 503 for a message that could not be stored: nothing was kept, so the sender must send it again. */
function refuseDiskFull(response: ServerResponse): void {
  sendJson(
    response,
    503,
    { error: 'not accepted: the disk of the Switchboard data_dir is full, so the message could not be stored. Send it again with the same Idempotency-Key after Retry-After seconds' },
    { 'retry-after': String(DISK_FULL_RETRY_SECONDS) },
  );
}
