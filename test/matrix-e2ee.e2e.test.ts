/**
 * Matrix end-to-end encryption (issue 28) with the real daemon against the Matrix peer and a
 * second party with crypto of its own: the person's devices are the SDK's Rust crypto engine
 * (the OlmMachine of @matrix-org/matrix-sdk-crypto-wasm that matrix-js-sdk's initRustCrypto
 * runs), talking to the peer's key server (test/peers/matrix-keys.ts) in process and posting
 * the m.room.encrypted events it makes; the bot talks to the peer over HTTP. The last describe
 * has the person on whole matrix-js-sdk MatrixClients with initRustCrypto (the peer serves
 * their /sync too): answered after a SIGKILL, and a new device reading the next reply.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ClientEvent, createClient, SyncState, type MatrixClient } from 'matrix-js-sdk';
import { pino, type Logger } from 'pino';
import { routeGlobalSdkLogger, sdkLogger } from '../channels/matrix/client.ts';
import { UNDECRYPTABLE_NOTICE } from '../channels/matrix/e2ee.ts';
import { runChatChannelContract } from './contracts/chat-channel.ts';
import { startFakeOpenAI, type FakeOpenAI } from './fixtures/fake-openai.ts';
import { PersonDevice } from './peers/matrix-person.ts';
import { startMatrixPeer, type MatrixPeer } from './peers/matrix.ts';
import { startDaemon, tempConfig, type Daemon } from './support/cli.ts';
import { startCluster } from './support/cluster.ts';
import { startPostgres } from './support/postgres.ts';
import { quiet, until } from './support/wait.ts';

const env = { TEST_MODEL_KEY: 'sk-matrix', SWITCHBOARD_TOKEN: 'matrix-e2ee-token-0123456789' };

// With encryption on, the unencrypted rooms (the contract's DMs, group and thread) behave exactly as with it off.
// A password login: each test's fresh daemon (a fresh database) is a new device, as it must be.
runChatChannelContract('matrix with encryption on', async () => {
  const peer = await startMatrixPeer();
  return Object.assign(peer, { configSection: () => `${peer.passwordConfigSection()}encryption = true\n` });
});

describe('matrix end-to-end encryption (daemon)', () => {
  let model: FakeOpenAI;
  let peer: MatrixPeer;
  let config: ReturnType<typeof tempConfig>;
  let daemon: Daemon | undefined;
  let phone: PersonDevice;
  let room: string;
  let members: string[];
  const timings: Record<string, number> = {};

  before(async () => {
    model = await startFakeOpenAI();
    peer = await startMatrixPeer();
    config = tempConfig(
      model.baseUrl,
      `[log]\nformat = "json"\n[runtime]\nrestart_initial_seconds = 0.2\nrestart_max_seconds = 1\n${peer.configSection()}encryption = true\nallow = ["${peer.users.alice}"]\n`,
    );
  });
  after(async () => {
    if (daemon && daemon.child.exitCode === null) {
      daemon.child.kill('SIGTERM');
      await daemon.exited;
    }
    await peer.close();
    await model.close();
    config.cleanup();
    process.stderr.write(`# e2ee timings (ms): ${JSON.stringify(timings)}\n`);
  });

  const log = (): string => `\ndaemon log:\n${daemon?.stdout().slice(-6000)}\n${daemon?.stderr().slice(-2000)}`;

  async function start(): Promise<void> {
    const started = performance.now();
    daemon = startDaemon(['start', '--config', config.file], { env });
    await daemon.waitFor(/"msg":"ready"/, 'stdout', 30_000);
    timings[`start${Object.keys(timings).filter((k) => k.startsWith('start')).length}`] = Math.round(performance.now() - started);
  }

  /** The bot's events in the room once there are `n`, each decrypted (waiting for a room key that comes in a later sync). */
  const answered = (device: PersonDevice, n: number): Promise<string[]> => device.answers(peer, room, n, 30_000, log);

  it('answers an encrypted DM made the way Element makes one, encrypted', async () => {
    await start();
    await until(() => peer.keys.devices(peer.botUserId).length === 1, 'the bot uploaded its device keys', 15_000, log);
    phone = await PersonDevice.open(peer, peer.users.alice, 'ALICEPHONE');
    room = peer.inviteEncryptedDm('alice');
    await until(() => peer.botMembership(room) === 'join', 'the bot joined the encrypted DM', 15_000, log);
    members = [peer.users.alice, peer.botUserId];
    const sent = performance.now();
    await phone.say(peer, room, members, 'hello, secretly');
    const seen = await answered(phone, 1);
    timings.firstAnswer = Math.round(performance.now() - sent);
    assert.deepEqual(seen, ['echo: hello, secretly']);
    assert.ok(peer.rawBotEventsIn(room).every((event) => event.type === 'm.room.encrypted'), 'nothing in clear');
    assert.doesNotMatch(daemon!.stdout(), /cannot read end-to-end encrypted/);
  });

  it('after a SIGKILL and a restart, answers the next message as the same device', async () => {
    const before = JSON.stringify(peer.keys.query({ device_keys: { [peer.botUserId]: [] } }));
    daemon!.child.kill('SIGKILL');
    await daemon!.exited;
    await start();
    await phone.say(peer, room, members, 'still there?');
    const seen = await answered(phone, 2);
    assert.deepEqual(seen, ['echo: hello, secretly', 'echo: still there?']);
    assert.deepEqual(peer.keys.devices(peer.botUserId), [peer.botDevice], 'no new device');
    assert.equal(JSON.stringify(peer.keys.query({ device_keys: { [peer.botUserId]: [] } })), before, 'the same identity keys');
  });

  it("a new device of the person reads the bot's next reply", async () => {
    const tablet = await PersonDevice.open(peer, peer.users.alice, 'ALICETABLET');
    await phone.sync(); // the phone learns of the tablet (device_lists) and shares its next key with it too
    await phone.say(peer, room, members, 'now on two devices');
    await answered(phone, 3);
    const onTablet = await tablet.read(peer, room);
    assert.equal(onTablet.at(-1), 'echo: now on two devices');
  });

  it('a message it cannot decrypt gets one answer telling the person', async () => {
    const broken = await PersonDevice.open(peer, peer.users.alice, 'ALICEBROKEN', { lose: true });
    await broken.say(peer, room, members, 'you will never read this');
    await broken.say(peer, room, members, 'nor this');
    const seen = await answered(phone, 4);
    await quiet(1000);
    assert.equal(seen.at(-1), UNDECRYPTABLE_NOTICE);
    assert.equal((await phone.read(peer, room)).filter((text) => text === UNDECRYPTABLE_NOTICE).length, 1, 'told once');
    assert.equal(model.requests.length, 3, 'the model never saw the unreadable messages');
  });

  it('reads an encrypted file the person sends, and sends one back encrypted', async () => {
    model.fallback = (request) => {
      const last = [...request.body.messages].reverse().find((m) => m.role === 'user')?.content;
      const text = typeof last === 'string' ? last : '';
      if (request.body.messages.at(-1)?.role === 'tool') return { text: 'sent it back' };
      const saved = /saved at (\S+)/.exec(text);
      if (text.includes('send it back') && saved) return { toolCalls: [{ name: 'send_file', arguments: { path: saved[1]! } }] };
      return { text: `echo: ${text.split('\n').at(-1)}` };
    };
    const secret = Buffer.from(`a secret file ${'x'.repeat(5000)}\n`);
    await phone.sendFile(peer, room, members, 'secret.txt', secret, 'send it back');
    let files: Array<{ name: string; data: Buffer | undefined }> = [];
    await until(async () => (files = await phone.files(peer, room)).length >= 1, 'the file sent back', 30_000, log);
    assert.equal(files[0]!.name, 'secret.txt');
    assert.deepEqual(files[0]!.data, secret, 'the same bytes, decrypted by the person');
    const url = peer.rawBotEventsIn(room).at(-1)?.content;
    assert.equal(url?.url, undefined, 'no plain media url beside the ciphertext');
  });

  it('a message whose key comes late survives a SIGKILL inside its wait: answered after the restart, and one whose key never comes is told once', async () => {
    const waiting = (): number => daemon!.stdout().split('cannot be decrypted yet; waiting for its key').length - 1;
    const before = waiting();
    const notices = (await phone.read(peer, room)).filter((text) => text === UNDECRYPTABLE_NOTICE).length;
    const slow = await PersonDevice.open(peer, peer.users.alice, 'ALICESLOW', { hold: true });
    const broken = await PersonDevice.open(peer, peer.users.alice, 'ALICELOST', { lose: true });
    await slow.say(peer, room, members, 'my key comes late');
    await broken.say(peer, room, members, 'my key never comes');
    await until(() => waiting() >= before + 2, 'both messages waiting for their keys', 15_000, log);
    await quiet(1500); // the sync position past them is saved: without their own record they would never be seen again
    daemon!.child.kill('SIGKILL');
    await daemon!.exited;
    slow.release(); // the late key arrives while the daemon is down
    await start();
    let seen: Array<string | undefined> = [];
    await until(
      async () => (seen = await phone.read(peer, room)).includes('echo: my key comes late') && seen.filter((text) => text === UNDECRYPTABLE_NOTICE).length > notices,
      'the late message answered and the lost one told, after the restart',
      45_000,
      () => `${JSON.stringify(seen)}${log()}`,
    );
    await quiet(2000);
    seen = await phone.read(peer, room);
    assert.equal(seen.filter((text) => text === 'echo: my key comes late').length, 1, 'answered once');
    assert.equal(seen.filter((text) => text === UNDECRYPTABLE_NOTICE).length, notices + 1, 'told once, not twice');
    assert.ok(!model.requests.some((request) => JSON.stringify(request.body).includes('my key never comes')), 'the unreadable message never reached the model');
  });

  it("the person's device reads the bot's answer whose room key reaches it in a later sync than the answer", async () => {
    const late = await PersonDevice.open(peer, peer.users.alice, 'ALICELATE', { keysLate: true });
    const dm = peer.inviteEncryptedDm('alice');
    await until(() => peer.botMembership(dm) === 'join', 'the bot joined the second encrypted DM', 15_000, log);
    await late.say(peer, dm, members, 'is my key late?');
    await until(() => peer.rawBotEventsIn(dm).length === 1, "the bot's answer in the room", 30_000, log);
    assert.deepEqual(await late.read(peer, dm), [undefined], 'the answer is there, its room key is not: one attempt cannot decrypt it');
    await assert.rejects(late.answers(peer, dm, 1, 300), /ALICELATE can decrypt; it has 1 of the bot's events, and could not decrypt \$\S+: megolm session \S+: /, 'a key that never comes is named');
    const answer = late.answers(peer, dm, 1);
    await quiet(200);
    late.letKeysIn();
    assert.deepEqual(await answer, ['echo: is my key late?'], 'decrypted once the key came, as Element retries');
  });
});

