/**
 * The client-server API calls the channel makes, through matrix-js-sdk's MatrixClient
 * (its HTTP layer: auth header, MatrixError parsing, timeouts). Signs in with the access token,
 * or logs in with the password once and keeps the session in the channel state. The SDK's own
 * logging goes to our logger at debug level.
 */
import { randomUUID } from 'node:crypto';
import { ClientPrefix, createClient, MediaPrefix, Method, type IRequestOpts, type MatrixClient } from 'matrix-js-sdk';
import { logger as globalSdkLogger, type Logger as SdkLogger } from 'matrix-js-sdk/lib/logger.js';
import type { Logger } from 'pino';
import type { MatrixConfig } from './config.ts';
import { describeError, isTokenRejected, matrixFailure } from './errors.ts';
import { parseMxc, type RoomEvent } from './inbound.ts';
import type { Content } from './render.ts';
import type { SessionStore } from './state.ts';

const describePart = (part: unknown): string => {
  if (part instanceof Error) return part.message;
  if (typeof part === 'string') return part;
  try {
    return JSON.stringify(part) ?? String(part);
  } catch {
    return String(part);
  }
};

/** The SDK's logger interface, routed to ours at debug. */
export function sdkLogger(log: Logger, namespace = 'matrix-js-sdk'): SdkLogger {
  const write = (...parts: unknown[]): void => {
    if (log.isLevelEnabled('debug')) log.debug({ sdk: namespace }, parts.map(describePart).join(' '));
  };
  return { trace: write, debug: write, info: write, warn: write, error: write, getChild: (child: string) => sdkLogger(log, `${namespace}:${child}`) };
}

/**
 * The SDK's global logger (loglevel, straight to the console at debug level) goes to ours at
 * debug too: the console is where the daemon writes its JSON log lines. Process-wide, so the
 * last Matrix channel created owns it (the config has one).
 */
export function routeGlobalSdkLogger(log: Logger): void {
  const root = globalSdkLogger as unknown as { methodFactory: unknown; rebuild(): void };
  const write = sdkLogger(log).debug;
  root.methodFactory = () =>
    function (this: { prefix?: string } | undefined, ...parts: unknown[]): void {
      write(...(this?.prefix ? [this.prefix, ...parts] : parts));
    };
  root.rebuild();
}

const enc = encodeURIComponent;

export class MatrixApi {
  readonly userId: string;
  readonly homeserver: string;
  readonly #config: MatrixConfig;
  readonly #log: Logger;
  readonly #sessions: SessionStore;
  #client: MatrixClient | undefined;
  #token: string | undefined;
  #connecting: Promise<void> | undefined;

  constructor(config: MatrixConfig, log: Logger, sessions: SessionStore) {
    this.#config = config;
    this.#log = log;
    this.userId = config.user_id;
    this.homeserver = config.homeserver.replace(/\/+$/, '');
    this.#sessions = sessions;
    routeGlobalSdkLogger(log);
  }

  /** The access token in use (to keep it out of logs). */
  get token(): string | undefined {
    return this.#token ?? this.#config.access_token ?? this.#config.password;
  }

  get #sdk(): MatrixClient {
    if (!this.#client) throw new Error('not signed in to Matrix yet');
    return this.#client;
  }

  #make(accessToken: string, deviceId?: string): MatrixClient {
    this.#token = accessToken;
    return createClient({
      baseUrl: this.homeserver,
      userId: this.userId,
      accessToken,
      ...(deviceId === undefined ? {} : { deviceId }),
      logger: sdkLogger(this.#log),
    });
  }

