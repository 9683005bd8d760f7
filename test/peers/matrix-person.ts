/**
 * A person's device with end-to-end encryption, for tests against the Matrix peer: the SDK's
 * Rust crypto engine (the OlmMachine of @matrix-org/matrix-sdk-crypto-wasm that matrix-js-sdk's
 * initRustCrypto runs, here through the channel's own MatrixCrypto wrapper with its state in
 * an in-memory SQLite), its keys and to-device messages on the peer's key server
 * (matrix-keys.ts) in process; what it encrypts is posted to the room as the person's
 * m.room.encrypted event.
 */
import { pino } from 'pino';
import { decryptAttachment, encryptAttachment, parseEncryptedFile } from '../../channels/matrix/attachment-crypto.ts';
import { MatrixCrypto, type CryptoTransport } from '../../channels/matrix/crypto.ts';
import { testChannelState } from '../support/channel-state.ts';
import { until } from '../support/wait.ts';
import { keyRoute, type MatrixKeyServer } from './matrix-keys.ts';
import type { PeerUser } from '../contracts/chat-channel.ts';
import type { MatrixPeer } from './matrix.ts';

const silent = pino({ level: 'silent' });

/** One bot event as a device reads it: its text, or why it could not (no room key yet, or broken). */
interface ReadEvent {
  readonly eventId: string;
  readonly text: string | undefined;
  readonly unreadable?: string;
}

/** One device of a person: the SDK's crypto engine, its keys on the peer's key server. */
export class PersonDevice {
  readonly #keys: MatrixKeyServer;
  readonly userId: string;
  readonly deviceId: string;
  readonly crypto: MatrixCrypto;

  private constructor(keys: MatrixKeyServer, userId: string, deviceId: string, crypto: MatrixCrypto, held: Array<() => void>, keysLate: boolean) {
    this.#keys = keys;
    this.#held = held;
    this.#keeping = keysLate;
    this.userId = userId;
    this.deviceId = deviceId;
    this.crypto = crypto;
  }

  /** To-device messages held back (`hold`), sent by {@link release}. */
  readonly #held: Array<() => void>;
  /** Whether to-device messages sent to this device are kept from it (`keysLate`) until {@link letKeysIn}. */
  #keeping: boolean;
  /** The to-device messages kept from it so far. */
  readonly #kept: unknown[] = [];

  /**
   * `lose`: the device's to-device messages never leave it (its room keys never reach anyone);
   * `hold`: they leave when {@link release} is called (a room key that comes late);
   * `keysLate`: those sent to it (the bot's room keys) reach it only in a /sync after
   * {@link letKeysIn}, later than the room events they decrypt.
   */
  static async open(peer: MatrixPeer, userId: string, deviceId: string, options: { lose?: boolean; hold?: boolean; keysLate?: boolean } = {}): Promise<PersonDevice> {
    const held: Array<() => void> = [];
    const send: CryptoTransport = async (method, path, body) => {
      if (options.lose && path.startsWith('/sendToDevice/')) return {};
      if (options.hold && path.startsWith('/sendToDevice/')) {
        held.push(() => keyRoute(peer.keys, method, path, body, userId, deviceId));
        return {};
      }
      const answer = keyRoute(peer.keys, method, path, body, userId, deviceId);
      if (!answer) throw new Error(`the person's device asked for ${method} ${path}`);
      return answer;
    };
    return new PersonDevice(peer.keys, userId, deviceId, await MatrixCrypto.open({ state: testChannelState(deviceId), userId, deviceId, send, log: silent }), held, options.keysLate ?? false);
  }

