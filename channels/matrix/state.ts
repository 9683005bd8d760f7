/**
 * State that must survive a restart, in the channel's own state dir (ChannelContext.stateDir):
 *
 * - `sync.json`: the /sync `next_batch` token, saved only after every event of the batch it
 *   ends was pushed (so durably in the inbox). A restart resumes from it: events from before
 *   are not seen again, events sent while the daemon was down are. A crash between a push and
 *   the save hands the batch out again, and the inbox recognises its event ids.
 * - `session.json` (password login only): the access token and device the login created, so
 *   every restart does not make a new device on the account.
 *
 * Both are tied to the homeserver and user they came from; files are written atomically, 0600.
 */
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export interface Account {
  readonly homeserver: string;
  readonly userId: string;
}

function readJson(file: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(readFileSync(file, 'utf8'));
    return typeof value === 'object' && value !== null ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

function writeJson(file: string, value: unknown): void {
  const temp = `${file}.${process.pid}.tmp`;
  writeFileSync(temp, `${JSON.stringify(value)}\n`, { mode: 0o600 });
  renameSync(temp, file);
}

/** The sync position; in memory only when there is no state dir. */
export class SyncTokenStore {
  readonly #file: string | undefined;
  readonly #account: Account;
  #token: string | undefined;
  #loaded = false;

  constructor(stateDir: string | undefined, account: Account) {
    this.#file = stateDir ? join(stateDir, 'sync.json') : undefined;
    this.#account = account;
    if (stateDir) mkdirSync(stateDir, { recursive: true, mode: 0o700 });
  }

  get(): string | undefined {
    if (!this.#loaded) {
      this.#loaded = true;
      const saved = this.#file ? readJson(this.#file) : undefined;
      if (saved && saved.homeserver === this.#account.homeserver && saved.user_id === this.#account.userId && typeof saved.next_batch === 'string') {
        this.#token = saved.next_batch;
      }
    }
    return this.#token;
  }

  set(token: string | undefined): void {
    this.#loaded = true;
    if (token === this.#token) return;
    this.#token = token;
    if (this.#file) writeJson(this.#file, { homeserver: this.#account.homeserver, user_id: this.#account.userId, next_batch: token ?? null });
  }
}

export interface Session {
  readonly accessToken: string;
  readonly deviceId?: string;
}

/** The access token a password login made, kept for the next start. */
export class SessionStore {
  readonly #file: string | undefined;
  readonly #account: Account;

  constructor(stateDir: string | undefined, account: Account) {
    this.#file = stateDir ? join(stateDir, 'session.json') : undefined;
    this.#account = account;
  }

  load(): Session | undefined {
    const saved = this.#file ? readJson(this.#file) : undefined;
    if (!saved || saved.homeserver !== this.#account.homeserver || saved.user_id !== this.#account.userId || typeof saved.access_token !== 'string') return undefined;
    return typeof saved.device_id === 'string' ? { accessToken: saved.access_token, deviceId: saved.device_id } : { accessToken: saved.access_token };
  }

  save(session: Session | undefined): void {
    if (!this.#file) return;
    writeJson(this.#file, session ? { homeserver: this.#account.homeserver, user_id: this.#account.userId, access_token: session.accessToken, device_id: session.deviceId ?? null } : {});
  }
}
