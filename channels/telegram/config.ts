/** `[channels.telegram]`: the keys, their defaults and an example of each (errors quote it). */
import * as v from 'valibot';
import { int, listenAddress, policy, text } from '../../src/config/fields.ts';

export const TelegramSchema = v.strictObject({
  token: text('${TELEGRAM_BOT_TOKEN}'),
  /** Bot API server (a local Bot API server or a test peer). */
  api_root: v.optional(v.pipe(v.string(), v.regex(/^https?:\/\/\S+$/, 'an http:// or https:// URL'), v.examples(['https://api.telegram.org']))),
  /** Seconds a getUpdates long poll is held open. */
  poll_timeout_seconds: int(1, 50, 25),
  /** Webhook mode instead of long polling: Telegram POSTs updates to `url`, served on `listen`. */
  webhook: v.optional(
    v.strictObject({
      url: v.pipe(v.string(), v.regex(/^https:\/\/\S+$/, 'an https:// URL (Telegram sends webhooks only over HTTPS)'), v.examples(['https://bot.example.org/telegram'])),
      listen: v.optional(listenAddress('127.0.0.1:8443'), '127.0.0.1:8443'),
      /**
       * Checked against X-Telegram-Bot-Api-Secret-Token. Telegram's setWebhook takes 1–256
       * characters of A-Z a-z 0-9 _ - only (tdlib/telegram-bot-api Client.cpp: "secret token
       * contains unallowed characters"), so a base64 secret would fail at every start. A check,
       * not a regex: its error must not quote the secret. An unresolved ${…} (commands that
       * need no secrets) passes.
       */
      secret: v.pipe(
        v.string(),
        v.nonEmpty(),
        v.check(
          (secret) => /^[A-Za-z0-9_-]{1,256}$/.test(secret) || secret.includes('${'),
          'Telegram takes 1–256 characters of A-Z, a-z, 0-9, _ and - only (no +, /, = or spaces: not base64); make one with: openssl rand -hex 32',
        ),
        v.examples(['${TELEGRAM_WEBHOOK_SECRET}']),
      ),
    }),
  ),
  ...policy,
});

/** The validated `[channels.telegram]` table, defaults filled in. */
export type TelegramConfig = v.InferOutput<typeof TelegramSchema>;
