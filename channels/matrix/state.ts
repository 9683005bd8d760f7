/**
 * State that must survive a restart, and a takeover by another node of a cluster, in the
 * channel state store (ChannelContext.state):
 *
 * - `sync`: the /sync `next_batch` token, saved only after every event of the batch it ends
 *   was pushed (so durably in the inbox). A restart resumes from it: events from before are not
 *   seen again, events sent while the channel was down are. A crash between a push and the
 *   save hands the batch out again, and the inbox recognises its event ids.
 * - `session` (password login only): the access token and device the login created, so every
 *   start (on any node) does not make a new device on the account.
 *
 * Both are tied to the homeserver and user they came from. Earlier versions kept them in
 * `sync.json` and `session.json` in the state dir: imported from there once.
 */
import type { Logger } from 'pino';
import type { ChannelState } from '../../src/channel-state.ts';
import { importStateFile } from '../../src/state-import.ts';

export interface Account {
  readonly homeserver: string;
  readonly userId: string;
}

/** Where the old files may be, and where to log their import. */
export interface Legacy {
  /** The channel's state dir ('' or undefined: none). */
  readonly dir: string | undefined;
  readonly log: Logger;
}

function parse(text: string | undefined): Record<string, unknown> | undefined {
  if (text === undefined) return undefined;
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === 'object' && value !== null ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** Reads `key` (after importing `file`, the form earlier versions kept it in, once). */
async function read(state: ChannelState, key: string, file: string, legacy: Legacy): Promise<Record<string, unknown> | undefined> {
  await importStateFile({
    dir: legacy.dir,
    file,
    log: legacy.log,
    stored: async () => (await state.get(key)) !== undefined,
    load: async (text) => {
      const saved = parse(text);
      if (!saved) return 0;
      await state.put(key, JSON.stringify(saved));
      return 1;
    },
  });
  return parse(await state.get(key));
}

/** The sync position. `load` when a listen starts (another node may have moved it meanwhile), then `get`/`set`. */
export class SyncTokenStore {
  readonly #state: ChannelState;
  readonly #account: Account;
  readonly #legacy: Legacy;
  #token: string | undefined;

  constructor(state: ChannelState, account: Account, legacy: Legacy) {
    this.#state = state;
    this.#account = account;
    this.#legacy = legacy;
  }

  /** Reads the saved token (one of another homeserver or user is not ours). */
  async load(): Promise<string | undefined> {
    const saved = await read(this.#state, 'sync', 'sync.json', this.#legacy);
    this.#token =
      saved && saved.homeserver === this.#account.homeserver && saved.user_id === this.#account.userId && typeof saved.next_batch === 'string' ? saved.next_batch : undefined;
    return this.#token;
  }

  /** The token as last loaded or set. */
  get(): string | undefined {
    return this.#token;
  }

  /** Saves the token (committed when this resolves; rejects, keeping the old one, when it cannot be). */
  async set(token: string | undefined): Promise<void> {
    if (token === this.#token) return;
    await this.#state.put('sync', JSON.stringify({ homeserver: this.#account.homeserver, user_id: this.#account.userId, next_batch: token ?? null }));
    this.#token = token;
  }
}

export interface Session {
  readonly accessToken: string;
  readonly deviceId?: string;
}

/** The access token a password login made, kept for the next start. */
export class SessionStore {
  readonly #state: ChannelState;
  readonly #account: Account;
  readonly #legacy: Legacy;

  constructor(state: ChannelState, account: Account, legacy: Legacy) {
    this.#state = state;
    this.#account = account;
    this.#legacy = legacy;
  }

  async load(): Promise<Session | undefined> {
    const saved = await read(this.#state, 'session', 'session.json', this.#legacy);
    if (!saved || saved.homeserver !== this.#account.homeserver || saved.user_id !== this.#account.userId || typeof saved.access_token !== 'string') return undefined;
    return typeof saved.device_id === 'string' ? { accessToken: saved.access_token, deviceId: saved.device_id } : { accessToken: saved.access_token };
  }

  async save(session: Session | undefined): Promise<void> {
    await this.#state.put(
      'session',
      JSON.stringify(session ? { homeserver: this.#account.homeserver, user_id: this.#account.userId, access_token: session.accessToken, device_id: session.deviceId ?? null } : {}),
    );
  }
}
