/**
 * The /sync loop: our own, on the SDK's HTTP layer, because the ack point matters. Every
 * response is handled completely — each message pushed, so durably in the inbox — before its
 * `next_batch` is saved and asked for; a crash in between makes the next start ask with the
 * old token again, and the inbox recognises the event ids it already has.
 *
 * The first sync of a listen: with a saved token, `since` = that token and `full_state` (the
 * room state the channel needs after a restart, plus exactly the events it has not handled);
 * without one (the very first start), an initial sync whose timeline is history, not answered.
 */
import { Method } from 'matrix-js-sdk';
import type { Logger } from 'pino';
import { pause } from '../../src/abort.ts';
import type { ListenLink } from '../../src/channel.ts';
import { whileAlive } from '../../src/listen.ts';
import type { MatrixApi } from './client.ts';
import { describeError, isRateLimit, isTokenRejected, matrixFailure } from './errors.ts';
import type { RoomEvent } from './inbound.ts';
import type { SyncTokenStore } from './state.ts';

export interface JoinedRoom {
  readonly state?: { readonly events?: readonly RoomEvent[] };
  readonly timeline?: { readonly events?: readonly RoomEvent[]; readonly limited?: boolean; readonly prev_batch?: string };
}

export interface InvitedRoom {
  readonly invite_state?: { readonly events?: ReadonlyArray<Pick<RoomEvent, 'type' | 'sender' | 'content'> & { readonly state_key?: string }> };
}

export interface SyncResponse {
  readonly next_batch: string;
  readonly rooms?: {
    readonly join?: Readonly<Record<string, JoinedRoom>>;
    readonly invite?: Readonly<Record<string, InvitedRoom>>;
    readonly leave?: Readonly<Record<string, unknown>>;
  };
  readonly account_data?: { readonly events?: ReadonlyArray<{ readonly type: string; readonly content: Record<string, unknown> }> };
}

/** Timeline events the channel reads; state it keeps; nothing else (presence, receipts, typing). */
export const TIMELINE_TYPES = ['m.room.message', 'm.room.encrypted', 'm.room.member', 'm.room.encryption'];

export function syncFilter(timelineLimit: number): Record<string, unknown> {
  return {
    presence: { types: [] },
    account_data: { types: ['m.direct'] },
    room: {
      timeline: { limit: timelineLimit, types: TIMELINE_TYPES },
      state: { types: ['m.room.member', 'm.room.encryption'], lazy_load_members: false },
      ephemeral: { types: [] },
      account_data: { types: [] },
    },
  };
}

export interface SyncOptions {
  readonly api: MatrixApi;
  readonly log: Logger;
  readonly tokens: SyncTokenStore;
  /** How long the server may hold a /sync open. */
  readonly timeoutMs: number;
  readonly livenessMs: number;
  /** Handles one response; rejects only when it must not be confirmed (push rejected: shutdown). */
  handle(response: SyncResponse, context: { readonly initial: boolean; readonly since: string | undefined }): Promise<void>;
}

/** How much longer than the server's hold a /sync may take before we give up on it (a hung connection). */
export const localSlack = (timeoutMs: number): number => Math.min(30_000, Math.max(2000, timeoutMs));
/** The first sync of a listen (full state of every room) may take a homeserver a long while to put together. */
export const FIRST_SYNC_TIMEOUT_MS = 120_000;

/** Failed syncs in a row retried here before giving up to the supervisor (which backs off further). */
const MAX_RETRIES = 5;

export async function runSync(options: SyncOptions, signal: AbortSignal, link: ListenLink): Promise<void> {
  const { api, log, tokens } = options;
  // Read here, not at construction: in a cluster another node may have synced on since.
  await tokens.load();
  const filterId = await api.createFilter(syncFilter(50), signal);
  const initialFilter = JSON.stringify(syncFilter(1));
  let first = true;
  let failures = 0;
  while (!signal.aborted) {
    const since = tokens.get();
    const timeout = first ? 0 : options.timeoutMs;
    const query: Record<string, string> = { timeout: String(timeout), filter: since === undefined ? initialFilter : filterId };
    if (since !== undefined) query.since = since;
    if (since !== undefined && first) query.full_state = 'true';
    let response: SyncResponse;
    try {
      response = await api.request<SyncResponse>(Method.Get, '/sync', query, undefined, { signal, timeoutMs: first ? FIRST_SYNC_TIMEOUT_MS : timeout + localSlack(timeout) });
    } catch (error) {
      if (signal.aborted) return;
      const failure = matrixFailure(error);
      const reason = describeError(error, api.token);
      if (isTokenRejected(failure)) {
        await api.dropSession();
        throw new Error(`Matrix rejected the access token (${failure?.errcode}): set a valid access_token or password`, { cause: error });
      }
      if (since !== undefined && (failure?.errcode === 'M_UNKNOWN_POS' || (failure?.httpStatus === 400 && failure.errcode === 'M_INVALID_PARAM'))) {
        log.warn({ reason }, 'the homeserver no longer knows the saved sync position; starting afresh (messages sent while the channel was down are not answered)');
        await tokens.set(undefined);
        continue;
      }
      if (++failures > MAX_RETRIES) throw new Error(`/sync failed ${MAX_RETRIES} times in a row: ${reason}`, { cause: error });
      const waitMs = isRateLimit(failure) && failure?.retryAfterMs !== undefined ? failure.retryAfterMs : Math.min(250 * 2 ** (failures - 1), 4000);
      log.warn({ reason, attempt: failures, retryInMs: waitMs }, '/sync failed; syncing again');
      if (!(await pause(waitMs, signal))) return;
      continue;
    }
    failures = 0;
    link.alive();
    if (signal.aborted) return; // unconfirmed: the next start syncs from the saved token again
    await whileAlive(link, options.livenessMs, () => options.handle(response, { initial: since === undefined, since }));
    await tokens.set(response.next_batch);
    if (first) {
      first = false;
      link.ready();
    }
  }
}
