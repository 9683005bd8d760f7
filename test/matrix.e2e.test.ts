/**
 * Matrix end to end: the channel and the real daemon against a local homeserver peer
 * (test/peers/matrix.ts). The shared contract suites, then the channel on its own (history,
 * invites, encrypted rooms, threads, the saved sync position, a stalled /sync), then faults
 * with the daemon: restarts that must not replay history, SIGKILL mid-turn, dropped syncs, a
 * restarted homeserver, rate-limited sends, password login.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, afterEach, before, describe, it } from 'node:test';
import { pino } from 'pino';
import { createMatrixChannel, type MatrixChannel, type MatrixChannelOptions } from '../channels/matrix/index.ts';
import { SendError, type InboundMessage, type ListenLink } from '../src/channel.ts';
import type { MatrixConfig } from '../channels/matrix/config.ts';
import { createAttachmentStore } from '../src/inbound/attachments.ts';
import { runChannelContract } from './contracts/channel.ts';
import { runChatChannelContract, type Place } from './contracts/chat-channel.ts';
import { startFakeOpenAI, type FakeOpenAI } from './fixtures/fake-openai.ts';
import { startMatrixPeer, type MatrixPeer, type MatrixPeerOptions } from './peers/matrix.ts';
import { runCli, startDaemon, tempConfig, type Daemon } from './support/cli.ts';
import { freePort } from './support/net.ts';
import { testLogger } from './support/log.ts';
import { quiet, until } from './support/wait.ts';
import { testChannelState } from './support/channel-state.ts';
import { startPostgres } from './support/postgres.ts';
import { openPostgres } from '../src/store/postgres/sql.ts';
import { channelState, type ChannelState } from '../src/store/channel-state.ts';

const dm: Place = { kind: 'dm', user: 'alice' };
const group: Place = { kind: 'group' };
const thread: Place = { kind: 'thread' };
const env = { TEST_MODEL_KEY: 'sk-matrix', SWITCHBOARD_TOKEN: 'matrix-e2e-token-0123456789' };

// Encryption off (it is on by default): this file is the channel without crypto; test/matrix-e2ee.e2e.test.ts runs the contract with it on.
runChatChannelContract('matrix', async () => {
  const peer = await startMatrixPeer();
  const section = peer.configSection.bind(peer);
  return Object.assign(peer, { configSection: () => `${section()}encryption = false\n` });
});

runChannelContract('matrix', async () => {
  const peer = await startMatrixPeer();
  const dir = mkdtempSync(join(tmpdir(), 'sb-mx-'));
  const channel = createMatrixChannel(peerConfig(peer), {
    name: 'matrix',
    log: testLogger(),
    assistantName: 'Testbot',
    attachments: createAttachmentStore({ workspace: join(dir, 'workspace') }),
    state: testChannelState(),
    stateDir: join(dir, 'state'),
  });
  return {
    channel,
    say: (text) => peer.post('alice', dm, text),
    received: async () => peer.botMessages(dm).map((m) => m.text),
    close: async () => {
      await peer.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
});

function peerConfig(peer: MatrixPeer, extra: Partial<MatrixConfig> = {}): MatrixConfig {
  return { homeserver: peer.baseUrl, user_id: peer.botUserId, access_token: peer.botToken, rooms: [], mention_only: true, stream: false, encryption: false, ...extra };
}


/** The channel on its own against a peer: what it pushed, what it logged. */
interface Rig {
  readonly peer: MatrixPeer;
  readonly pushed: InboundMessage[];
  readonly logs: Array<Record<string, unknown>>;
  /** The channel's state dir (where earlier versions kept their files). */
  readonly stateDir: string;
  channel: MatrixChannel;
  /**
   * A fresh channel (same state, like a daemon restart) listening until stop(). `state`: the
   * channel state from now on (another handle on the same database: a new owner).
   */
  start(extra?: Partial<MatrixConfig>, options?: MatrixChannelOptions, state?: ChannelState): Promise<void>;
  stop(): Promise<void>;
  close(): Promise<void>;
}

