/**
 * The checks of `switchboard doctor` that reach out: the model endpoint (one cheap
 * authenticated call) and each channel's credentials (the platform's cheapest identity call),
 * with plain fetch and sockets — never the platform SDKs, which take hundreds of ms to load
 * and retry on their own. Every check has a deadline and never throws.
 */
import { connect as tcpConnect, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import type { Config, EndpointConfig } from '../src/config/schema.ts';

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

const pass = (check: string, detail: string): CheckResult => ({ check, ok: true, detail });
const failed = (check: string, detail: string, fix: string): CheckResult => ({ check, ok: false, detail, fix });

/** A GET/POST with a deadline; network failures come back as `{ error }`, never thrown. */
async function request(url: string, init: RequestInit, timeoutMs: number): Promise<{ status: number; body: unknown } | { error: string }> {
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
const redact = (text: string, secrets: readonly (string | undefined)[]): string =>
  secrets.reduce<string>((out, secret) => (secret && secret.length >= 4 ? out.split(secret).join('***') : out), text);

const errorMessage = (body: unknown): string => {
  if (typeof body === 'string') return body.slice(0, 200);
  const record = body as { error?: { message?: string } | string; message?: string; description?: string; errcode?: string } | null;
  if (record === null || typeof record !== 'object') return '';
  if (typeof record.error === 'string') return record.error;
  return record.error?.message ?? record.description ?? record.message ?? record.errcode ?? '';
};

/** The model endpoint: list its models (free, authenticated); a server without /models gets one tiny chat call. */
export async function checkEndpoint(name: string, endpoint: EndpointConfig, timeoutMs: number, chatProbe: () => Promise<void>): Promise<CheckResult> {
  const key = endpoint.api_key ?? endpoint.api_keys[0];
  let url: string;
  const headers: Record<string, string> = {};
  switch (endpoint.kind) {
    case 'openai':
      url = `${(endpoint.base_url ?? 'https://api.openai.com/v1').replace(/\/+$/, '')}/models`;
      if (key) headers.authorization = `Bearer ${key}`;
      break;
    case 'anthropic':
      url = `${(endpoint.base_url ?? 'https://api.anthropic.com').replace(/\/+$/, '').replace(/\/v1$/, '')}/v1/models`;
      headers['anthropic-version'] = '2023-06-01';
      if (key) headers['x-api-key'] = key;
      break;
    case 'gemini':
      url = `${(endpoint.base_url ?? 'https://generativelanguage.googleapis.com/v1beta').replace(/\/+$/, '')}/models`;
      if (key) headers['x-goog-api-key'] = key;
      break;
  }
  const where = `${endpoint.kind} ${endpoint.model} at ${new URL(url).origin}`;
  const keyHint = endpoint.api_key === undefined ? 'set provider.api_key (e.g. "${OPENAI_API_KEY}")' : 'check the key in provider.api_key (and the environment variable it reads)';
  const answer = await request(url, { headers }, timeoutMs);
  if ('error' in answer) {
    return failed(name, `${where} unreachable: ${redact(answer.error, [key])}`, `check provider.base_url, the network, and that the server is running`);
  }
  if (answer.status === 401 || answer.status === 403) {
    const refused = key === undefined ? 'asks for a key, and none is configured' : 'refused the key';
    return failed(name, `${where} ${refused} (HTTP ${answer.status}: ${redact(errorMessage(answer.body), [key])})`, keyHint);
  }
  // Say what was checked: a server that needs no key (Ollama) answers without one.
  const noKey = key === undefined ? ' (no key configured; the endpoint answered without one)' : '';
  if (answer.status === 404 || answer.status === 405) {
    // Some OpenAI-compatible servers have no /models: one real chat call instead.
    try {
      await chatProbe();
      return pass(name, `${where} answered a test message${noKey}`);
    } catch (error) {
      const text = redact(error instanceof Error ? error.message : String(error), [key]);
      const auth = /\b(401|403)\b/.test(text);
      return failed(name, `${where}: ${text}`, auth ? keyHint : 'check provider.base_url (the URL before /chat/completions) and provider.model');
    }
  }
  if (answer.status < 200 || answer.status >= 300) {
    return failed(name, `${where} answered HTTP ${answer.status}: ${redact(errorMessage(answer.body), [key])}`, 'check provider.base_url; retry later if the service is having trouble');
  }
  const listed = ((answer.body as { data?: Array<{ id?: string }>; models?: Array<{ name?: string; id?: string }> } | null)?.data ??
    (answer.body as { models?: Array<{ name?: string; id?: string }> } | null)?.models ??
    []) as Array<{ id?: string; name?: string }>;
  const ids = listed.map((model) => (model.id ?? model.name ?? '').replace(/^models\//, ''));
  const accepted = key === undefined ? 'no key configured; the endpoint answered without one' : 'key accepted';
  if (ids.length > 0 && !ids.some((id) => id === endpoint.model || id.startsWith(`${endpoint.model}:`))) {
    return { check: name, ok: true, warning: true, detail: `${where}: ${accepted}, but "${endpoint.model}" is not among its ${ids.length} models`, fix: `check provider.model; it offers e.g. ${ids.slice(0, 5).join(', ')}` };
  }
  return pass(name, `${where}: ${accepted}${ids.length > 0 ? ', model available' : ''}`);
}

type ChannelsConfig = Config['channels'];

/** One check per configured channel (the terminal needs none). */
export function checkChannels(channels: ChannelsConfig, timeoutMs: number): Array<Promise<CheckResult>> {
  const checks: Array<Promise<CheckResult>> = [];
  if (channels.telegram) checks.push(checkTelegram(channels.telegram, timeoutMs));
  if (channels.discord) checks.push(checkDiscord(channels.discord, timeoutMs));
  if (channels.slack) checks.push(checkSlack(channels.slack, timeoutMs));
  if (channels.matrix) checks.push(checkMatrix(channels.matrix, timeoutMs));
  if (channels.irc) {
    const irc = channels.irc;
    checks.push(checkGreeting('channel irc', { host: irc.host, port: irc.port ?? (irc.tls ? 6697 : 6667), tls: irc.tls }, 'CAP LS 302\r\n', /./, timeoutMs, 'channels.irc host / port / tls'));
  }
  if (channels.email) {
    const { imap, smtp } = channels.email;
    checks.push(checkGreeting('channel email (IMAP)', { host: imap.host, port: imap.port ?? (imap.tls ? 993 : 143), tls: imap.tls }, undefined, /^\* (OK|PREAUTH)/, timeoutMs, 'channels.email.imap host / port / tls'));
    checks.push(checkGreeting('channel email (SMTP)', { host: smtp.host, port: smtp.port ?? (smtp.tls ? 465 : 587), tls: smtp.tls }, undefined, /^220/, timeoutMs, 'channels.email.smtp host / port / tls'));
  }
  return checks;
}

async function checkTelegram(config: NonNullable<ChannelsConfig['telegram']>, timeoutMs: number): Promise<CheckResult> {
  const name = 'channel telegram';
  const root = (config.api_root ?? 'https://api.telegram.org').replace(/\/+$/, '');
  const answer = await request(`${root}/bot${config.token}/getMe`, {}, timeoutMs);
  if ('error' in answer) return failed(name, `${new URL(root).host} unreachable: ${redact(answer.error, [config.token])}`, 'check the network (and channels.telegram.api_root if set)');
  const body = answer.body as { ok?: boolean; result?: { username?: string }; description?: string };
  if (answer.status === 401 || answer.status === 404) {
    return failed(name, `the bot token was rejected (HTTP ${answer.status}${body?.description ? `: ${redact(body.description, [config.token])}` : ''})`, 'copy the token from @BotFather (/token) into channels.telegram.token (e.g. "${TELEGRAM_BOT_TOKEN}")');
  }
  if (body?.ok !== true) return failed(name, `getMe answered HTTP ${answer.status}: ${redact(errorMessage(answer.body), [config.token])}`, 'retry later; check channels.telegram.api_root if set');
  return pass(name, `token valid: @${body.result?.username ?? '?'}`);
}

async function checkDiscord(config: NonNullable<ChannelsConfig['discord']>, timeoutMs: number): Promise<CheckResult> {
  const name = 'channel discord';
  const api = (config.api_base ?? 'https://discord.com/api').replace(/\/+$/, '');
  const answer = await request(`${api}/v10/users/@me`, { headers: { authorization: `Bot ${config.token}` } }, timeoutMs);
  if ('error' in answer) return failed(name, `${new URL(api).host} unreachable: ${redact(answer.error, [config.token])}`, 'check the network (and channels.discord.api_base if set)');
  if (answer.status === 401) return failed(name, 'the bot token was rejected (HTTP 401)', 'Developer Portal → your application → Bot → Reset Token; put it in channels.discord.token (e.g. "${DISCORD_BOT_TOKEN}")');
  const body = answer.body as { username?: string; bot?: boolean };
  if (answer.status !== 200) return failed(name, `GET /users/@me answered HTTP ${answer.status}: ${redact(errorMessage(answer.body), [config.token])}`, 'retry later');
  return pass(name, `token valid: ${body.username ?? '?'}${body.bot === false ? ' (not a bot account!)' : ''}`);
}

async function checkSlack(config: NonNullable<ChannelsConfig['slack']>, timeoutMs: number): Promise<CheckResult> {
  const name = 'channel slack';
  const api = config.api_url ?? 'https://slack.com/api/';
  const answer = await request(`${api.endsWith('/') ? api : `${api}/`}auth.test`, { method: 'POST', headers: { authorization: `Bearer ${config.bot_token}` } }, timeoutMs);
  if ('error' in answer) return failed(name, `${new URL(api).host} unreachable: ${redact(answer.error, [config.bot_token])}`, 'check the network (and channels.slack.api_url if set)');
  const body = answer.body as { ok?: boolean; error?: string; user?: string; team?: string };
  if (body?.ok !== true) {
    const auth = ['invalid_auth', 'not_authed', 'account_inactive', 'token_revoked', 'token_expired'].includes(body?.error ?? '');
    return failed(name, `auth.test failed: ${body?.error ?? `HTTP ${answer.status}`}`, auth ? 'reinstall the app to the workspace and copy the Bot User OAuth Token (xoxb-…) into channels.slack.bot_token' : 'retry later');
  }
  const socket = config.app_token !== undefined && !config.app_token.startsWith('xapp-') ? ' — but app_token does not start with xapp-' : '';
  if (socket) return failed(name, `bot token valid (${body.user ?? '?'} in ${body.team ?? '?'})${socket}`, 'Basic Information → App-Level Tokens: create one with connections:write and put it in channels.slack.app_token');
  return pass(name, `bot token valid: ${body.user ?? '?'} in ${body.team ?? '?'}`);
}

async function checkMatrix(config: NonNullable<ChannelsConfig['matrix']>, timeoutMs: number): Promise<CheckResult> {
  const name = 'channel matrix';
  const base = config.homeserver.replace(/\/+$/, '');
  const secrets = [config.access_token, config.password];
  if (config.access_token === undefined) {
    const answer = await request(`${base}/_matrix/client/versions`, {}, timeoutMs);
    if ('error' in answer || answer.status !== 200) {
      return failed(name, `homeserver ${base} unreachable: ${'error' in answer ? answer.error : `HTTP ${answer.status}`}`, 'check channels.matrix.homeserver');
    }
    return pass(name, `homeserver ${base} reachable (password login is not tried by doctor)`);
  }
  const answer = await request(`${base}/_matrix/client/v3/account/whoami`, { headers: { authorization: `Bearer ${config.access_token}` } }, timeoutMs);
  if ('error' in answer) return failed(name, `homeserver ${base} unreachable: ${redact(answer.error, secrets)}`, 'check channels.matrix.homeserver and the network');
  const body = answer.body as { user_id?: string; errcode?: string };
  if (answer.status === 401 || answer.status === 403) {
    return failed(name, `the access token was rejected (${body?.errcode ?? `HTTP ${answer.status}`})`, 'log the bot in again and put the new token in channels.matrix.access_token, or use password instead');
  }
  if (answer.status !== 200) return failed(name, `whoami answered HTTP ${answer.status}: ${redact(errorMessage(answer.body), secrets)}`, 'check channels.matrix.homeserver');
  if (body.user_id !== config.user_id) return failed(name, `the token belongs to ${body.user_id ?? '?'}, not ${config.user_id}`, `set channels.matrix.user_id = "${body.user_id ?? ''}" or use the bot's own token`);
  return pass(name, `access token valid: ${body.user_id}`);
}

/** Connects (TLS when asked, certificates verified), optionally says something, and waits for the first line. */
function checkGreeting(
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