describe('matrix end-to-end encryption in a cluster', () => {
  it('the channel moves to another node (its holder SIGKILLed), and the next encrypted message is answered there, as the same device', async (t) => {
    const pg = await startPostgres();
    const model = await startFakeOpenAI();
    const peer = await startMatrixPeer();
    const url = await pg.createDatabase();
    const channels = `${peer.configSection()}encryption = true\nallow = ["${peer.users.alice}"]\n`;
    const first = startCluster({ url, modelUrl: model.baseUrl, channels, names: ['n1'] });
    let second: ReturnType<typeof startCluster> | undefined;
    const tail = (): string => `\n${first.tail()}\n${second?.tail() ?? ''}`;
    try {
      const n1 = first.nodes[0]!;
      await first.joined(n1);
      await until(() => first.holder() === n1, 'n1 to hold Matrix', 30_000, tail);
      await until(() => peer.keys.devices(peer.botUserId).length === 1, 'the bot uploaded its device keys', 20_000, tail);
      const keysBefore = JSON.stringify(peer.keys.query({ device_keys: { [peer.botUserId]: [] } }));
      const phone = await PersonDevice.open(peer, peer.users.alice, 'ALICEPHONE');
      const room = peer.inviteEncryptedDm('alice');
      await until(() => peer.botMembership(room) === 'join', 'the bot joined the encrypted DM', 20_000, tail);
      const members = [peer.users.alice, peer.botUserId];
      await phone.say(peer, room, members, 'on the first node');
      await phone.answers(peer, room, 1, 30_000, tail); // the answer from n1

      second = startCluster({ url, modelUrl: model.baseUrl, channels, names: ['n2'] });
      const n2 = second.nodes[0]!;
      await second.joined(n2);
      // A message whose key comes late, waiting on n1 when it dies: n2 takes the wait over (it is in the shared state) and answers it.
      const slow = await PersonDevice.open(peer, peer.users.alice, 'ALICESLOW', { hold: true });
      await slow.say(peer, room, members, 'my key comes late');
      await until(() => n1.stdout().includes('cannot be decrypted yet; waiting for its key'), 'n1 waiting for the late key', 20_000, tail);
      await quiet(1500); // n1 saved the sync position past it
      const killedAt = Date.now();
      n1.daemon.child.kill('SIGKILL');
      await n1.daemon.exited;
      slow.release();
      await until(() => second!.holder() === n2, 'n2 to take Matrix over', 60_000, tail);
      const movedMs = Date.now() - killedAt;
      const sent = Date.now();
      await phone.say(peer, room, members, 'on the second node');
      const seen = await phone.answers(peer, room, 3, 60_000, tail); // the answers from n2
      t.diagnostic(`Matrix moved n1 → n2 ${movedMs} ms after the kill; the next encrypted message answered ${Date.now() - sent} ms after it was sent`);
      assert.deepEqual(seen.slice(0, 1), ['echo: on the first node']);
      assert.deepEqual(seen.slice(1).sort(), ['echo: my key comes late', 'echo: on the second node'], 'the late one too, once');
      assert.deepEqual(peer.keys.devices(peer.botUserId), [peer.botDevice], 'no new device');
      assert.equal(JSON.stringify(peer.keys.query({ device_keys: { [peer.botUserId]: [] } })), keysBefore, 'the same identity keys on n2');
    } finally {
      await second?.close();
      await first.close();
      await peer.close();
      await model.close();
      pg.stop();
    }
  });
});

