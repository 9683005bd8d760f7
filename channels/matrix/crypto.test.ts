import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { pino } from 'pino';
import { channelState } from '../../src/store/channel-state.ts';
import { sqliteFile, testChannelState } from '../../test/support/channel-state.ts';
import { MatrixKeyServer } from '../../test/peers/matrix-keys.ts';
import { DeviceKeysExist, MatrixCrypto, type CryptoTransport } from './crypto.ts';

const log = pino({ level: 'silent' });
const ROOM = '!dm:localhost';
const BOT = '@bot:localhost';
const ADA = '@ada:localhost';

/** A client's key calls, straight to the key server (what the peer does over HTTP). */
function transport(server: MatrixKeyServer, user: string, device: string): CryptoTransport {
  return async (_method, path, body) => {
    if (path === '/keys/upload') return server.upload(user, device, body);
    if (path === '/keys/query') return server.query(body);
    if (path === '/keys/claim') return server.claim(body);
    const toDevice = /^\/sendToDevice\/([^/]+)\/([^/]+)$/.exec(path);
    if (toDevice) return server.sendToDevice(user, device, decodeURIComponent(toDevice[1] ?? ''), decodeURIComponent(toDevice[2] ?? ''), body);
    throw new Error(`unexpected ${path}`);
  };
}

async function sync(server: MatrixKeyServer, crypto: MatrixCrypto, user: string, device: string): Promise<void> {
  const { part, upTo } = server.sync(user, device);
  await crypto.receiveSync(part);
  await crypto.flush();
  server.confirm(user, device, upTo);
}

let n = 0;
const roomEvent = (sender: string, content: Record<string, unknown>): Record<string, unknown> => ({ type: 'm.room.encrypted', sender, content, event_id: `$e${++n}`, origin_server_ts: Date.now(), room_id: ROOM });

