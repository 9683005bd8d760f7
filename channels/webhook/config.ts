/** `[channels.webhook]`: the keys, their defaults and an example of each (errors quote it). */
import * as v from 'valibot';
import { int, positive, text } from '../../src/config/fields.ts';

/** The generic webhook channel, served by the gateway at POST /webhook. */
export const WebhookSchema = v.strictObject({
  /** HMAC-SHA256 key: X-Switchboard-Signature: t=<unix>,v1=<hex HMAC of "<t>.<Idempotency-Key>.<raw body>">. */
  secret: text('${WEBHOOK_SECRET}'),
  /** Also accept the old body-only signature (sha256=<hex of the body>), which a captured request can be replayed with under a new key; for migrating senders only. */
  legacy_signature: v.optional(v.pipe(v.boolean(), v.examples([false])), false),
  /** Largest request body (KB), read only after the signature header passed; larger gets 413. Capped by [gateway] max_body_kb. */
  max_body_kb: int(1, 65_536, 64),
  /** How long a request waits for the reply before answering 202 (the reply then goes to callback_url, if given). */
  reply_timeout_seconds: positive(3600, 120),
  /** Sender ids let through; ["*"] = anyone (the signature already proves the caller). */
  allow: v.optional(v.pipe(v.array(text('*')), v.examples([['*']])), ['*']),
  /** Requests remembered for replays (Idempotency-Key → reply), in the database (channel state); the oldest are forgotten first. */
  max_results: int(1, 1_000_000, 10_000),
  /** How long a request is remembered (days); a replay after that runs again. */
  result_retention_days: positive(3650, 7),
  /** Most megabytes the remembered requests and replies take (their JSON, in the database); the oldest are forgotten first. */
  max_results_mb: positive(1024, 16),
});

/** The validated `[channels.webhook]` table, defaults filled in. */
export type WebhookConfig = v.InferOutput<typeof WebhookSchema>;