/**
 * matrix-js-sdk leaves timers behind after stopClient (its request timeouts, http-api/utils.js
 * timeoutSignal, up to 110 s; RustCrypto's 5-minute one): unref'd while a test runs so they do
 * not hold the test file open. Returns the undo.
 */
function unrefLongTimers(): () => void {
  const setTimer = globalThis.setTimeout;
  const unrefLong = ((callback: (...args: unknown[]) => void, ms?: number, ...args: unknown[]) => {
    const timer = setTimer(callback, ms, ...args);
    if ((ms ?? 0) >= 60_000) timer.unref();
    return timer;
  }) as typeof setTimeout;
  globalThis.setTimeout = unrefLong;
  return () => void (globalThis.setTimeout = setTimer);
}

/** One device of alice: matrix-js-sdk's own MatrixClient with its Rust crypto (in memory), synced and ready. */
async function personClient(peer: MatrixPeer, deviceId: string, log: Logger): Promise<MatrixClient> {
  const client = createClient({ baseUrl: peer.baseUrl, userId: peer.users.alice, accessToken: peer.personToken('alice', deviceId), deviceId, logger: sdkLogger(log) });
  await client.initRustCrypto({ useIndexedDB: false });
  const prepared = new Promise<void>((resolve) => client.on(ClientEvent.Sync, (state: SyncState) => state === SyncState.Prepared && resolve()));
  await client.startClient({ initialSyncLimit: 20 });
  await prepared;
  return client;
}

