/** `[channels.email]`: the keys, their defaults and an example of each (errors quote it). */
import * as v from 'valibot';
import { int, positive, text, textOr } from '../../src/config/fields.ts';

const mailServer = (port: number) =>
  v.strictObject({
    host: text('mail.example.org'),
    port: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(65_535), v.examples([port]))),
    /** Implicit TLS (993 / 465); false = plain, upgraded with STARTTLS when the server offers it. */
    tls: v.optional(v.pipe(v.boolean(), v.examples([true])), true),
    user: text('bot@example.org'),
    password: text('${EMAIL_PASSWORD}'),
  });

export const EmailSchema = v.strictObject({
  /** The bot's address: replies come from it. */
  address: v.pipe(v.string(), v.regex(/^[^@\s]+@[^@\s]+$/, 'an email address, name@domain'), v.examples(['bot@example.org'])),
  imap: mailServer(993),
  smtp: mailServer(465),
  /** Sender addresses (or globs like "*@example.org") answered; required: strangers are never answered (no backscatter). */
  allow: v.pipe(v.array(text('alice@example.org')), v.minLength(1), v.examples([['alice@example.org', '*@example.org']])),
  folder: textOr('INBOX', 'INBOX'),
  /** Polling interval when IDLE is unavailable or as a safety net (seconds). */
  poll_seconds: int(5, 86_400, 60),
  /** Mails larger than this are not read (bytes of the whole message, MB). */
  max_message_mb: positive(200, 25),
  /** Send an HTML part next to the plain text. */
  html: v.optional(v.pipe(v.boolean(), v.examples([false])), false),
});

/** The validated `[channels.email]` table, defaults filled in. */
export type EmailConfig = v.InferOutput<typeof EmailSchema>;
