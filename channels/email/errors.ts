/** SMTP failures as the outbox needs them: 4xx and network trouble retry, 5xx is final. */
import { SendError } from '../../src/channel.ts';

interface SmtpErrorFields {
  readonly code?: unknown;
  readonly responseCode?: unknown;
  readonly response?: unknown;
  readonly message?: unknown;
}

/** One line describing a nodemailer error (never the credentials: nodemailer does not put them in errors). */
export function describeSmtpError(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const fields = error as SmtpErrorFields;
  const parts = [typeof fields.code === 'string' ? fields.code : undefined, typeof fields.response === 'string' ? fields.response : error.message];
  return parts.filter(Boolean).join(': ');
}

/**
 * 5xx: the server refused for good (recipient unknown, message rejected) — retrying the same
 * mail cannot help. A failed login (535) is the exception: it is the bot's configuration, not
 * the message, and it works again once the password is fixed. 4xx, timeouts and refused
 * connections are temporary.
 */
export function toSendError(error: unknown, what: string): SendError {
  const fields = (error ?? {}) as SmtpErrorFields;
  const status = typeof fields.responseCode === 'number' ? fields.responseCode : undefined;
  const auth = fields.code === 'EAUTH';
  const permanent = !auth && ((status !== undefined && status >= 500 && status < 600) || (status === undefined && fields.code === 'EENVELOPE'));
  return new SendError(`${what}: ${describeSmtpError(error)}`, { permanent, cause: error });
}