describe('Matrix crypto (the SDK Rust engine over our database)', () => {
  it('decrypts, and answers encrypted, across a restart as the same device, from the state in SQLite', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sb-crypto-'));
    try {
      const server = new MatrixKeyServer((user) => (user === BOT ? [ADA] : [BOT]));
      const path = join(dir, 'db.sqlite');
      const first = sqliteFile(path);
      const t0 = performance.now();
      let bot = await MatrixCrypto.open({ state: channelState(first, 'matrix'), userId: BOT, deviceId: 'BOTDEV', send: transport(server, BOT, 'BOTDEV'), log });
      const openMs = performance.now() - t0;
      const identity = bot.identityKeys;
      const ada = await MatrixCrypto.open({ state: testChannelState('ada'), userId: ADA, deviceId: 'ADAPHONE', send: transport(server, ADA, 'ADAPHONE'), log });
      assert.deepEqual(server.devices(BOT), ['BOTDEV']);

      const hello = await ada.encrypt(ROOM, [ADA, BOT], 'm.room.message', { msgtype: 'm.text', body: 'hello bot' });
      assert.equal(hello.algorithm, 'm.megolm.v1.aes-sha2');
      await sync(server, bot, BOT, 'BOTDEV');
      const t1 = performance.now();
      const clear = await bot.decrypt(ROOM, roomEvent(ADA, hello));
      const decryptMs = performance.now() - t1;
      assert.deepEqual(clear.content, { msgtype: 'm.text', body: 'hello bot' });

      // SIGKILL-like: the machine is dropped without a close; only what is in SQLite remains.
      await bot.flush();
      await first.close();
      const second = sqliteFile(path);
      const t2 = performance.now();
      bot = await MatrixCrypto.open({ state: channelState(second, 'matrix'), userId: BOT, deviceId: 'BOTDEV', send: transport(server, BOT, 'BOTDEV'), log });
      const reopenMs = performance.now() - t2;
      assert.deepEqual(bot.identityKeys, identity, 'the same device after the restart');

      const again = await ada.encrypt(ROOM, [ADA, BOT], 'm.room.message', { msgtype: 'm.text', body: 'still there?' });
      await sync(server, bot, BOT, 'BOTDEV'); // nothing new for the bot: the room key is the one it stored
      assert.deepEqual((await bot.decrypt(ROOM, roomEvent(ADA, again))).content, { msgtype: 'm.text', body: 'still there?' });

      const reply = await bot.encrypt(ROOM, [ADA, BOT], 'm.room.message', { msgtype: 'm.text', body: 'yes' });
      await sync(server, ada, ADA, 'ADAPHONE');
      assert.deepEqual((await ada.decrypt(ROOM, roomEvent(BOT, reply))).content, { msgtype: 'm.text', body: 'yes' });

      // A second device of the person reads the bot's next reply (the bot shares the room key with it).
      const tablet = await MatrixCrypto.open({ state: testChannelState('ada-tablet'), userId: ADA, deviceId: 'ADATABLET', send: transport(server, ADA, 'ADATABLET'), log });
      await sync(server, bot, BOT, 'BOTDEV'); // device_lists.changed: ada
      const next = await bot.encrypt(ROOM, [ADA, BOT], 'm.room.message', { msgtype: 'm.text', body: 'hello tablet' });
      await sync(server, tablet, ADA, 'ADATABLET');
      assert.deepEqual((await tablet.decrypt(ROOM, roomEvent(BOT, next))).content, { msgtype: 'm.text', body: 'hello tablet' });

      // An event whose room key never came cannot be decrypted: an error, never a wrong text.
      const stranger = await MatrixCrypto.open({ state: testChannelState('eve'), userId: '@eve:localhost', deviceId: 'EVE', send: transport(new MatrixKeyServer(), '@eve:localhost', 'EVE'), log });
      const lost = await stranger.encrypt(ROOM, ['@eve:localhost'], 'm.room.message', { msgtype: 'm.text', body: 'lost' });
      await assert.rejects(bot.decrypt(ROOM, roomEvent('@eve:localhost', lost)));

      // The same device with its state lost (a fresh database): refused before any key is made, never new keys under the old id.
      await assert.rejects(
        MatrixCrypto.open({ state: testChannelState('lost'), userId: BOT, deviceId: 'BOTDEV', send: transport(server, BOT, 'BOTDEV'), log }),
        DeviceKeysExist,
      );
      assert.deepEqual(bot.identityKeys, identity);

      for (const machine of [bot, ada, tablet, stranger]) await machine.close();
      await second.close();
      process.stderr.write(`# crypto open ${openMs.toFixed(0)} ms, reopen from SQLite ${reopenMs.toFixed(0)} ms, first decrypt ${decryptMs.toFixed(1)} ms\n`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a device-list change in a /sync whose position was not saved (a crash) comes again from the older position, and the bot shares its next key with the new device', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sb-crypto-'));
    try {
      const server = new MatrixKeyServer((user) => (user === BOT ? [ADA] : [BOT]));
      const path = join(dir, 'db.sqlite');
      const first = sqliteFile(path);
      const open = (db: ReturnType<typeof sqliteFile>): Promise<MatrixCrypto> => MatrixCrypto.open({ state: channelState(db, 'matrix'), userId: BOT, deviceId: 'BOTDEV', send: transport(server, BOT, 'BOTDEV'), log });
      let bot = await open(first);
      const ada = await MatrixCrypto.open({ state: testChannelState('ada2'), userId: ADA, deviceId: 'ADAPHONE', send: transport(server, ADA, 'ADAPHONE'), log });
      /** The bot's /sync key parts, as the peer answers them for a `since` and its next_batch. */
      let batch = 0;
      const botSync = (since: string | undefined): { part: Record<string, unknown>; next: string } => {
        const next = `s${++batch}`;
        return { part: server.syncPart(BOT, 'BOTDEV', since, next) as Record<string, unknown>, next };
      };
      const hello = await ada.encrypt(ROOM, [ADA, BOT], 'm.room.message', { msgtype: 'm.text', body: 'hello' });
      let saved: string | undefined;
      let response = botSync(saved);
      await bot.receiveSync(response.part);
      await bot.flush();
      saved = response.next;
      await bot.decrypt(ROOM, roomEvent(ADA, hello));
      await bot.encrypt(ROOM, [ADA, BOT], 'm.room.message', { msgtype: 'm.text', body: 'hi' }); // the bot tracks ada's devices now
      response = botSync(saved);
      await bot.receiveSync(response.part);
      await bot.flush();
      saved = response.next;

      const tablet = await MatrixCrypto.open({ state: testChannelState('ada2-tablet'), userId: ADA, deviceId: 'ADATABLET', send: transport(server, ADA, 'ADATABLET'), log });
      response = botSync(saved);
      assert.deepEqual((response.part.device_lists as { changed: string[] }).changed, [ADA], 'the new device announced');
      // Crash: the response was received, not handled, and its position not saved.
      await first.close();
      const second = sqliteFile(path);
      bot = await open(second);
      response = botSync(saved);
      assert.deepEqual((response.part.device_lists as { changed: string[] }).changed, [ADA], 'announced again from the older position');
      await bot.receiveSync(response.part);
      await bot.flush();
      saved = response.next;
      assert.deepEqual((botSync(saved).part.device_lists as { changed: string[] }).changed, [], 'and no more once the position moved past it');

      const next = await bot.encrypt(ROOM, [ADA, BOT], 'm.room.message', { msgtype: 'm.text', body: 'hello tablet' });
      await sync(server, tablet, ADA, 'ADATABLET');
      assert.deepEqual((await tablet.decrypt(ROOM, roomEvent(BOT, next))).content, { msgtype: 'm.text', body: 'hello tablet' });
      for (const machine of [bot, ada, tablet]) await machine.close();
      await second.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
