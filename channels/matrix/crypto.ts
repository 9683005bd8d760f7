/**
 * End-to-end encryption for the Matrix channel with the SDK's own engine: the Rust crypto of
 * matrix-js-sdk (@matrix-org/matrix-sdk-crypto-wasm's OlmMachine), driven from our own /sync
 * loop — no hand-written Olm or Megolm. The machine says what it needs sent (key uploads, key
 * queries and claims, to-device messages); `drain` sends it and reports the answers back.
 * Its state is in our database (crypto-store.ts), so after a restart, or on another node, the
 * bot is the same device.
 *
 * Trust (issue 28, point 3): the bot shares room keys with every device of the people in the
 * room, verified or not (TOFU, as Element does by default for unverified devices), so a
 * person's new device reads the next reply; it decrypts what any device sends
 * (TrustRequirement.Untrusted). No cross-signing, no key backup, no recovery key: the bot's
 * one device is its identity, kept in the database; resetting it is deleting the channel's
 * `e2ee` state (see NOTES). The wasm is loaded only when encryption is on.
 */
import type { Logger } from 'pino';
import type { ChannelState } from '../../src/channel-state.ts';
import { openPersistentIndexedDb, type PersistentIndexedDb } from './crypto-store.ts';

type Wasm = typeof import('@matrix-org/matrix-sdk-crypto-wasm');
type OlmMachine = InstanceType<Wasm['OlmMachine']>;

/** How the machine's requests reach the homeserver: a client-server API call, its JSON answer. */
export type CryptoTransport = (method: 'POST' | 'PUT', path: string, body: Record<string, unknown>) => Promise<unknown>;

/** The key parts of a /sync response (sync.yaml). */
export interface SyncKeys {
  readonly to_device?: { readonly events?: readonly unknown[] };
  readonly device_lists?: { readonly changed?: readonly string[]; readonly left?: readonly string[] };
  readonly device_one_time_keys_count?: Readonly<Record<string, number>>;
  readonly device_unused_fallback_key_types?: readonly string[];
}

/**
 * The device already has keys on the homeserver, but this database holds no crypto state for
 * it (the state was lost, or another client uses the same access token): new keys under the
 * old device id would be refused (its one-time key ids are taken) and distrusted by everyone.
 */
export class DeviceKeysExist extends Error {
  readonly deviceId: string;
  constructor(deviceId: string) {
    super(`the Matrix device ${deviceId} already has encryption keys on the homeserver that this database does not hold (the bot's crypto state was lost, or another client uses the same access token): give the bot a new access token (a new login, a new device), or turn encryption off`);
    this.deviceId = deviceId;
  }
}

export interface DecryptedEvent {
  readonly type: string;
  readonly content: Record<string, unknown>;
}

export class MatrixCrypto {
  readonly #wasm: Wasm;
  readonly #machine: OlmMachine;
  readonly #store: PersistentIndexedDb;
  readonly #send: CryptoTransport;
  readonly #log: Logger;
  #draining: Promise<void> | undefined;

  private constructor(wasm: Wasm, machine: OlmMachine, store: PersistentIndexedDb, send: CryptoTransport, log: Logger) {
    this.#wasm = wasm;
    this.#machine = machine;
    this.#store = store;
    this.#send = send;
    this.#log = log;
  }

  /** Loads the device of `userId`/`deviceId` from `state` (or makes it, the first time) and uploads what it must. */
  static async open(options: { readonly state: ChannelState; readonly userId: string; readonly deviceId: string; readonly send: CryptoTransport; readonly log: Logger }): Promise<MatrixCrypto> {
    const wasm = await import('@matrix-org/matrix-sdk-crypto-wasm');
    await wasm.initAsync();
    const store = await openPersistentIndexedDb(options.state, options.log);
    // One database per user and device: a new device (after a reset) starts afresh beside the old.
    const name = `switchboard:${options.userId}:${options.deviceId}`;
    if (!store.restored.some((db) => db === name || db.startsWith(`${name}::`))) {
      // A device new to this database must be new to the homeserver too.
      const known = (await options.send('POST', '/keys/query', { device_keys: { [options.userId]: [options.deviceId] } })) as { device_keys?: Record<string, Record<string, unknown> | undefined> };
      if (known.device_keys?.[options.userId]?.[options.deviceId] !== undefined) throw new DeviceKeysExist(options.deviceId);
    }
    const machine = await store.asGlobal(() => wasm.OlmMachine.initialize(new wasm.UserId(options.userId), new wasm.DeviceId(options.deviceId), name));
    // Stored before its keys are uploaded: a crash in between must not leave keys on the server that we do not hold.
    await store.flush();
    const crypto = new MatrixCrypto(wasm, machine, store, options.send, options.log);
    await crypto.drain();
    return crypto;
  }

  /** This device's Ed25519 and Curve25519 keys (the same after a restart). */
  get identityKeys(): { readonly ed25519: string; readonly curve25519: string } {
    const keys = this.#machine.identityKeys;
    return { ed25519: keys.ed25519.toBase64(), curve25519: keys.curve25519.toBase64() };
  }

