/**
 * What `switchboard doctor`'s checks that reach out are made of — a request with a deadline,
 * a greeting read off a socket, a line of the report — with plain fetch and sockets, never the
 * platform SDKs, which take hundreds of ms to load and retry on their own. Every check has a
 * deadline and never throws. app/doctor-remote.ts checks the model endpoint with them; each
 * channel's doctor.ts (its module's `probe`) checks its own credentials.
 */
import { connect as tcpConnect, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';

/** One line of the doctor's report. */
export interface CheckResult {
  readonly check: string;
  readonly ok: boolean;
  readonly detail: string;
  /** What to do about it (a failed check always has one). */
  readonly fix?: string;
  /** Passed, but worth a look (e.g. little free disk). */
  readonly warning?: boolean;
}

export const pass = (check: string, detail: string): CheckResult => ({ check, ok: true, detail });
export const failed = (check: string, detail: string, fix: string): CheckResult => ({ check, ok: false, detail, fix });

/** A GET/POST with a deadline; network failures come back as `{ error }`, never thrown. */
export async function request(url: string, init: RequestInit, timeoutMs: number): Promise<{ status: number; body: unknown } | { error: string }> {
  try {
    const response = await fetch(url, { ...init, signal: AbortSignal.timeout(timeoutMs), redirect: 'manual' });
    const text = await response.text();
    let body: unknown = text;
    try {
      body = JSON.parse(text);
    } catch {
      // not JSON: keep the text
    }
    return { status: response.status, body };
  } catch (error) {
    return { error: networkError(error, timeoutMs) };
  }
}

function networkError(error: unknown, timeoutMs: number): string {
  if (error instanceof Error && (error.name === 'TimeoutError' || error.name === 'AbortError')) return `no answer within ${timeoutMs / 1000} s`;
  const cause = error instanceof Error ? (error.cause as { code?: string; message?: string } | undefined) : undefined;
  return cause?.code ?? cause?.message ?? (error instanceof Error ? error.message : String(error));
}

/** Removes every secret from text that may echo a URL or an error. */
export const redact = (text: string, secrets: readonly (string | undefined)[]): string =>
  secrets.reduce<string>((out, secret) => (secret && secret.length >= 4 ? out.split(secret).join('***') : out), text);

export const errorMessage = (body: unknown): string => {
  if (typeof body === 'string') return body.slice(0, 200);
  const record = body as { error?: { message?: string } | string; message?: string; description?: string; errcode?: string } | null;
  if (record === null || typeof record !== 'object') return '';
  if (typeof record.error === 'string') return record.error;
  return record.error?.message ?? record.description ?? record.message ?? record.errcode ?? '';
};

/** Connects (TLS when asked, certificates verified), optionally says something, and waits for the first line. */
export function checkGreeting(
  name: string,
  target: { host: string; port: number; tls: boolean },
  say: string | undefined,
  expect: RegExp,
  timeoutMs: number,
  keys: string,
): Promise<CheckResult> {
  const where = `${target.host}:${target.port}${target.tls ? ' (TLS)' : ''}`;
  return new Promise((resolve) => {
    let settled = false;
    let buffer = '';
    const socket: Socket = target.tls
      ? tlsConnect({ host: target.host, port: target.port, servername: target.host }, () => say && socket.write(say))
      : tcpConnect({ host: target.host, port: target.port }, () => say && socket.write(say));
    const done = (result: CheckResult): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      resolve(result);
    };
    const timer = setTimeout(() => done(failed(name, `${where}: no greeting within ${timeoutMs / 1000} s`, `check ${keys} (a TLS port spoken to in plain text, or the reverse, stays silent)`)), timeoutMs);
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      buffer += chunk;
      const line = buffer.split(/\r?\n/)[0]!;
      if (!buffer.includes('\n')) return;
      if (expect.test(line)) done(pass(name, `${where} answered: ${line.slice(0, 80)}`));
      else done(failed(name, `${where} answered unexpectedly: ${line.slice(0, 80)}`, `check ${keys}`));
    });
    socket.on('error', (error: NodeJS.ErrnoException) => {
      const tlsProblem = /certificate|self.signed|SSL|TLS|wrong version/i.test(error.message);
      done(failed(name, `${where}: ${error.code ?? error.message}`, tlsProblem ? `check ${keys}; for a private CA set NODE_EXTRA_CA_CERTS` : `check ${keys} and that the server is up`));
    });
    socket.on('close', () => done(failed(name, `${where} closed the connection without a greeting`, `check ${keys}`)));
  });
}