async function rig(peerOptions: MatrixPeerOptions = {}): Promise<Rig> {
  const peer = await startMatrixPeer(peerOptions);
  const dir = mkdtempSync(join(tmpdir(), 'sb-mx-'));
  const pushed: InboundMessage[] = [];
  const logs: Array<Record<string, unknown>> = [];
  const log = pino({ level: 'debug' }, { write: (line: string) => void logs.push(JSON.parse(line) as Record<string, unknown>) });
  let abort: AbortController | undefined;
  let listening: Promise<void> | undefined;
  let channelState = testChannelState('matrix');
  const result: Rig = {
    peer,
    pushed,
    logs,
    stateDir: join(dir, 'state'),
    channel: undefined as unknown as MatrixChannel,
    async start(extra = {}, options = {}, state = channelState) {
      await result.stop();
      channelState = state;
      result.channel = createMatrixChannel(
        peerConfig(peer, extra),
        { name: 'matrix', log, assistantName: 'Testbot', attachments: createAttachmentStore({ workspace: join(dir, 'workspace') }), state, stateDir: join(dir, 'state') },
        options,
      );
      abort = new AbortController();
      let ready = false;
      const link: ListenLink = { ready: () => void (ready = true), alive: () => undefined, deaf: () => undefined };
      listening = result.channel.listen(
        async (message) => {
          pushed.push(message);
          return 'accepted';
        },
        abort.signal,
        link,
      );
      listening.catch(() => undefined);
      await until(() => ready, 'ready');
    },
    async stop() {
      abort?.abort();
      await listening?.catch(() => undefined);
      abort = undefined;
      listening = undefined;
    },
    async close() {
      await result.stop();
      await peer.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return result;
}

const texts = (messages: readonly InboundMessage[]): string[] => messages.map((m) => m.text);
const warnings = (r: Rig, pattern: RegExp): Array<Record<string, unknown>> => r.logs.filter((l) => l.level === 40 && pattern.test(String(l.msg)));

describe('matrix channel', () => {
  let r: Rig;
  afterEach(async () => r.close());

  it('answers nothing from before its first start, and resumes from the saved sync position after a restart', async () => {
    r = await rig();
    await r.peer.post('alice', dm, 'old history');
    await r.start();
    await r.peer.post('alice', dm, 'first');
    await until(() => r.pushed.length === 1, 'the first message');
    await r.stop();
    await r.peer.post('alice', dm, 'while down');
    await r.start();
    await until(() => r.pushed.length === 2, 'the message sent while down');
    await r.peer.post('alice', dm, 'after');
    await until(() => r.pushed.length === 3, 'the next message');
    await quiet(300);
    assert.deepEqual(texts(r.pushed), ['first', 'while down', 'after']);
    const first = r.pushed[0]!;
    assert.equal(first.account, r.peer.botUserId);
    assert.equal(first.chat, r.peer.roomId(dm));
    assert.match(first.id, /^\$/);
    assert.deepEqual(first.sender, { id: r.peer.users.alice, name: 'Alice' });
    assert.equal(first.direct, true);
  });

  it('a new owner on another node resumes from the sync position the last owner left in PostgreSQL', async () => {
    const server = await startPostgres();
    const url = await server.createDatabase();
    const [first, second] = await Promise.all([openPostgres({ url, log: testLogger() }), openPostgres({ url, log: testLogger() })]);
    try {
      r = await rig();
      await r.peer.post('alice', dm, 'old history');
      await r.start({}, {}, channelState(first, 'matrix'));
      await r.peer.post('alice', dm, 'to the first owner');
      await until(() => r.pushed.length === 1, 'the first message');
      await r.stop(); // the first node dies; its lease passes to another
      await r.peer.post('alice', dm, 'between owners');
      await r.start({}, {}, channelState(second, 'matrix'));
      await until(() => r.pushed.length === 2, 'the message sent between owners');
      await quiet(300);
      assert.deepEqual(texts(r.pushed), ['to the first owner', 'between owners'], 'neither history nor the first owner\'s message again');
    } finally {
      await r.stop();
      await Promise.all([first.close(), second.close()]);
      server.stop();
    }
  });

  it('imports the sync position of an earlier version from sync.json once, and renames the file', async () => {
    r = await rig();
    await r.peer.post('alice', dm, 'old history');
    // a run of an earlier version: its token is in a file of the state dir, not in the store
    const earlier = testChannelState('matrix');
    await r.start({}, {}, earlier);
    await r.peer.post('alice', dm, 'seen by the earlier version');
    await until(() => r.pushed.length === 1, 'the first message');
    await r.stop();
    const dir = r.stateDir;
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'sync.json'), (await earlier.get('sync'))!);
    await r.peer.post('alice', dm, 'while upgrading');
    await r.start({}, {}, testChannelState('matrix'));
    await until(() => r.pushed.length === 2, 'the message sent while upgrading');
    await quiet(300);
    assert.deepEqual(texts(r.pushed), ['seen by the earlier version', 'while upgrading']);
    assert.equal(existsSync(join(dir, 'sync.json')), false);
    assert.equal(existsSync(join(dir, 'sync.json.imported')), true);
    assert.ok(r.logs.some((line) => line.level === 30 && /imported from its old file/.test(String(line.msg))), 'logged at info');
  });

  it('tells addressed room messages from chatter: mentions, pills, names, replies to the bot; never notices or edits', async () => {
    r = await rig();
    await r.start();
    const room = r.peer.groupRoom;
    await r.peer.post('bob', group, 'just chatter');
    await r.peer.post('alice', group, 'what do you think?', { mention: true });
    r.peer.postIn(room, 'bob', { msgtype: 'm.text', body: 'testbot, your view?' });
    r.peer.postIn(room, 'bob', { msgtype: 'm.notice', body: 'Switchboard: I am a bot' });
    await until(() => r.pushed.length === 3, 'three messages');
    await r.channel.send({ channel: 'matrix', account: r.peer.botUserId, chat: room, text: 'my answer', replyTo: r.pushed[1]!.id });
    const answer = r.peer.rawBotEvents(group).at(-1)!;
    assert.deepEqual(answer.content['m.relates_to'], { 'm.in_reply_to': { event_id: r.pushed[1]!.id } }, 'a room reply quotes what it answers');
    r.peer.postIn(room, 'bob', { msgtype: 'm.text', body: 'good point', 'm.relates_to': { 'm.in_reply_to': { event_id: answer.event_id } } });
    r.peer.postIn(room, 'bob', { msgtype: 'm.text', body: '* edited', 'm.new_content': { msgtype: 'm.text', body: 'edited' }, 'm.relates_to': { rel_type: 'm.replace', event_id: r.pushed[0]!.id } });
    await until(() => r.pushed.length === 4, 'the reply to the bot');
    await quiet(300);
    assert.deepEqual(
      r.pushed.map((m) => [m.text, m.addressed, m.direct]),
      [
        ['just chatter', false, false],
        ['what do you think?', true, false],
        ['testbot, your view?', true, false],
        ['good point', true, false],
      ],
    );
  });

  it('keeps the test thread as its own conversation and replies inside it (thread relation with fallback)', async () => {
    r = await rig();
    await r.start();
    await r.peer.post('alice', thread, 'in the thread', { mention: true });
    await until(() => r.pushed.length === 1, 'the thread message');
    const message = r.pushed[0]!;
    const root = message.thread;
    assert.ok(root?.startsWith('$'), 'the thread is the root event id');
    await r.channel.send({ channel: 'matrix', account: message.account, chat: message.chat, thread: root, text: 'part one', replyTo: message.id });
    await r.channel.send({ channel: 'matrix', account: message.account, chat: message.chat, thread: root, text: 'part two' });
    const [one, two] = r.peer.rawBotEvents(thread);
    assert.deepEqual(one!.content['m.relates_to'], { rel_type: 'm.thread', event_id: root, is_falling_back: true, 'm.in_reply_to': { event_id: message.id } });
    assert.deepEqual(two!.content['m.relates_to'], { rel_type: 'm.thread', event_id: root, is_falling_back: true, 'm.in_reply_to': { event_id: one!.event_id } });
    assert.deepEqual(r.peer.botMessages(group), [], 'nothing landed in the main timeline');
  });

  it('accepts an invite from an allowed sender, ignores a stranger\'s, and treats a two-person room as a DM', async () => {
    r = await rig();
    await r.start({ allow: [r.peer.users.alice] });
    const fromAlice = r.peer.invite('alice', { direct: true });
    const fromMallory = r.peer.invite('mallory');
    await until(() => r.peer.botMembership(fromAlice) === 'join', 'the bot joined alice\'s room');
    await until(() => warnings(r, /ignored an invite/).length === 1, 'the ignored invite logged');
    assert.equal(r.peer.botMembership(fromMallory), 'invite', 'the stranger\'s invite is left alone');
    assert.match(JSON.stringify(warnings(r, /ignored an invite/)[0]), new RegExp(r.peer.users.mallory));
    r.peer.postIn(fromAlice, 'alice', { msgtype: 'm.text', body: 'hi in my room' });
    await until(() => r.pushed.length === 1, 'the message in the new room');
    assert.equal(r.pushed[0]!.chat, fromAlice);
    assert.equal(r.pushed[0]!.direct, true);
    assert.deepEqual(r.channel.stats, { encryptedEvents: 0, invitesAccepted: 1, invitesIgnored: 1 });
  });

  it('reports an encrypted room, and every encrypted message in it, in the log with the fix', async () => {
    r = await rig();
    await r.start();
    const room = r.peer.encryptedRoom;
    const roomWarnings = warnings(r, /end-to-end encrypted/);
    assert.equal(roomWarnings.length, 1, 'the encrypted room is named once at start');
    assert.equal(roomWarnings[0]!.room, room);
    assert.match(String(roomWarnings[0]!.msg), /disable encryption for this room or use an unencrypted room/);
    const eventId = r.peer.postEncrypted('alice');
    await until(() => warnings(r, /encrypted message/).length === 1, 'the encrypted message reported');
    const report = warnings(r, /encrypted message/)[0]!;
    assert.equal(report.room, room);
    assert.equal(report.event, eventId);
    assert.equal(r.channel.stats.encryptedEvents, 1);
    assert.deepEqual(r.pushed, []);
    await until(() => warnings(r, /told the people in/).length === 1, 'the people there told', 5000, () => `\n${r.logs.slice(-6).map((l) => JSON.stringify(l)).join('\n')}`);
    assert.deepEqual(r.channel.statusNotes(), [`1 encrypted room not supported (${room}); 1 encrypted message unread; the people there were told once (a plain notice)`], 'status shows it too');
  });

  it('answers an encrypted DM (made the way Element makes one) once, visibly: a plain notice, never again — not after a restart either — and status shows it', async () => {
    r = await rig();
    await r.start({ allow: [r.peer.users.alice] });
    const room = r.peer.inviteEncryptedDm('alice');
    await until(() => r.peer.botMembership(room) === 'join', 'the bot joined the encrypted DM');
    await until(() => r.peer.rawBotEventsIn(room).length === 1, 'the notice in the encrypted DM');
    r.peer.postEncrypted('alice', room);
    r.peer.postEncrypted('alice', room);
    await until(() => r.channel.stats.encryptedEvents === 2, 'both encrypted messages seen');
    await r.start({ allow: [r.peer.users.alice] }); // a restart: the notice is not repeated
    r.peer.postEncrypted('alice', room);
    await until(() => r.channel.stats.encryptedEvents === 1, 'the encrypted message after the restart seen');
    await quiet(300);
    const [notice, ...more] = r.peer.rawBotEventsIn(room);
    assert.deepEqual(more, [], 'told once');
    assert.equal(notice!.type, 'm.room.message', 'a plain (unencrypted) event: Element shows it, marked as not encrypted');
    assert.equal(notice!.content.msgtype, 'm.notice');
    assert.match(String(notice!.content.body), /end-to-end encrypted/);
    assert.match(String(notice!.content.body), /without encryption/);
    assert.deepEqual(r.pushed, []);
    const notes = r.channel.statusNotes().join('\n');
    assert.match(notes, new RegExp(`encrypted room.*${room.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`));
    assert.match(notes, /told once/);
  });

  it('tells a room that turns encryption on later, once, and an already-encrypted room once when someone writes there', async () => {
    r = await rig();
    await r.start({ allow: [r.peer.users.alice] });
    const dmRoom = r.peer.roomId(dm);
    r.peer.encryptRoom(dmRoom, 'alice');
    await until(() => r.peer.rawBotEventsIn(dmRoom).length === 1, 'the notice after encryption was turned on');
    r.peer.postEncrypted('alice', dmRoom);
    r.peer.postEncrypted('bob', r.peer.encryptedRoom);
    r.peer.postEncrypted('alice', r.peer.encryptedRoom);
    await until(() => r.channel.stats.encryptedEvents === 3, 'the encrypted messages seen');
    await until(() => r.peer.rawBotEventsIn(r.peer.encryptedRoom).length === 1, 'the notice in the encrypted group room');
    await quiet(300);
    assert.equal(r.peer.rawBotEventsIn(dmRoom).length, 1, 'the DM was told once');
    assert.equal(r.peer.rawBotEventsIn(r.peer.encryptedRoom).length, 1, 'the group room was told once');
    assert.equal(warnings(r, /told the people in/).length, 2, 'each notice logged');
  });

  it('joins the configured rooms at start and answers there', async () => {
    r = await rig();
    await r.start({ rooms: ['#lobby:localhost', '#nowhere:localhost'] });
    assert.equal(r.peer.botMembership(r.peer.lobbyRoom), 'join');
    assert.equal(warnings(r, /could not join a configured room/).length, 1, 'an unknown alias is reported, not fatal');
    r.peer.postIn(r.peer.lobbyRoom, 'bob', { msgtype: 'm.text', body: 'Switchboard: welcome', 'm.mentions': { user_ids: [r.peer.botUserId] } });
    await until(() => r.pushed.length === 1, 'the lobby message');
    assert.deepEqual([r.pushed[0]!.text, r.pushed[0]!.addressed, r.pushed[0]!.chat], ['welcome', true, r.peer.lobbyRoom]);
  });

  it('fetches the events a sync leaves out after a long absence (limited timeline), each once and in order', async () => {
    r = await rig();
    await r.start({ allow: ['*'] });
    await r.stop();
    await r.peer.post('alice', group, 'first while away', { mention: true });
    for (let i = 0; i < 69; i++) await r.peer.post('bob', group, `chatter ${i}`);
    await r.start({ allow: ['*'] });
    await until(() => r.pushed.length === 70, 'all 70 messages', 10_000, () => ` (got ${r.pushed.length})`);
    await quiet(300);
    assert.equal(r.pushed.length, 70);
    assert.deepEqual([r.pushed[0]!.text, r.pushed[0]!.addressed], ['first while away', true]);
    assert.deepEqual(texts(r.pushed.slice(1)), Array.from({ length: 69 }, (_, i) => `chatter ${i}`));
    assert.ok(r.peer.calls.some((c) => c.path.endsWith('/messages')), 'the gap came from /messages');
  });

  it('gets past a hung /sync (local timeout) and dropped /sync connections without losing a message', async () => {
    r = await rig();
    await r.start({}, { syncTimeoutMs: 500 });
    r.peer.stallSyncs();
    await r.peer.post('alice', dm, 'during the stall');
    await until(() => warnings(r, /\/sync failed/).length >= 1, 'the hung sync given up', 10_000);
    r.peer.unstall();
    await until(() => r.pushed.length === 1, 'the message after the stall');
    await until(() => r.peer.syncsWaiting > 0, 'a waiting sync');
    assert.ok(r.peer.dropSyncs() >= 1);
    await r.peer.post('alice', dm, 'after the drop');
    await until(() => r.pushed.length === 2, 'the message after the drop');
    await quiet(300);
    assert.deepEqual(texts(r.pushed), ['during the stall', 'after the drop']);
  });

  it('downloads files from the legacy media endpoint when the server has no authenticated media', async () => {
    r = await rig({ legacyMediaOnly: true });
    await r.start();
    await r.peer.postFile('alice', dm, { name: 'notes.txt', mime: 'text/plain', data: new TextEncoder().encode('legacy bytes') });
    await until(() => r.pushed.length === 1, 'the file message');
    const [attachment] = r.pushed[0]!.attachments ?? [];
    assert.equal(r.pushed[0]!.text, '', 'a file without a caption has no text');
    assert.equal(attachment?.name, 'notes.txt');
    assert.ok(attachment?.path, `saved: ${JSON.stringify(attachment)}`);
    assert.equal(attachment.size, 12);
  });

  it('maps send failures: rate limits wait Retry-After (else retry_after_ms), a room the bot is not in is permanent', async () => {
    r = await rig();
    await r.start();
    const ref = { channel: 'matrix', account: r.peer.botUserId, chat: r.peer.roomId(dm) };
    r.peer.rateLimitSends(1, 700); // as Synapse answers: retry_after_ms 700, Retry-After: 1
    await assert.rejects(r.channel.send({ ...ref, text: 'too fast' }), (error: Error & { retryAfterMs?: number; permanent?: boolean }) => error.retryAfterMs === 1000 && error.permanent === false);
    r.peer.rateLimitSends(1, 700, { retryAfterSeconds: null }); // a server without the header
    await assert.rejects(r.channel.send({ ...ref, text: 'too fast' }), (error: Error & { retryAfterMs?: number; permanent?: boolean }) => error.retryAfterMs === 700 && error.permanent === false);
    await r.channel.send({ ...ref, text: 'now' });
    assert.deepEqual(r.peer.botMessages(dm).map((m) => m.text), ['now']);
    await assert.rejects(r.channel.send({ ...ref, chat: r.peer.lobbyRoom, text: 'not a member' }), (error: Error & { permanent?: boolean }) => error.permanent === true && /M_FORBIDDEN/.test(error.message));
  });

  it("is rate-limited like Synapse by default (rc_message 0.2/s, bursts of 10, sends and edits alike): the 429 waits Retry-After and covers every room", async () => {
    r = await rig();
    await r.start();
    const ref = { channel: 'matrix', account: r.peer.botUserId, chat: r.peer.roomId(dm) };
    const ids: string[] = [];
    for (let i = 0; i < 9; i++) ids.push(await r.channel.sendDraft({ ...ref, text: `part ${i}` }));
    await r.channel.edit(ref, ids[0]!, 'part 0, edited'); // the 10th event of the burst
    const refused = await r.channel.edit(ref, ids[1]!, 'one edit too many').then(
      () => assert.fail('the 11th event within the burst must be refused'),
      (error: unknown) => error as SendError,
    );
    assert.ok(refused instanceof SendError);
    assert.equal(refused.permanent, false);
    // The 11th event is allowed 5 s after the bucket started filling: retry_after_ms is 5000 less the time
    // the burst took (e.g. 4785), Retry-After that rounded up to whole seconds — the header is what counts.
    assert.ok(refused.retryAfterMs! % 1000 === 0 && refused.retryAfterMs! >= 4000 && refused.retryAfterMs! <= 5000, `waits Retry-After, not retry_after_ms: ${refused.retryAfterMs}`);
    assert.equal(refused.scope, 'channel', 'the limit is per user: another room waits too');
    const other = { ...ref, chat: r.peer.roomId({ kind: 'dm', user: 'bob' }) };
    await assert.rejects(r.channel.send({ ...other, text: 'another room' }), (error: SendError) => error.retryAfterMs !== undefined && error.scope === 'channel');
    assert.equal(r.peer.callsInsideWait(), 1, 'the send to the other room arrived inside the announced wait');
    assert.equal(r.peer.callsInsideWait(other.chat), 1);
    assert.equal(r.peer.waitsAnnounced, 2);
  });

  it("reads m.upload.size from the media config before uploading: a larger file is described to the person, not uploaded", async () => {
    r = await rig({ maxUploadBytes: 1000 });
    await r.start();
    const dir = mkdtempSync(join(tmpdir(), 'sb-mx-file-'));
    try {
      const big = join(dir, 'big.bin');
      const small = join(dir, 'small.txt');
      writeFileSync(big, Buffer.alloc(5000, 1));
      writeFileSync(small, 'fits');
      const ref = { channel: 'matrix', account: r.peer.botUserId, chat: r.peer.roomId(dm) };
      await r.channel.sendFile(ref, { path: big, name: 'big.bin' });
      await r.channel.sendFile(ref, { path: small, name: 'small.txt' });
      assert.deepEqual(r.peer.botFiles(dm), ['small.txt']);
      const texts = r.peer.botMessages(dm).map((m) => m.text);
      assert.equal(texts.length, 1, JSON.stringify(texts));
      assert.match(texts[0]!, /big\.bin/);
      assert.match(texts[0]!, /too large/);
      const uploads = r.peer.calls.filter((c) => c.path === '/_matrix/media/v3/upload');
      assert.deepEqual(uploads.map((c) => c.status), [200], 'only the file within the limit was uploaded');
      assert.ok(r.peer.calls.some((c) => c.path === '/_matrix/client/v1/media/config'), 'the authenticated media config (v1.11) was asked');
      assert.equal(r.channel.maxFileBytes, 1000);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('describes a file the homeserver refuses as too large (413 M_TOO_LARGE) when its config did not say', async () => {
    r = await rig({ maxUploadBytes: 1000, legacyMediaOnly: true, advertiseUploadSize: false });
    await r.start();
    const dir = mkdtempSync(join(tmpdir(), 'sb-mx-file-'));
    try {
      const big = join(dir, 'big.bin');
      writeFileSync(big, Buffer.alloc(5000, 1));
      const ref = { channel: 'matrix', account: r.peer.botUserId, chat: r.peer.roomId(dm) };
      await r.channel.sendFile(ref, { path: big, name: 'big.bin' });
      assert.ok(r.peer.calls.some((c) => c.path === '/_matrix/media/v3/config' && c.status === 200), 'the legacy media config was asked when v1 is unknown');
      assert.deepEqual(r.peer.calls.filter((c) => c.path === '/_matrix/media/v3/upload').map((c) => c.status), [413]);
      assert.deepEqual(r.peer.botFiles(dm), []);
      assert.match(r.peer.botMessages(dm)[0]?.text ?? '', /big\.bin.*too large/s);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('matrix peer', () => {
  // In a child process: the SDK's sync loop leaves long timers behind (its localTimeoutMs) that would keep this one alive.
  it("serves matrix-js-sdk's own sync loop (startClient): rooms, members, encryption state, live events", async () => {
    const peer = await startMatrixPeer();
    try {
      const script = `
        import { ClientEvent, createClient, RoomEvent } from 'matrix-js-sdk';
        import { logger } from 'matrix-js-sdk/lib/logger.js';
        logger.setLevel('silent');
        const quiet = { trace() {}, debug() {}, info() {}, warn() {}, error() {}, getChild: () => quiet };
        const [baseUrl, userId, accessToken, dm, group, secret] = process.argv.slice(1);
        const client = createClient({ baseUrl, userId, accessToken, logger: quiet });
        client.on(RoomEvent.Timeline, (event, room, toStart) => {
          if (!toStart && event.getType() === 'm.room.message' && event.getContent().body === 'live one') {
            console.log(JSON.stringify({ dm: client.getRoom(dm)?.getJoinedMemberCount(), group: client.getRoom(group)?.getJoinedMemberCount(), encrypted: client.getRoom(secret)?.hasEncryptionStateEvent() }));
            process.exit(0);
          }
        });
        client.on(ClientEvent.Sync, (state) => state === 'PREPARED' && console.log('PREPARED'));
        await client.startClient({ initialSyncLimit: 1 });
        setTimeout(() => process.exit(3), 10_000);
      `;
      const child = spawn(process.execPath, ['--input-type=module', '-e', script, peer.baseUrl, peer.botUserId, peer.botToken, peer.roomId(dm), peer.groupRoom, peer.encryptedRoom], { cwd: fileURLToPath(new URL('..', import.meta.url)) });
      let out = '';
      child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString('utf8')));
      child.stderr.on('data', (chunk: Buffer) => (out += chunk.toString('utf8')));
      const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
      await until(() => out.includes('PREPARED'), 'the SDK prepared', 10_000, () => out);
      await peer.post('alice', dm, 'live one');
      assert.equal(await exited, 0, out);
      assert.deepEqual(JSON.parse(out.trim().split('\n').at(-1)!), { dm: 2, group: 4, encrypted: true });
      assert.deepEqual(peer.unknownRoutes, []);
      assert.ok(peer.calls.some((c) => c.path === '/_matrix/client/v3/pushrules/') && peer.calls.some((c) => c.path.endsWith('/filter')));
    } finally {
      await peer.close();
    }
  });
});

describe('matrix daemon faults', () => {
  let model: FakeOpenAI;
  let peer: MatrixPeer;
  let config: ReturnType<typeof tempConfig>;
  let daemon: Daemon | undefined;

  before(async () => {
    model = await startFakeOpenAI();
    peer = await startMatrixPeer();
  });
  after(async () => {
    await stop();
    await peer.close();
    await model.close();
  });

  const replies = (place: Place = dm): string[] => peer.botMessages(place).map((m) => m.text);
  const log = (): string => `\nbot messages: ${JSON.stringify(replies())}\ndaemon log:\n${daemon?.stdout().slice(-4000)}\n${daemon?.stderr().slice(-2000)}`;

  /** A daemon on a fresh data dir (or the same one with `reuse`), fast restarts. */
  async function start(reuse = false, section = peer.configSection(), extra = `allow = ["${peer.users.alice}"]\n`): Promise<void> {
    if (!reuse) {
      peer.reset();
      model.requests.length = 0;
      config = tempConfig(model.baseUrl, `[log]\nformat = "json"\n[runtime]\nrestart_initial_seconds = 0.2\nrestart_max_seconds = 1\n${section}encryption = false\n${extra}`);
    }
    daemon = startDaemon(['start', '--config', config.file], { env });
    await daemon.waitFor(/"msg":"ready"/, 'stdout', 20_000);
  }

  async function stop(cleanup = true): Promise<void> {
    if (daemon && daemon.child.exitCode === null && daemon.child.signalCode === null) {
      daemon.child.kill('SIGTERM');
      const { code } = await daemon.exited;
      assert.equal(code, 0, `daemon exit code${log()}`);
    }
    daemon = undefined;
    if (cleanup) config?.cleanup();
  }

  async function roundTrip(text: string, n: number): Promise<void> {
    await peer.post('alice', dm, text);
    await until(() => replies().length >= n, `reply ${n} (${text})`, 15_000, log);
  }

  it('after a restart answers what was sent while it was down, once, and nothing from before (password login reused)', async () => {
    await peer.post('alice', dm, 'history before the first start');
    await start(false, peer.passwordConfigSection());
    assert.match(daemon!.stdout(), new RegExp(`"room":"${peer.encryptedRoom}".*disable encryption for this room`), 'the encrypted room is reported');
    await roundTrip('one', 1);
    await stop(false);
    await peer.post('alice', dm, 'while down');
    await start(true);
    await until(() => replies().length >= 2, 'the reply to the message sent while down', 15_000, log);
    await roundTrip('after', 3);
    await quiet();
    assert.deepEqual(replies(), ['echo: one', 'echo: while down', 'echo: after']);
    assert.equal(model.requests.length, 3, 'nothing was answered twice, history never');
    assert.equal(peer.logins, 1, 'the session from the first login was kept for the restart');
    await stop();
  });

  it('answers exactly once after SIGKILL between receiving a message and replying', async () => {
    await start();
    model.script({ text: 'never sent', delayMs: 60_000 });
    await peer.post('alice', dm, 'survive this');
    await model.waitForRequests(1);
    daemon!.child.kill('SIGKILL');
    await daemon!.exited;
    await peer.post('alice', dm, 'and this one, sent while killed');
    await start(true);
    await until(() => replies().length >= 2, 'both replies after the restart', 20_000, log);
    await quiet();
    assert.deepEqual(replies().sort(), ['echo: and this one, sent while killed', 'echo: survive this']);
    assert.equal(model.requests.length, 3, 'the killed turn ran once more, the new message once');
    await stop();
  });

  it('reconnects after dropped /sync connections and a restarted homeserver, losing and doubling nothing', async () => {
    await start();
    await roundTrip('one', 1);
    await until(() => peer.syncsWaiting > 0, 'a waiting sync');
    assert.ok(peer.dropSyncs() >= 1);
    await roundTrip('two', 2);
    const restarting = peer.restart(500);
    await peer.post('alice', dm, 'while the server is down');
    await restarting;
    await until(() => replies().length >= 3, 'the reply after the server restart', 20_000, log);
    await roundTrip('four', 4);
    await quiet();
    assert.deepEqual(replies(), ['echo: one', 'echo: two', 'echo: while the server is down', 'echo: four']);
    await stop();
  });

  it('delivers a reply once after M_LIMIT_EXCEEDED, waiting retry_after_ms', async () => {
    await start();
    peer.rateLimitSends(1, 1000);
    await roundTrip('rate me', 1);
    await quiet();
    assert.deepEqual(replies(), ['echo: rate me']);
    const sends = peer.calls.filter((c) => c.method === 'PUT' && c.path.includes('/send/m.room.message/'));
    assert.deepEqual(
      sends.map((c) => c.status),
      [429, 200],
    );
    assert.ok(sends[1]!.at - sends[0]!.at >= 900, `retried after ${sends[1]!.at - sends[0]!.at} ms, before retry_after_ms`);
    await stop();
  });

  it('accepts an invite from an allowed user and answers in that room; ignores a stranger\'s invite', async () => {
    await start();
    const room = peer.invite('alice');
    const strangers = peer.invite('mallory');
    await until(() => peer.botMembership(room) === 'join', 'the bot in alice\'s room', 15_000, log);
    peer.postIn(room, 'alice', { msgtype: 'm.text', body: 'hello in my new room' });
    await until(() => peer.botMessagesIn(room).length === 1, 'the reply in the new room', 15_000, log);
    assert.equal(peer.botMessagesIn(room)[0]!.text, 'echo: hello in my new room');
    assert.equal(peer.botMembership(strangers), 'invite');
    assert.match(daemon!.stdout(), /ignored an invite/);
    await stop();
  });

  it('answers an encrypted DM from Element once, with a notice the person sees, and `switchboard status` shows it', async () => {
    const port = await freePort();
    await start(false, peer.configSection(), `allow = ["${peer.users.alice}"]\n[gateway]\nlisten = "127.0.0.1:${port}"\ntoken = "\${SWITCHBOARD_TOKEN}"\n`);
    const room = peer.inviteEncryptedDm('alice');
    await until(() => peer.botMembership(room) === 'join', 'the bot joined the encrypted DM', 15_000, log);
    await until(() => peer.rawBotEventsIn(room).length === 1, 'the notice in the encrypted DM', 15_000, log);
    peer.postEncrypted('alice', room);
    peer.postEncrypted('alice', room);
    await until(() => (daemon!.stdout().match(/an encrypted message in room/g) ?? []).length === 2, 'both encrypted messages reported', 15_000, log);
    await quiet();
    const [notice, ...more] = peer.rawBotEventsIn(room);
    assert.deepEqual(more, [], 'told once, never again');
    assert.equal(notice!.type, 'm.room.message', 'unencrypted: Element shows it (marked as not encrypted)');
    assert.equal(notice!.content.msgtype, 'm.notice');
    assert.equal(model.requests.length, 0, 'nothing reached the model');
    const human = await runCli(['status', '--config', config.file], { env });
    assert.equal(human.code, 0, human.stderr);
    assert.match(human.stdout, /note: .*encrypted rooms? not supported.*told once/);
    const json = await runCli(['status', '--json', '--config', config.file], { env });
    const report = JSON.parse(json.stdout) as { channels: Array<{ name: string; notes?: string[] }> };
    assert.match(report.channels.find((c) => c.name === 'matrix')?.notes?.join('\n') ?? '', new RegExp(`${room.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}.*told once`));
    await stop();
  });

  it('serves every route matrix-js-sdk and the channel asked for', () => {
    assert.deepEqual(peer.unknownRoutes, []);
  });
});
