/**
 * End-to-end encryption in the Matrix channel (`[channels.matrix] encryption = true`): the
 * glue between the /sync loop, the intake and the sends, and the crypto engine (crypto.ts).
 *
 * - Each listen opens the crypto state from the channel state store (so a restart, or the node
 *   that takes the channel over, is the same device) and uploads the device's keys.
 * - Each /sync response's to-device messages, device-list changes and one-time-key counts go to
 *   the engine before its room events are read; its state is stored before the sync token is.
 * - An m.room.encrypted event is decrypted and then read like any message. One it cannot
 *   decrypt yet (its room key is late: a client shares it by to-device message, which can
 *   arrive after the event) waits up to `waitMs`, retried after every sync; if it still
 *   cannot be read, the person is told once per room (encrypted), never silence. It does not
 *   ask the sender's devices for the key (issue 28 asks for that): the engine can neither ask
 *   them nor accept their answer, see below; waiting (and telling) is what the bot can do.
 * - A waiting event is in the channel state (`e2ee-parked:<event id>`), written before the
 *   /sync position that delivered it is saved, and deleted once it was read and pushed or the
 *   person was told: a crash (or the channel moving to another node) inside the wait does not
 *   lose it; the next listen takes it up again with what is left of its wait.
 * - A reply in an encrypted room is encrypted for every device of its joined and invited
 *   members (trust: see crypto.ts).
 *
 * Why no key request to the sender (checked in @matrix-org/matrix-sdk-crypto-wasm 18.9.0 and
 * matrix-rust-sdk at 64b12e0b808969c284c94f0ea239f37d6746d6e2, crates/matrix-sdk-crypto/src):
 * - The wasm OlmMachine has no call to request a room key (pkg/matrix_sdk_crypto_wasm.d.ts has
 *   no `requestRoomKey`; only the switches `roomKeyForwardingEnabled` and
 *   `roomKeyRequestsEnabled`, lines 2917 and 2925). With the switch on, a failed decrypt makes
 *   a request by itself (machine/mod.rs 2501–2511, `create_outgoing_key_request` on
 *   MissingRoomKey / UnknownMessageIndex), but only when one of the bot's *own* devices is
 *   verified (gossiping/machine.rs 799–817, `should_request_key`:
 *   `get_user_devices(self.user_id())` … `devices.is_any_verified()`), and it goes to the
 *   bot's own user: `request_recipient: self.user_id()` (gossiping/machine.rs 876–882,
 *   `request_key_helper`), sent to `DeviceIdOrAllDevices::AllDevices` of that recipient
 *   (gossiping/mod.rs 157–175, `to_request`). The bot has one device and no cross-signing, so
 *   no request is ever made, and none could reach the sender.
 * - Even if one were sent to the sender, the answer would be dropped: an m.forwarded_room_key
 *   is accepted only from a verified device of the bot's own user
 *   (gossiping/machine.rs 1124–1137, `should_accept_forward`:
 *   `Ok(device.user_id() == self.user_id() && device.is_verified())`; otherwise "Received a
 *   forwarded room key from an unknown device, or from a device that the key request recipient
 *   doesn't own", 1169–1182). (The sender's engine would answer a request from a device it had
 *   shared the session with, gossiping/machine.rs 751–789, `should_share_key`; the bot cannot
 *   ask nor take the answer.)
 */
import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import type { ChannelState } from '../../src/channel-state.ts';
import { Method } from 'matrix-js-sdk';
import type { MatrixApi } from './client.ts';
import type { CryptoTransport, MatrixCrypto, SyncKeys } from './crypto.ts';
import { describeError } from './errors.ts';
import type { RoomEvent } from './inbound.ts';
import type { Content } from './render.ts';
import type { Rooms } from './rooms.ts';

/** What the person is told when a message of theirs cannot be decrypted. */
export const UNDECRYPTABLE_NOTICE =
  'I could not decrypt your last message: your device did not share its key with mine. Please send it again; if this keeps happening, check that your client trusts all devices of this room (or start a new DM with me).';

export interface E2eeOptions {
  readonly api: MatrixApi;
  readonly state: ChannelState;
  readonly rooms: Rooms;
  readonly log: Logger;
  /** How long an undecryptable event waits for its key before the person is told. @default 15000 */
  readonly waitMs?: number;
  /** The bot logs in with its password (not a configured access token): it can become a new device by itself. */
  readonly passwordLogin: boolean;
  /** Sends a notice to a room (through the channel, so encrypted). */
  readonly tell: (roomId: string, text: string, txnId: string) => Promise<void>;
}

/** Reads a clear event that waited for its key, like any message of its room (pushes it). */
export type LateReader = (roomId: string, event: RoomEvent) => Promise<void>;

interface Parked {
  readonly roomId: string;
  readonly event: RoomEvent;
  /** When the person is told (ms since the epoch: the wait goes on across a restart). */
  readonly until: number;
}

/** Channel state keys of the events waiting for their key (value: {@link Parked}). */
const PARKED_PREFIX = 'e2ee-parked:';
const parkedKey = (eventId: string): string => `${PARKED_PREFIX}${eventId}`;

