/**
 * The generic webhook channel: other systems talk to the agent over HTTP through the gateway.
 *
 * `POST /webhook` with `{"sender", "conversation", "text", "callback_url"?}`, signed
 * (`X-Switchboard-Signature: t=<unix>,v1=<hex HMAC-SHA256 of "<t>.<key>.<raw body>">`, see
 * signature.ts) and carrying an
 * `Idempotency-Key` (the message id). The response waits up to `reply_timeout_seconds` for the
 * reply (200 `{"id", "reply"}`), else answers 202 and the reply goes to `callback_url` when
 * one was given (signed the same way). A replayed key gets the first result, also after a
 * restart or on another node (see results.ts). One reply is one `send`: the channel declares no message limit,
 * so the outbox never splits a reply.
 */
import type { Channel, ChannelContext, OutboundMessage, Push } from '../../src/channel.ts';
import { ConfigError } from '../../src/config/load.ts';
import type { WebhookConfig } from './config.ts';
import { postCallback } from './callback.ts';
import { ResultStore } from './results.ts';
import { createWebhookRoute } from './route.ts';
import { Waiters } from './waiters.ts';

export { sign, signLegacy, verify } from './signature.ts';

/** Knobs for tests; the daemon uses the defaults. */
export interface WebhookChannelOptions {
  /** Results remembered for replays. @default config max_results (10000) */
  readonly maxResults?: number;
  /** How long results are remembered. @default config result_retention_days (7 days) */
  readonly maxResultAgeMs?: number;
  /** Longest wait for a callback receiver. @default 30000 */
  readonly callbackTimeoutMs?: number;
  /** @default globalThis.fetch */
  readonly fetch?: typeof fetch;
}

/**
 * @example
 * // [channels.webhook] secret = "${WEBHOOK_SECRET}" — needs [gateway]
 * const channel = createWebhookChannel(config.channels.webhook!, context);
 */
export function createWebhookChannel(config: WebhookConfig, ctx: ChannelContext, options: WebhookChannelOptions = {}): Channel {
  if (!ctx.gateway) {
    throw new ConfigError(undefined, [
      { path: `channels.${ctx.name}`, problem: '[channels.webhook] needs [gateway]: POST /webhook is served by the gateway', example: '[gateway] listen = "127.0.0.1:8787"' },
    ]);
  }
  const log = ctx.log;
  if (config.legacy_signature) {
    log.warn(
      { channel: ctx.name },
      '[channels.webhook] legacy_signature = true: body-only signatures (sha256=…) are accepted, and a captured request signed that way can be sent again under a new Idempotency-Key to run a new turn; move the senders to t=…,v1=… (README, "Webhook") and remove the setting',
    );
  }
  const store = new ResultStore({
    state: ctx.state,
    legacyDir: ctx.stateDir,
    log,
    maxEntries: options.maxResults ?? config.max_results,
    maxAgeMs: options.maxResultAgeMs ?? config.result_retention_days * 86_400_000,
    maxBytes: Math.round(config.max_results_mb * 1024 * 1024),
  });
  const waiters = new Waiters();
  let current: Push | undefined;

  ctx.gateway.addRoute(
    createWebhookRoute({
      name: ctx.name,
      secret: config.secret,
      legacySignature: config.legacy_signature,
      maxBodyBytes: config.max_body_kb * 1024,
      replyTimeoutMs: config.reply_timeout_seconds * 1000,
      store,
      waiters,
      push: () => current,
      log,
      ...(ctx.storage ? { storage: ctx.storage } : {}),
    }),
  );

  return {
    name: ctx.name,

    async listen(push, signal, link) {
      await store.load();
      current = push;
      link.ready();
      log.info({ path: '/webhook', remembered: (await store.stats()).size }, 'webhook channel receiving on the gateway');
      if (!signal.aborted) await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
      current = undefined;
      // Their messages are in the inbox: 202, and the reply goes to the callback or a replay.
      waiters.releaseAll();
    },

    async send(message: OutboundMessage) {
      const id = message.replyTo;
      const record = id === undefined ? undefined : await store.get(id);
      if (id === undefined || record === undefined || record.unsolicited) {
        // A reminder, a file note, or a reply to a request forgotten long ago: there is no one to tell.
        const kept = await store.addUnsolicited(message.chat, message.text);
        log.info({ conversation: message.chat, replyTo: id, kept }, 'webhook message with no request waiting and no callback_url; kept in the webhook results only');
        return;
      }
      if (record.reply === undefined) {
        try {
          await store.addReplyTo(record, message.text);
        } catch (error) {
          // Not remembered, so not handed out: the outbox sends it again once the disk has room.
          throw ctx.storage?.failed(error, `record the reply to webhook request ${id}`) ?? error;
        }
      }
      else if (record.reply !== message.text) log.warn({ id }, 'a second reply to one webhook request; the first is kept');
      // A waiting request takes the reply; the callback gets it too when a 202 promised it
      // (or when no request waits, e.g. after a restart).
      const taken = waiters.deliver(id, message.text) > 0;
      const owed = waiters.takeOwed(id);
      if (taken && !owed) return;
      if (record.callbackUrl !== undefined) {
        await postCallback(
          record.callbackUrl,
          { id, conversation: record.conversation, reply: record.reply ?? message.text },
          { secret: config.secret, legacySignature: config.legacy_signature, ...(options.callbackTimeoutMs === undefined ? {} : { timeoutMs: options.callbackTimeoutMs }), ...(options.fetch ? { fetch: options.fetch } : {}) },
        );
        log.info({ id, conversation: record.conversation }, 'webhook reply delivered to the callback_url');
        return;
      }
      log.info({ id, conversation: record.conversation }, 'webhook reply kept for the caller (no request waiting, no callback_url): a request with the same Idempotency-Key gets it');
    },
  };
}
