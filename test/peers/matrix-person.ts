/**
 * A person's device with end-to-end encryption, for tests against the Matrix peer: the SDK's
 * Rust crypto engine (the OlmMachine of @matrix-org/matrix-sdk-crypto-wasm that matrix-js-sdk's
 * initRustCrypto runs, here through the channel's own MatrixCrypto wrapper with its state in
 * an in-memory SQLite), its keys and to-device messages on the peer's key server
 * (matrix-keys.ts) in process; what it encrypts is posted to the room as the person's
 * m.room.encrypted event.
 */
import { pino } from 'pino';
import { MatrixCrypto, type CryptoTransport } from '../../channels/matrix/crypto.ts';
import { testChannelState } from '../support/channel-state.ts';
import { keyRoute, type MatrixKeyServer } from './matrix-keys.ts';
import type { PeerUser } from '../contracts/chat-channel.ts';
import type { MatrixPeer } from './matrix.ts';

const silent = pino({ level: 'silent' });

/** One device of a person: the SDK's crypto engine, its keys on the peer's key server. */
export class PersonDevice {
  readonly #keys: MatrixKeyServer;
  readonly userId: string;
  readonly deviceId: string;
  readonly crypto: MatrixCrypto;

  private constructor(keys: MatrixKeyServer, userId: string, deviceId: string, crypto: MatrixCrypto) {
    this.#keys = keys;
    this.userId = userId;
    this.deviceId = deviceId;
    this.crypto = crypto;
  }

  /** `lose`: the device's to-device messages never leave it (its room keys never reach anyone). */
  static async open(peer: MatrixPeer, userId: string, deviceId: string, options: { lose?: boolean } = {}): Promise<PersonDevice> {
    const send: CryptoTransport = async (method, path, body) => {
      if (options.lose && path.startsWith('/sendToDevice/')) return {};
      const answer = keyRoute(peer.keys, method, path, body, userId, deviceId);
      if (!answer) throw new Error(`the person's device asked for ${method} ${path}`);
      return answer;
    };
    return new PersonDevice(peer.keys, userId, deviceId, await MatrixCrypto.open({ state: testChannelState(deviceId), userId, deviceId, send, log: silent }));
  }

  /** What its /sync would carry: to-device messages (room keys), device lists. */
  async sync(): Promise<void> {
    const { part, upTo } = this.#keys.sync(this.userId, this.deviceId);
    await this.crypto.receiveSync(part);
    this.#keys.confirm(this.userId, this.deviceId, upTo);
  }

  /** Encrypts a text for the room's members and posts it. */
  async say(peer: MatrixPeer, roomId: string, members: readonly string[], text: string): Promise<void> {
    const content = await this.crypto.encrypt(roomId, members, 'm.room.message', { msgtype: 'm.text', body: text });
    const user = (Object.keys(peer.users) as PeerUser[]).find((name) => peer.users[name] === this.userId);
    if (!user) throw new Error(`${this.userId} is not a person of the peer`);
    peer.postEvent(roomId, user, 'm.room.encrypted', content);
  }

  /** The bot's events in the room as this device reads them (after a sync for their keys). */
  async read(peer: MatrixPeer, roomId: string): Promise<Array<string | undefined>> {
    await this.sync();
    const out: Array<string | undefined> = [];
    for (const event of peer.rawBotEventsIn(roomId)) {
      if (event.type !== 'm.room.encrypted') {
        out.push(`PLAIN: ${String(event.content.body)}`);
        continue;
      }
      try {
        const clear = await this.crypto.decrypt(roomId, { ...event, room_id: roomId });
        out.push(String(clear.content.body));
      } catch {
        out.push(undefined);
      }
    }
    return out;
  }
}