/** At most this many undecryptable events wait at once (the oldest is given up first). */
const MAX_PARKED = 200;

export class ChannelE2ee {
  readonly #o: E2eeOptions;
  readonly #waitMs: number;
  #crypto: MatrixCrypto | undefined;
  #parked: Parked[] = [];
  /** Who reads the events whose key came late (set by the listen: it has the push). */
  #late: LateReader | undefined;
  /** Whether a sync was read since the listen began: a wait taken up after a restart ends only after its key had a chance to come. */
  #synced = false;
  #timer: NodeJS.Timeout | undefined;
  readonly #told = new Set<string>();
  /** The engine's calls, one at a time (a reload must not close it under a send). */
  #queue: Promise<unknown> = Promise.resolve();
  /** Timings of decrypt (ms), for the status and the measurements. */
  readonly decryptMs: number[] = [];

  constructor(options: E2eeOptions) {
    this.#o = options;
    this.#waitMs = options.waitMs ?? 15_000;
  }

  get device(): { readonly ed25519: string; readonly curve25519: string } | undefined {
    return this.#crypto?.identityKeys;
  }

  /** Runs `work` when the engine's earlier calls are done. Never call out (push, tell) inside: they may wait on a send. */
  #exclusive<T>(work: () => Promise<T>): Promise<T> {
    const run = this.#queue.then(work, work);
    this.#queue = run.catch(() => undefined);
    return run;
  }

  /**
   * Opens the crypto state (the same device as before) from the database and uploads what the
   * homeserver lacks; an engine already open is closed first (each listen reloads: another node
   * may have held the channel meanwhile).
   */
  start(late: LateReader): Promise<void> {
    return this.#exclusive(async () => {
      await this.#close();
      await this.#open();
      this.#late = late;
      this.#synced = false;
      await this.#resume();
    });
  }

  /** Takes up the events that were waiting for their key when the channel last stopped (here or on another node). */
  async #resume(): Promise<void> {
    for (const entry of await this.#o.state.list(PARKED_PREFIX)) {
      try {
        const parked = JSON.parse(entry.value) as Parked;
        if (typeof parked.roomId !== 'string' || typeof parked.event?.event_id !== 'string' || typeof parked.until !== 'number') throw new Error('not a waiting event');
        if (!this.#parked.some((p) => p.event.event_id === parked.event.event_id)) this.#parked.push(parked);
      } catch (error) {
        this.#o.log.warn({ key: entry.key, reason: describeError(error) }, 'an unreadable waiting encrypted event in the channel state; dropped');
        await this.#o.state.delete([entry.key]);
      }
    }
    if (this.#parked.length === 0) return;
    this.#o.log.info({ waiting: this.#parked.length }, 'encrypted messages were waiting for their keys when the channel stopped; waiting again');
    this.#tick();
  }

  #tick(): void {
    this.#timer ??= setInterval(() => void this.#retry(true).catch((error: unknown) => this.#o.log.warn({ reason: describeError(error) }, 'retrying undecrypted messages failed')), 1000).unref();
  }

  /** The engine, opened when a send comes before the first listen (replies pending after a restart). */
  #ready(): Promise<MatrixCrypto> {
    return this.#crypto ? Promise.resolve(this.#crypto) : this.#open();
  }

  async #open(): Promise<MatrixCrypto> {
    const { api, state, log } = this.#o;
    const deviceId = api.deviceId;
    if (deviceId === undefined) throw new Error('Matrix encryption needs the device id of the access token (whoami gave none)');
    const send: CryptoTransport = (method, path, body) => api.request(method === 'POST' ? Method.Post : Method.Put, path, {}, body, { timeoutMs: 30_000 });
    const { DeviceKeysExist, MatrixCrypto } = await import('./crypto.ts');
    const started = performance.now();
    let crypto: MatrixCrypto;
    try {
      crypto = await MatrixCrypto.open({ state, userId: api.userId, deviceId, send, log });
    } catch (error) {
      if (!(error instanceof DeviceKeysExist) || !this.#o.passwordLogin) throw error;
      // With a password the bot can start over as a new device: the next connect logs in again.
      await api.dropSession();
      throw new Error(`the Matrix device ${deviceId} has encryption keys this database does not hold; logging in again as a new device`, { cause: error });
    }
    this.#crypto = crypto;
    log.info({ device: deviceId, ed25519: crypto.identityKeys.ed25519, ms: Math.round(performance.now() - started) }, 'Matrix end-to-end encryption ready');
    return crypto;
  }

  /** Feeds a /sync response's key parts (room keys, device lists) to the engine. */
  receive(response: SyncKeys): Promise<void> {
    return this.#exclusive(async () => (await this.#ready()).receiveSync(response));
  }

  /** After the sync's events were read: retries the waiting events (their keys may have come), and stores the state. */
  async afterSync(): Promise<void> {
    await this.#retry(false);
    this.#synced = true;
    await this.#exclusive(async () => (await this.#ready()).flush());
  }

  /**
   * The clear event of an m.room.encrypted one, or undefined when it cannot be read yet (then
   * it waits, stored, and the listen's LateReader gets it when its key comes, or the person is told).
   */
  async decrypt(roomId: string, event: RoomEvent): Promise<RoomEvent | undefined> {
    const clear = await this.#tryDecrypt(roomId, event);
    const waiting = this.#parked.findIndex((p) => p.event.event_id === event.event_id);
    if (clear) {
      // Delivered again (its sync position was not saved) and readable now: it waits no more.
      if (waiting >= 0) {
        this.#parked.splice(waiting, 1);
        await this.#o.state.delete([parkedKey(event.event_id)]);
      }
      return clear;
    }
    if (waiting >= 0) return undefined; // already waiting (taken up from the state, then delivered again)
    if (this.#parked.length >= MAX_PARKED) await this.#giveUp(this.#parked.shift()!);
    const parked: Parked = { roomId, event, until: Date.now() + this.#waitMs };
    // Stored before the sync position that delivered it is (the listen awaits this): a crash inside the wait loses nothing.
    await this.#o.state.put(parkedKey(event.event_id), JSON.stringify(parked));
    this.#parked.push(parked);
    this.#o.log.info({ room: roomId, event: event.event_id, sender: event.sender }, 'an encrypted message cannot be decrypted yet; waiting for its key');
    this.#tick();
    return undefined;
  }

  async #tryDecrypt(roomId: string, event: RoomEvent): Promise<RoomEvent | undefined> {
    const started = performance.now();
    try {
      const clear = await this.#exclusive(async () => (await this.#ready()).decrypt(roomId, { ...event, room_id: roomId }));
      this.decryptMs.push(performance.now() - started);
      if (this.decryptMs.length > 1000) this.decryptMs.shift();
      // A relation (thread, reply, edit) travels in the clear beside the ciphertext (spec: end-to-end encryption, m.relates_to); put it back where the intake reads it.
      const outer = event.content['m.relates_to'];
      const content = clear.content['m.relates_to'] === undefined && outer !== undefined ? { ...clear.content, 'm.relates_to': outer } : clear.content;
      return { ...event, type: clear.type, content };
    } catch (error) {
      this.#o.log.debug({ room: roomId, event: event.event_id, reason: describeError(error) }, 'could not decrypt');
      return undefined;
    }
  }

  async #retry(timed: boolean): Promise<void> {
    if (this.#parked.length === 0) return;
    const waiting = this.#parked;
    this.#parked = [];
    let i = 0;
    try {
      for (; i < waiting.length; i++) {
        const parked = waiting[i]!;
        const clear = await this.#tryDecrypt(parked.roomId, parked.event);
        if (clear && this.#late) {
          await this.#late(parked.roomId, clear);
          await this.#o.state.delete([parkedKey(parked.event.event_id)]);
        } else if (!clear && timed && this.#synced && Date.now() >= parked.until) await this.#giveUp(parked);
        else this.#parked.push(parked);
      }
    } catch (error) {
      // A push failed (shutdown) or the database did: this one and the rest are still stored, and wait on (pushed again at worst: the inbox knows its event ids).
      this.#parked.push(...waiting.slice(i));
      throw error;
    }
    if (this.#parked.length === 0 && this.#timer) {
      clearInterval(this.#timer);
      this.#timer = undefined;
    }
  }

  async #giveUp(parked: Parked): Promise<void> {
    const { log } = this.#o;
    log.warn({ room: parked.roomId, event: parked.event.event_id, sender: parked.event.sender }, 'an encrypted message could not be decrypted (its key never came); telling the person');
    const key = `${parked.roomId}\u0000${parked.event.sender}`;
    if (!this.#told.has(key)) {
      // Once per person and room in a process: a burst of them gets one answer.
      this.#told.add(key);
      try {
        // The event's own transaction: told again after a crash before the delete below, the homeserver answers with the same notice.
        await this.#o.tell(parked.roomId, UNDECRYPTABLE_NOTICE, `sb-undecryptable-${createHash('sha256').update(parked.event.event_id).digest('base64url').slice(0, 32)}`);
      } catch (error) {
        this.#told.delete(key);
        log.warn({ room: parked.roomId, reason: describeError(error) }, 'could not tell the person that their message could not be decrypted');
        return; // still stored: told after the next start if not before
      }
    }
    await this.#o.state.delete([parkedKey(parked.event.event_id)]);
  }

  /** An event content to send to `roomId`: encrypted when the room is, as is otherwise. */
  async seal(roomId: string, type: string, content: Content): Promise<{ readonly type: string; readonly content: Content }> {
    if (!this.#o.rooms.isEncrypted(roomId)) return { type, content };
    const members = this.#o.rooms.present(roomId);
    const encrypted = await this.#exclusive(async () => (await this.#ready()).encrypt(roomId, members, type, content));
    return { type: 'm.room.encrypted', content: encrypted };
  }

  /** Stops the engine (its state stays stored); waiting events stay stored, taken up by the next listen. */
  stop(): Promise<void> {
    return this.#exclusive(() => this.#close());
  }

  async #close(): Promise<void> {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
    this.#parked = [];
    const crypto = this.#crypto;
    this.#crypto = undefined;
    await crypto?.close();
  }
}