  /** Sends everything the machine has to send, until it has nothing more. One drain at a time. */
  drain(): Promise<void> {
    this.#draining ??= this.#drain().finally(() => {
      this.#draining = undefined;
    });
    return this.#draining;
  }

  async #drain(): Promise<void> {
    const { RequestType } = this.#wasm;
    for (let round = 0; round < 10; round++) {
      const requests = await this.#machine.outgoingRequests();
      if (requests.length === 0) break;
      for (const request of requests) {
        let response: unknown;
        switch (request.type) {
          case RequestType.KeysUpload:
            response = await this.#send('POST', '/keys/upload', JSON.parse(request.body) as Record<string, unknown>);
            break;
          case RequestType.KeysQuery:
            response = await this.#send('POST', '/keys/query', JSON.parse(request.body) as Record<string, unknown>);
            break;
          case RequestType.KeysClaim:
            response = await this.#send('POST', '/keys/claim', JSON.parse(request.body) as Record<string, unknown>);
            break;
          case RequestType.ToDevice: {
            const toDevice = request as InstanceType<Wasm['ToDeviceRequest']>;
            response = await this.#send('PUT', `/sendToDevice/${encodeURIComponent(toDevice.event_type)}/${encodeURIComponent(toDevice.txn_id)}`, JSON.parse(toDevice.body) as Record<string, unknown>);
            break;
          }
          default:
            // Signature uploads, verification messages and key backup: the bot does none of them (see the trust note).
            this.#log.debug({ type: request.type }, 'a crypto request the bot does not make; skipped');
            continue;
        }
        await this.#machine.markRequestAsSent(request.id ?? '', request.type, JSON.stringify(response ?? {}));
      }
    }
    await this.#store.flush();
  }

  /** Feeds one /sync's key parts to the machine (to-device messages: room keys, Olm sessions) and sends what follows. */
  async receiveSync(sync: SyncKeys): Promise<void> {
    const { DeviceLists, UserId } = this.#wasm;
    const lists = new DeviceLists((sync.device_lists?.changed ?? []).map((id) => new UserId(id)), (sync.device_lists?.left ?? []).map((id) => new UserId(id)));
    const counts = new Map(Object.entries(sync.device_one_time_keys_count ?? {}));
    const fallback = sync.device_unused_fallback_key_types === undefined ? undefined : new Set(sync.device_unused_fallback_key_types);
    await this.#machine.receiveSyncChanges(JSON.stringify(sync.to_device?.events ?? []), lists, counts, fallback);
    await this.drain();
  }

  /** Decrypts one m.room.encrypted event; throws when it cannot (no room key yet, or a broken message). */
  async decrypt(roomId: string, event: Record<string, unknown>): Promise<DecryptedEvent> {
    const { DecryptionSettings, RoomId, TrustRequirement } = this.#wasm;
    const decrypted = await this.#machine.decryptRoomEvent(JSON.stringify(event), new RoomId(roomId), new DecryptionSettings(TrustRequirement.Untrusted));
    const clear = JSON.parse(decrypted.event) as { type?: string; content?: Record<string, unknown> };
    return { type: clear.type ?? 'm.room.message', content: clear.content ?? {} };
  }

  /**
   * Encrypts `content` for `roomId`, whose joined members are `members`: their devices are
   * looked up, Olm sessions made where missing and the room key shared with every device that
   * has none, before the event is encrypted. The state is stored before the ciphertext is
   * returned (a restart never reuses a Megolm index).
   */
  async encrypt(roomId: string, members: readonly string[], type: string, content: Record<string, unknown>): Promise<Record<string, unknown>> {
    const { EncryptionSettings, RoomId, UserId } = this.#wasm;
    const users = members.map((id) => new UserId(id));
    await this.#machine.updateTrackedUsers(users.map((user) => user.clone()));
    await this.drain(); // the key queries of users not tracked before
    const claim = await this.#machine.getMissingSessions(users.map((user) => user.clone()));
    if (claim) {
      const response = await this.#send('POST', '/keys/claim', JSON.parse(claim.body) as Record<string, unknown>);
      await this.#machine.markRequestAsSent(claim.id, claim.type, JSON.stringify(response));
    }
    const room = new RoomId(roomId);
    const shares = await this.#machine.shareRoomKey(room, users.map((user) => user.clone()), new EncryptionSettings());
    for (const share of shares) {
      const response = await this.#send('PUT', `/sendToDevice/${encodeURIComponent(share.event_type)}/${encodeURIComponent(share.txn_id)}`, JSON.parse(share.body) as Record<string, unknown>);
      await this.#machine.markRequestAsSent(share.id, share.type, JSON.stringify(response));
    }
    const encrypted = await this.#machine.encryptRoomEvent(new RoomId(roomId), type, JSON.stringify(content));
    await this.#store.flush();
    return JSON.parse(encrypted) as Record<string, unknown>;
  }

  /** Waits until every change so far is in our database (before a /sync token is saved). */
  flush(): Promise<void> {
    return this.#store.flush();
  }

  /** Stops the machine (after a flush); its state stays in the database. */
  async close(): Promise<void> {
    await this.#draining?.catch(() => undefined);
    await this.#store.flush().catch(() => undefined);
    this.#machine.close();
  }
}