  /** Sends the to-device messages held back (`hold`): the room keys arrive now. */
  release(): void {
    for (const send of this.#held.splice(0)) send();
  }

  /** The to-device messages kept from it (`keysLate`) come with its next sync, and those after them too. */
  letKeysIn(): void {
    this.#keeping = false;
  }

  /** What its /sync would carry: to-device messages (room keys), device lists. */
  async sync(): Promise<void> {
    const { part, upTo } = this.#keys.sync(this.userId, this.deviceId);
    this.#kept.push(...((part.to_device as { events?: unknown[] } | undefined)?.events ?? []));
    const events = this.#keeping ? [] : this.#kept.splice(0);
    await this.crypto.receiveSync({ ...part, to_device: { events } });
    this.#keys.confirm(this.userId, this.deviceId, upTo);
  }

  /** Encrypts a text for the room's members and posts it. */
  async say(peer: MatrixPeer, roomId: string, members: readonly string[], text: string): Promise<void> {
    const content = await this.crypto.encrypt(roomId, members, 'm.room.message', { msgtype: 'm.text', body: text });
    peer.postEvent(roomId, this.#person(peer), 'm.room.encrypted', content);
  }

  /** Sends a file as an encrypted attachment (its bytes encrypted, then the event) with a caption. */
  async sendFile(peer: MatrixPeer, roomId: string, members: readonly string[], name: string, data: Buffer, caption: string): Promise<void> {
    const { data: ciphertext, keys } = encryptAttachment(data);
    const url = peer.uploadMedia(ciphertext, 'application/octet-stream');
    const content = { msgtype: 'm.file', body: caption, filename: name, file: { ...keys, url }, info: { mimetype: 'text/plain', size: data.length } };
    const encrypted = await this.crypto.encrypt(roomId, members, 'm.room.message', content);
    peer.postEvent(roomId, this.#person(peer), 'm.room.encrypted', encrypted);
  }

  /** The files the bot sent to the room, as this device opens them: name and bytes (undefined: could not). */
  async files(peer: MatrixPeer, roomId: string): Promise<Array<{ name: string; data: Buffer | undefined }>> {
    await this.sync();
    const out: Array<{ name: string; data: Buffer | undefined }> = [];
    for (const event of peer.rawBotEventsIn(roomId)) {
      if (event.type !== 'm.room.encrypted') continue;
      const clear = await this.crypto.decrypt(roomId, { ...event, room_id: roomId }).catch(() => undefined);
      if (clear?.content.msgtype !== 'm.file' && clear?.content.msgtype !== 'm.image') continue;
      const file = parseEncryptedFile(clear.content.file);
      const stored = file ? peer.mediaOf(file.url) : undefined;
      let data: Buffer | undefined;
      if (file && stored) {
        const parts: Buffer[] = [];
        try {
          for await (const part of decryptAttachment([stored], file)) parts.push(Buffer.from(part));
          data = Buffer.concat(parts);
        } catch {
          data = undefined;
        }
      }
      out.push({ name: String(clear.content.filename ?? clear.content.body), data });
    }
    return out;
  }

  #person(peer: MatrixPeer): PeerUser {
    const user = (Object.keys(peer.users) as PeerUser[]).find((name) => peer.users[name] === this.userId);
    if (!user) throw new Error(`${this.userId} is not a person of the peer`);
    return user;
  }

  /**
   * The bot's events in the room as this device reads them after one sync for their keys: one
   * attempt, so an event whose room key has not reached the device yet reads as undefined. To
   * wait for answers, use {@link answers}.
   */
  async read(peer: MatrixPeer, roomId: string): Promise<Array<string | undefined>> {
    return (await this.#readOnce(peer, roomId)).map((event) => event.text);
  }

  /**
   * The bot's events in the room, once there are at least `count` and this device has decrypted
   * every one. The room key of a message can reach a device in a later /sync than the message
   * (the device synced before the bot shared it; over federation, in any order), so while one is
   * missing or unreadable it syncs and tries again, as Element retries a decryption when the key
   * comes. Rejects after `timeoutMs` naming the events it could not read and why.
   */
  async answers(peer: MatrixPeer, roomId: string, count: number, timeoutMs = 30_000, context: () => string = () => ''): Promise<string[]> {
    let seen: ReadEvent[] = [];
    const missing = (): string => {
      const unreadable = seen.filter((event) => event.text === undefined).map((event) => `${event.eventId}: ${event.unreadable}`);
      return `; it has ${seen.length} of the bot's events${unreadable.length > 0 ? `, and could not decrypt ${unreadable.join('; ')}` : ''}`;
    };
    await until(
      async () => (seen = await this.#readOnce(peer, roomId)).length >= count && seen.every((event) => event.text !== undefined),
      `${count} bot event(s) in ${roomId} that ${this.deviceId} can decrypt`,
      timeoutMs,
      () => `${missing()}${context()}`,
    );
    return seen.map((event) => event.text!);
  }

  async #readOnce(peer: MatrixPeer, roomId: string): Promise<ReadEvent[]> {
    await this.sync();
    const out: ReadEvent[] = [];
    for (const event of peer.rawBotEventsIn(roomId)) {
      if (event.type !== 'm.room.encrypted') {
        out.push({ eventId: event.event_id, text: `PLAIN: ${String(event.content.body)}` });
        continue;
      }
      try {
        const clear = await this.crypto.decrypt(roomId, { ...event, room_id: roomId });
        out.push({ eventId: event.event_id, text: String(clear.content.body) });
      } catch (error) {
        const session = String(event.content.session_id ?? '?');
        out.push({ eventId: event.event_id, text: undefined, unreadable: `megolm session ${session}: ${error instanceof Error ? error.message : String(error)}` });
      }
    }
    return out;
  }
}