/** The bot's messages in a room as a client reads them (decrypted; those it cannot decrypt left out). */
function botAnswers(client: MatrixClient, peer: MatrixPeer, roomId: string): string[] {
  return (client.getRoom(roomId)?.getLiveTimeline().getEvents() ?? [])
    .filter((event) => event.getSender() === peer.botUserId && event.getType() === 'm.room.message' && !event.isDecryptionFailure())
    .map((event) => String(event.getContent().body));
}

describe('matrix end-to-end encryption with a matrix-js-sdk client', () => {
  it("a person on matrix-js-sdk's own client with Rust crypto gets encrypted answers, also after the daemon's SIGKILL", async () => {
    const model = await startFakeOpenAI();
    const peer = await startMatrixPeer();
    const config = tempConfig(model.baseUrl, `[log]\nformat = "json"\n${peer.configSection()}encryption = true\nallow = ["${peer.users.alice}"]\n`);
    const silentLog = pino({ level: 'silent' });
    routeGlobalSdkLogger(silentLog);
    let daemon: Daemon | undefined;
    let client: MatrixClient | undefined;
    let restoreTimers = (): void => undefined;
    const log = (): string => `\npeer unknown routes: ${JSON.stringify(peer.unknownRoutes)}\ndaemon log:\n${daemon?.stdout().slice(-4000)}`;
    try {
      daemon = startDaemon(['start', '--config', config.file], { env });
      await daemon.waitFor(/"msg":"ready"/, 'stdout', 30_000);
      const room = peer.inviteEncryptedDm('alice');
      await until(() => peer.botMembership(room) === 'join', 'the bot joined the encrypted DM', 15_000, log);

      restoreTimers = unrefLongTimers();
      client = await personClient(peer, 'ALICESDK', silentLog);
      const person = client;
      const answers = (): string[] => botAnswers(person, peer, room);

      await person.sendTextMessage(room, 'hello from a real client');
      await until(() => answers().length >= 1, 'the answer, decrypted by matrix-js-sdk', 30_000, () => `${JSON.stringify(answers())}${log()}`);
      assert.deepEqual(answers(), ['echo: hello from a real client']);
      const sent = peer.rawBotEventsIn(room);
      assert.ok(sent.length > 0 && sent.every((event) => event.type === 'm.room.encrypted'), 'the bot sent nothing in clear');

      daemon.child.kill('SIGKILL');
      await daemon.exited;
      daemon = startDaemon(['start', '--config', config.file], { env });
      await daemon.waitFor(/"msg":"ready"/, 'stdout', 30_000);
      await person.sendTextMessage(room, 'and after the crash?');
      await until(() => answers().length >= 2, 'the second answer', 30_000, () => `${JSON.stringify(answers())}${log()}`);
      assert.deepEqual(answers(), ['echo: hello from a real client', 'echo: and after the crash?']);
      assert.deepEqual(peer.keys.devices(peer.botUserId), [peer.botDevice], 'no new device');
    } finally {
      client?.stopClient();
      restoreTimers();
      if (daemon && daemon.child.exitCode === null) {
        daemon.child.kill('SIGTERM');
        await daemon.exited;
      }
      await peer.close();
      await model.close();
      config.cleanup();
    }
  });
  it("the person's new device (another matrix-js-sdk client) reads the bot's next reply", async () => {
    const model = await startFakeOpenAI();
    const peer = await startMatrixPeer();
    const config = tempConfig(model.baseUrl, `[log]\nformat = "json"\n${peer.configSection()}encryption = true\nallow = ["${peer.users.alice}"]\n`);
    const silentLog = pino({ level: 'silent' });
    routeGlobalSdkLogger(silentLog);
    const restoreTimers = unrefLongTimers();
    const clients: MatrixClient[] = [];
    let daemon: Daemon | undefined;
    const log = (): string => `\npeer unknown routes: ${JSON.stringify(peer.unknownRoutes)}\ndaemon log:\n${daemon?.stdout().slice(-4000)}`;
    try {
      daemon = startDaemon(['start', '--config', config.file], { env });
      await daemon.waitFor(/"msg":"ready"/, 'stdout', 30_000);
      const room = peer.inviteEncryptedDm('alice');
      await until(() => peer.botMembership(room) === 'join', 'the bot joined the encrypted DM', 15_000, log);
      const phone = await personClient(peer, 'ALICEPHONE', silentLog);
      clients.push(phone);
      await phone.sendTextMessage(room, 'from my phone');
      await until(() => botAnswers(phone, peer, room).length >= 1, 'the answer on the phone', 30_000, () => `${JSON.stringify(botAnswers(phone, peer, room))}${log()}`);

      const laptop = await personClient(peer, 'ALICELAPTOP', silentLog); // a new device: its keys announced to the bot in device_lists.changed
      clients.push(laptop);
      await phone.sendTextMessage(room, 'now I have a laptop too');
      await until(
        () => botAnswers(laptop, peer, room).includes('echo: now I have a laptop too'),
        "the bot's next reply, decrypted on the new device",
        30_000,
        () => `laptop: ${JSON.stringify(botAnswers(laptop, peer, room))} phone: ${JSON.stringify(botAnswers(phone, peer, room))}${log()}`,
      );
      await until(() => botAnswers(phone, peer, room).length >= 2, 'and on the phone', 30_000, log);
      assert.deepEqual(botAnswers(phone, peer, room), ['echo: from my phone', 'echo: now I have a laptop too']);
      assert.ok(peer.rawBotEventsIn(room).every((event) => event.type === 'm.room.encrypted'), 'the bot sent nothing in clear');
    } finally {
      for (const client of clients) client.stopClient();
      restoreTimers();
      if (daemon && daemon.child.exitCode === null) {
        daemon.child.kill('SIGTERM');
        await daemon.exited;
      }
      await peer.close();
      await model.close();
      config.cleanup();
    }
  });
});
