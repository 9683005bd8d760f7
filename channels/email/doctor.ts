/** `switchboard doctor` for email: the IMAP and SMTP servers greet on host / port / tls (no login). */
import { checkGreeting, type CheckResult } from '../../src/setup/probe.ts';
import type { EmailConfig } from './config.ts';

export function probe({ imap, smtp }: EmailConfig, timeoutMs: number): Promise<CheckResult[]> {
  return Promise.all([
    checkGreeting('channel email (IMAP)', { host: imap.host, port: imap.port ?? (imap.tls ? 993 : 143), tls: imap.tls }, undefined, /^\* (OK|PREAUTH)/, timeoutMs, 'channels.email.imap host / port / tls'),
    checkGreeting('channel email (SMTP)', { host: smtp.host, port: smtp.port ?? (smtp.tls ? 465 : 587), tls: smtp.tls }, undefined, /^220/, timeoutMs, 'channels.email.smtp host / port / tls'),
  ]);
}