  /** Signs in (checking the token with whoami); logs in with the password when there is no usable token. One at a time. */
  connect(signal: AbortSignal): Promise<void> {
    if (this.#client) return Promise.resolve();
    this.#connecting ??= this.#connect(signal).finally(() => {
      this.#connecting = undefined;
    });
    return this.#connecting;
  }

  async #connect(signal: AbortSignal): Promise<void> {
    if (this.#config.access_token !== undefined) {
      const client = this.#make(this.#config.access_token);
      await this.#whoami(client, signal, 'the configured access_token');
      this.#client = client;
      return;
    }
    const saved = await this.#sessions.load();
    if (saved) {
      const client = this.#make(saved.accessToken, saved.deviceId);
      try {
        await this.#whoami(client, signal, 'the saved session');
        this.#client = client;
        return;
      } catch (error) {
        if (!isTokenRejected(matrixFailure(error))) throw error;
        this.#log.info('the saved Matrix session is no longer valid; logging in again');
      }
    }
    const anonymous = createClient({ baseUrl: this.homeserver, logger: sdkLogger(this.#log) });
    let login: { user_id: string; access_token: string; device_id: string };
    try {
      const body = { type: 'm.login.password', identifier: { type: 'm.id.user', user: this.userId }, password: this.#config.password ?? '', initial_device_display_name: 'Switchboard' };
      const abortSignal = AbortSignal.any([signal, AbortSignal.timeout(30_000)]);
      login = await anonymous.http.request(Method.Post, '/login', undefined, body, { abortSignal } as IRequestOpts);
    } catch (error) {
      // eslint-disable-next-line preserve-caught-error -- the SDK's error could carry the password in its request
      throw new Error(`Matrix login as ${this.userId} failed: ${describeError(error, this.#config.password)}`);
    }
    if (login.user_id !== this.userId) throw new Error(`Matrix login returned ${login.user_id}, not the configured user_id ${this.userId}`);
    await this.#sessions.save({ accessToken: login.access_token, deviceId: login.device_id });
    this.#client = this.#make(login.access_token, login.device_id);
    this.#log.info({ user: this.userId, device: login.device_id }, 'logged in to Matrix with the password');
  }

  async #whoami(client: MatrixClient, signal: AbortSignal, what: string): Promise<void> {
    let me: { user_id: string };
    try {
      const abortSignal = AbortSignal.any([signal, AbortSignal.timeout(30_000)]);
      me = await client.http.authedRequest<{ user_id: string }>(Method.Get, '/account/whoami', {}, undefined, { abortSignal, inhibitLogoutEmit: true } as IRequestOpts);
    } catch (error) {
      if (isTokenRejected(matrixFailure(error))) {
        throw Object.assign(new Error(`Matrix rejected ${what} (M_UNKNOWN_TOKEN): set a valid access_token, or a password to log in with`), { errcode: 'M_UNKNOWN_TOKEN' });
      }
      throw error;
    }
    if (me.user_id !== this.userId) throw new Error(`the Matrix access token belongs to ${me.user_id}, not the configured user_id ${this.userId}`);
  }

  /** Forgets the session after the server rejected its token (the next connect logs in again). */
  async dropSession(): Promise<void> {
    this.#client?.stopClient();
    this.#client = undefined;
    if (this.#config.access_token === undefined) await this.#sessions.save(undefined);
  }

  /**
   * One API request, given up after `timeoutMs` (default 60 s). The timeout is ours, not the
   * SDK's `localTimeoutMs`: that one leaves a timer behind which keeps the process alive.
   */
  request<T>(method: Method, path: string, query: Record<string, string> = {}, body?: Content, options: { signal?: AbortSignal; timeoutMs?: number; prefix?: string } = {}): Promise<T> {
    const timeout = AbortSignal.timeout(options.timeoutMs ?? 60_000);
    return this.#sdk.http.authedRequest<T>(method, path, query, body, {
      abortSignal: options.signal ? AbortSignal.any([options.signal, timeout]) : timeout,
      ...(options.prefix === undefined ? {} : { prefix: options.prefix }),
    } as IRequestOpts);
  }

  /** Uploads a sync filter; returns its id. */
  async createFilter(definition: Content, signal: AbortSignal): Promise<string> {
    const res = await this.request<{ filter_id: string }>(Method.Post, `/user/${enc(this.userId)}/filter`, {}, definition, { signal });
    return res.filter_id;
  }

  /** Joins a room by id or alias; returns the room id. */
  async join(idOrAlias: string, signal?: AbortSignal): Promise<string> {
    const res = await this.request<{ room_id: string }>(Method.Post, `/join/${enc(idOrAlias)}`, {}, {}, signal ? { signal } : {});
    return res.room_id;
  }

  /** Sends one room event; the same txnId again is the same event (the server deduplicates). */
  async send(roomId: string, content: Content, txnId: string = randomUUID(), type = 'm.room.message'): Promise<string> {
    const res = await this.request<{ event_id: string }>(Method.Put, `/rooms/${enc(roomId)}/send/${enc(type)}/${enc(txnId)}`, {}, content, { timeoutMs: 30_000 });
    return res.event_id;
  }

  async typing(roomId: string, typing: boolean): Promise<void> {
    await this.request(Method.Put, `/rooms/${enc(roomId)}/typing/${enc(this.userId)}`, {}, typing ? { typing: true, timeout: 30_000 } : { typing: false }, { timeoutMs: 10_000 });
  }

  /** Room history backwards from `from` (a prev_batch) down to `to` (a sync token), newest first. */
  async messages(roomId: string, from: string, to: string, types: readonly string[]): Promise<{ chunk?: RoomEvent[]; end?: string }> {
    const query = { dir: 'b', from, to, limit: '100', filter: JSON.stringify({ types }) };
    return this.request(Method.Get, `/rooms/${enc(roomId)}/messages`, query, undefined, { timeoutMs: 30_000 });
  }

  async fetchEvent(roomId: string, eventId: string): Promise<{ sender?: string }> {
    return this.request(Method.Get, `/rooms/${enc(roomId)}/event/${enc(eventId)}`, {}, undefined, { timeoutMs: 10_000 });
  }

  async displayName(): Promise<string | undefined> {
    try {
      const res = await this.request<{ displayname?: string }>(Method.Get, `/profile/${enc(this.userId)}/displayname`, {}, undefined, { timeoutMs: 10_000 });
      return res.displayname;
    } catch {
      return undefined; // no display name set
    }
  }

  /**
   * The homeserver's upload limit (`m.upload.size`, bytes), or undefined when it does not say.
   * Authenticated media first (GET /_matrix/client/v1/media/config, spec v1.11:
   * matrix-org/matrix-spec data/api/client-server/authed-content-repo.yaml), the legacy
   * /_matrix/media/v3/config (content-repo.yaml) when the server does not know v1.
   */
  async uploadLimit(): Promise<number | undefined> {
    let config: { 'm.upload.size'?: unknown };
    try {
      config = await this.request(Method.Get, '/media/config', {}, undefined, { prefix: ClientPrefix.V1, timeoutMs: 10_000 });
    } catch (error) {
      const failure = matrixFailure(error);
      const unrecognised = failure?.errcode === 'M_UNRECOGNIZED' || failure?.httpStatus === 404 || failure?.httpStatus === 405 || failure?.httpStatus === 400;
      if (!unrecognised) throw error;
      config = await this.request(Method.Get, '/config', {}, undefined, { prefix: MediaPrefix.V3, timeoutMs: 10_000 });
    }
    const size = config['m.upload.size'];
    return typeof size === 'number' && Number.isFinite(size) && size > 0 ? size : undefined;
  }

  async upload(data: Uint8Array, name: string, mime: string): Promise<string> {
    const abortController = new AbortController();
    const timer = setTimeout(() => abortController.abort(), 120_000).unref();
    try {
      const res = await this.#sdk.uploadContent(data as unknown as Blob, { name, type: mime, abortController });
      return res.content_uri;
    } finally {
      clearTimeout(timer);
    }
  }

  /** Downloads a file people sent: authenticated media first, the legacy endpoint when the server has no v1. */
  async download(mxc: string, signal: AbortSignal): Promise<AsyncIterable<Uint8Array>> {
    const parts = parseMxc(mxc);
    if (!parts) throw new Error(`not an mxc:// URI: ${mxc}`);
    const path = `${enc(parts.server)}/${enc(parts.mediaId)}`;
    const headers = { Authorization: `Bearer ${this.#token ?? ''}` };
    let response = await fetch(`${this.homeserver}${ClientPrefix.V1}/media/download/${path}`, { headers, signal });
    if (response.status === 404 || response.status === 405 || response.status === 400) {
      const unrecognised = response.status !== 404 || ((await response.clone().json().catch(() => ({}))) as { errcode?: string }).errcode === 'M_UNRECOGNIZED';
      if (unrecognised) {
        await response.body?.cancel();
        response = await fetch(`${this.homeserver}/_matrix/media/v3/download/${path}`, { headers, signal });
      }
    }
    if (!response.ok || !response.body) {
      await response.body?.cancel();
      throw new Error(`media download failed: HTTP ${response.status}`);
    }
    return response.body as unknown as AsyncIterable<Uint8Array>;
  }
}
