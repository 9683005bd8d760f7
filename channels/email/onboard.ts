/** What `switchboard onboard` asks for email, and the `[channels.email]` table it writes. */
import { field, askSecret, list, q, type ChannelTable, type Prompt } from '../../src/setup/onboard.ts';
import { EmailSchema } from './config.ts';

export async function onboard(ask: Prompt): Promise<ChannelTable> {
  const address = await ask.text("Email: the bot's own address (it answers every unread mail from allowed senders there)", '', field(EmailSchema, 'address'));
  const domain = address.split('@')[1] ?? 'example.org';
  const imap = await ask.text('Email: IMAP server (TLS, port 993)', `mail.${domain}`, field(EmailSchema, 'imap', 'host'));
  const smtp = await ask.text('Email: SMTP server (TLS, port 465)', imap, field(EmailSchema, 'smtp', 'host'));
  const user = await ask.text('Email: login name on both', address, field(EmailSchema, 'imap', 'user'));
  const password = await askSecret(ask, 'Email: environment variable for the password', 'EMAIL_PASSWORD', "the mailbox's password (an app password where the provider has them)");
  const allowed = await ask.list('Email: addresses that may write, comma-separated, e.g. alice@example.org, *@example.org (required: strangers are never answered)', [], field(EmailSchema, 'allow', '0'), true);
  const server = (host: string): string => `{ host = ${q(host)}, user = ${q(user)}, password = "\${${password.env}}" }`;
  return {
    lines: [`address = ${q(address)}`, '# Implicit TLS on 993 / 465 by default; add port = …, tls = false for STARTTLS servers.', `imap = ${server(imap)}`, `smtp = ${server(smtp)}`, `allow = ${list(allowed)}`],
    secrets: [password],
  };
}
