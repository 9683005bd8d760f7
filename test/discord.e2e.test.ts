/**
 * Discord end to end: the contract suites over the local Discord peer (discord.js against a
 * real gateway protocol), then faults — a dropped socket (resumed, missed events replayed), a
 * refused resume (what was sent meanwhile is caught up over REST), a zombie connection,
 * rate limits, and a SIGKILL between receiving and replying — each message answered once.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { pino } from 'pino';
import { createDiscordChannel, type DiscordChannel } from '../channels/discord/index.ts';
import { SendError, type InboundMessage } from '../src/channel.ts';
import { refOf } from '../src/conversation.ts';
import { createAttachmentStore } from '../src/inbound/attachments.ts';
import { runChannelContract } from './contracts/channel.ts';
import { runChatChannelContract, type Place } from './contracts/chat-channel.ts';
import { startFakeOpenAI, type FakeOpenAI } from './fixtures/fake-openai.ts';
import { startDiscordPeer, type DiscordPeer } from './peers/discord.ts';
import { startDaemon, tempConfig, type Daemon } from './support/cli.ts';
import { testLogger } from './support/log.ts';
import { until } from './support/wait.ts';
import { testChannelState } from './support/channel-state.ts';

const dm: Place = { kind: 'dm', user: 'alice' };
const group: Place = { kind: 'group' };
const thread: Place = { kind: 'thread' };
const env = { TEST_MODEL_KEY: 'sk-discord' };

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));


/** A channel (no daemon) wired to a peer, with what it pushed. */
async function directChannel(peer: DiscordPeer): Promise<{ channel: DiscordChannel; pushed: InboundMessage[]; stop(): Promise<void> }> {
  const workspace = mkdtempSync(join(tmpdir(), 'sb-discord-'));
  const channel = createDiscordChannel(
    { token: peer.token, api_base: peer.apiBase, mention_only: true, stream: false },
    { name: 'discord', log: testLogger(), assistantName: 'Testbot', attachments: createAttachmentStore({ workspace }), state: testChannelState(), stateDir: join(workspace, 'state') },
  );
  const pushed: InboundMessage[] = [];
  const abort = new AbortController();
  let ready = false;
  const listening = channel.listen(
    async (message) => {
      pushed.push(message);
      return 'accepted';
    },
    abort.signal,
    { ready: () => (ready = true), alive: () => undefined, deaf: () => undefined },
  );
  await until(() => ready, 'the channel to be ready');
  return {
    channel,
    pushed,
    async stop() {
      abort.abort();
      await listening;
      rmSync(workspace, { recursive: true, force: true });
    },
  };
}

/** Discord's route buckets (5 per 5 s per channel) compressed tenfold: the suites are not about rate limits. */
const quick = { rateLimits: { messages: { limit: 5, resetAfterMs: 500 }, edits: { limit: 5, resetAfterMs: 500 }, typing: { limit: 5, resetAfterMs: 500 } } };

runChatChannelContract('discord', () => startDiscordPeer(quick));

runChannelContract('discord', async () => {
  const peer = await startDiscordPeer();
  const workspace = mkdtempSync(join(tmpdir(), 'sb-discord-'));
  const channel = createDiscordChannel(
    { token: peer.token, api_base: peer.apiBase, mention_only: true, stream: false },
    { name: 'discord', log: testLogger(), assistantName: 'Testbot', attachments: createAttachmentStore({ workspace }), state: testChannelState(), stateDir: join(workspace, 'state') },
  );
  return {
    channel,
    say: (text) => peer.post('alice', dm, text),
    received: async () => peer.botMessages(dm).map((message) => message.text),
    close: async () => {
      await peer.close();
      rmSync(workspace, { recursive: true, force: true });
    },
  };
});

describe('discord channel: replies, addressing and errors', () => {
  let peer: DiscordPeer;
  let direct: Awaited<ReturnType<typeof directChannel>>;

  before(async () => {
    peer = await startDiscordPeer();
    direct = await directChannel(peer);
  });
  after(async () => {
    await direct.stop();
    await peer.close();
  });

  it('references the answered message on the first part only, and never pings anyone', async () => {
    await peer.post('alice', group, 'question', { mention: true });
    await until(() => direct.pushed.length === 1, 'the push');
    const inbound = direct.pushed[0]!;
    assert.equal(inbound.text, 'question');
    assert.equal(inbound.addressed, true);
    await direct.channel.send({ ...refOf(inbound), text: 'part one @everyone', replyTo: inbound.id });
    await direct.channel.send({ ...refOf(inbound), text: 'part two', replyTo: inbound.id });
    const records = peer.botRecords(group);
    assert.deepEqual(
      records.map((r) => [r.content, r.reference]),
      [
        ['part one @everyone', inbound.id],
        ['part two', undefined],
      ],
    );
    for (const record of records) assert.deepEqual(record.allowedMentions, { parse: [], replied_user: false });
  });

  it('cuts a part that is still over the limit once rendered into several messages, losing nothing', async () => {
    const inbound = direct.pushed[0]!;
    const before = peer.botRecords(group).length;
    const words = Array.from({ length: 900 }, (_, i) => `w${i}`).join(' ');
    await direct.channel.send({ ...refOf(inbound), text: words });
    const sent = peer.botRecords(group).slice(before);
    assert.ok(sent.length > 1);
    for (const record of sent) assert.ok(record.content.length <= 2000);
    assert.equal(sent.map((r) => r.content).join(' '), words);
  });

  it('treats a reply to one of its messages as addressed, a plain group message as not', async () => {
    direct.pushed.length = 0;
    await peer.post('bob', group, 'just talking');
    const botMessage = peer.botRecords(group)[0]!.id;
    await peer.post('bob', group, 'about your answer', { replyTo: botMessage });
    await peer.post('bob', group, 'testbot, are you there?');
    await until(() => direct.pushed.length === 3, 'three pushes');
    assert.deepEqual(
      direct.pushed.map((m) => [m.text, m.addressed, m.direct]),
      [
        ['just talking', false, false],
        ['about your answer', true, false],
        ['testbot, are you there?', true, false],
      ],
    );
  });

  it('puts a thread message in its parent channel’s chat with the thread id, and answers inside the thread', async () => {
    direct.pushed.length = 0;
    await peer.post('alice', thread, 'in the thread', { mention: true });
    await until(() => direct.pushed.length === 1, 'the push');
    const inbound = direct.pushed[0]!;
    assert.equal(inbound.chat, peer.channelId(group));
    assert.equal(inbound.thread, peer.channelId(thread));
    await direct.channel.send({ ...refOf(inbound), text: 'thread answer', replyTo: inbound.id });
    assert.deepEqual(
      peer.botMessages(thread).map((m) => m.text),
      ['thread answer'],
    );
  });

  it('maps Discord errors: unknown channel and unknown message are permanent, a long rate limit carries its wait', async () => {
    const ref = { channel: 'discord', account: peer.botId, chat: '399999999999999999' };
    await assert.rejects(direct.channel.send({ ...ref, text: 'hello' }), (error: unknown) => error instanceof SendError && error.permanent);
    const dmRef = { channel: 'discord', account: peer.botId, chat: peer.channelId(dm) };
    await assert.rejects(direct.channel.edit(dmRef, '1234567890123456789', 'x'), (error: unknown) => error instanceof SendError && error.permanent);
    peer.rateLimitNext(5);
    await assert.rejects(
      direct.channel.send({ ...dmRef, text: 'too fast' }),
      (error: unknown) => error instanceof SendError && !error.permanent && error.retryAfterMs !== undefined && error.retryAfterMs >= 4000 && error.retryAfterMs <= 6000,
    );
    assert.equal(peer.stats.rateLimited, 1);
    assert.deepEqual(peer.unknownRoutes, []);
  });
});

describe('discord channel: upload limit and forwarded messages', () => {
  let peer: DiscordPeer;
  let direct: Awaited<ReturnType<typeof directChannel>>;
  let files: string;

  before(async () => {
    peer = await startDiscordPeer();
    direct = await directChannel(peer);
    files = mkdtempSync(join(tmpdir(), 'sb-discord-files-'));
  });
  after(async () => {
    await direct.stop();
    await peer.close();
    rmSync(files, { recursive: true, force: true });
  });

  it('refuses a file over Discord’s 10 MiB before uploading it, and sends one at the limit', async () => {
    assert.equal(direct.channel.maxFileBytes, 10 * 1024 * 1024);
    const ref = { channel: 'discord', account: peer.botId, chat: peer.channelId(dm) };
    const big = join(files, 'big.bin');
    writeFileSync(big, '');
    truncateSync(big, 10 * 1024 * 1024 + 1);
    await assert.rejects(direct.channel.sendFile(ref, { path: big, name: 'big.bin' }), (error: unknown) => error instanceof SendError && error.permanent && /10485760/.test(error.message));
    assert.equal(peer.stats.tooLarge, 0, 'nothing was uploaded');
    truncateSync(big, 10 * 1024 * 1024);
    await direct.channel.sendFile(ref, { path: big, name: 'limit.bin' });
    assert.deepEqual(peer.botFiles(dm), ['limit.bin']);
  });

  it('reads a forwarded message from its snapshot: the text and the files, in a DM and (addressed or not) in the group', async () => {
    direct.pushed.length = 0;
    await peer.forward('alice', dm, { text: 'meeting moved to 3pm', file: { name: 'agenda.txt', mime: 'text/plain', data: new TextEncoder().encode('1. budget\n') } });
    await peer.forward('bob', group, { text: 'look at this' });
    await until(() => direct.pushed.length === 2, 'both forwards pushed');
    const [inDm, inGroup] = direct.pushed;
    assert.equal(inDm!.text, '(forwarded message)\nmeeting moved to 3pm');
    assert.equal(inDm!.direct, true);
    assert.deepEqual(inDm!.attachments?.map((a) => [a.name, a.size]), [['agenda.txt', 10]]);
    assert.ok(inDm!.attachments?.[0]?.path, 'the forwarded file is saved in the workspace');
    assert.equal(inGroup!.text, '(forwarded message)\nlook at this');
    assert.equal(inGroup!.addressed, false);
  });
});

describe('discord channel: rate limits per route and global (peer answers like Discord)', () => {
  let workspace: string;
  before(() => void (workspace = mkdtempSync(join(tmpdir(), 'sb-discord-'))));
  after(() => rmSync(workspace, { recursive: true, force: true }));
  /** A channel that only sends (no gateway): every request it makes is one the test asked for. */
  const sender = (peer: DiscordPeer): DiscordChannel =>
    createDiscordChannel(
      { token: peer.token, api_base: peer.apiBase, mention_only: true, stream: false },
      { name: 'discord', log: testLogger(), assistantName: 'Testbot', attachments: createAttachmentStore({ workspace }), state: testChannelState(), stateDir: join(workspace, 'state') },
    );
  const refIn = (peer: DiscordPeer, place: Place) => ({ channel: 'discord', account: peer.botId, chat: peer.channelId(place) });
  const rateLimited = (min: number, max: number, scope: 'chat' | 'channel') => (error: unknown) =>
    error instanceof SendError && !error.permanent && error.scope === scope && error.retryAfterMs !== undefined && error.retryAfterMs >= min && error.retryAfterMs <= max;

  it('an edit past its route bucket fails with the bucket’s wait for that chat, and nothing is sent inside the wait', async () => {
    const peer = await startDiscordPeer({ rateLimits: { edits: { limit: 2, resetAfterMs: 4000 } } });
    try {
      const channel = sender(peer);
      const ref = refIn(peer, dm);
      const id = await channel.sendDraft({ ...ref, text: 'draft' });
      await channel.edit(ref, id, 'draft one');
      await channel.edit(ref, id, 'draft two');
      await assert.rejects(channel.edit(ref, id, 'draft three'), rateLimited(3000, 4500, 'chat'));
      assert.equal(peer.botRecords(dm)[0]!.content, 'draft two');
      assert.equal(peer.callsInsideWait(dm), 0);
    } finally {
      await peer.close();
    }
  });

  it('typing past its route bucket fails with the wait (not swallowed), so the runtime can hold the chat', async () => {
    const peer = await startDiscordPeer({ rateLimits: { typing: { limit: 1, resetAfterMs: 4000 } } });
    try {
      const channel = sender(peer);
      await channel.typing(refIn(peer, dm));
      await assert.rejects(channel.typing(refIn(peer, dm)), rateLimited(3000, 4500, 'chat'));
      assert.equal(peer.typing(dm), 1);
    } finally {
      await peer.close();
    }
  });

  it('the global limit (every request of the bot) fails with scope channel, whichever chat asked', async () => {
    const peer = await startDiscordPeer({ rateLimits: { global: { limit: 3, resetAfterMs: 4000 } } });
    try {
      const channel = sender(peer);
      for (const text of ['one', 'two', 'three']) await channel.send({ ...refIn(peer, dm), text });
      await assert.rejects(channel.send({ ...refIn(peer, group), text: 'four' }), rateLimited(2500, 4500, 'channel'));
      assert.equal(peer.stats.rateLimited, 1, 'one global 429');
      await assert.rejects(channel.typing(refIn(peer, dm)), rateLimited(1500, 4500, 'channel'));
      assert.equal(peer.callsInsideWait(dm), 0, 'the REST client keeps the announced global wait');
      assert.deepEqual(peer.botMessages(group), []);
    } finally {
      await peer.close();
    }
  });

  it('counts a call that reaches a chat inside a wait the peer announced', async () => {
    const peer = await startDiscordPeer();
    try {
      const channel = sender(peer);
      peer.rateLimitNext(5);
      await assert.rejects(channel.send({ ...refIn(peer, dm), text: 'too fast' }), rateLimited(4000, 6000, 'chat'));
      assert.equal(peer.callsInsideWait(dm), 0);
      await channel.typing(refIn(peer, dm)); // another route: the REST client sends it, the peer sees it inside the chat's wait
      assert.equal(peer.callsInsideWait(dm), 1);
      assert.equal(peer.callsInsideWait(group), 0);
    } finally {
      await peer.close();
    }
  });
});

describe('discord channel: connecting', () => {
  let workspace: string;
  before(() => void (workspace = mkdtempSync(join(tmpdir(), 'sb-discord-'))));
  after(() => rmSync(workspace, { recursive: true, force: true }));
  const context = () => ({ name: 'discord', log: testLogger(), assistantName: 'Testbot', attachments: createAttachmentStore({ workspace }), state: testChannelState(), stateDir: join(workspace, 'state') });
  const link = { ready: () => undefined, alive: () => undefined, deaf: () => undefined };

  it('fails listen with a bad token, so the supervisor backs off', async () => {
    const peer = await startDiscordPeer();
    try {
      const channel = createDiscordChannel({ token: 'wrong', api_base: peer.apiBase, mention_only: true, stream: false }, context());
      await assert.rejects(channel.listen(async () => 'accepted', new AbortController().signal, link), /token/i);
    } finally {
      await peer.close();
    }
  });

  it('fails listen when the gateway cannot be reached at first, leaving nothing reconnecting behind', async () => {
    const peer = await startDiscordPeer();
    try {
      peer.gatewayDown();
      const channel = createDiscordChannel({ token: peer.token, api_base: peer.apiBase, mention_only: true, stream: false }, context());
      await assert.rejects(channel.listen(async () => 'accepted', new AbortController().signal, link), /503/);
      const attempts = peer.stats.attempts;
      await sleep(1100);
      assert.equal(peer.stats.attempts, attempts, 'no reconnecting after listen returned');
    } finally {
      await peer.close();
    }
  });

  it('returns promptly on abort while reconnecting to a lost gateway, and stops reconnecting', async () => {
    const peer = await startDiscordPeer();
    try {
      const channel = createDiscordChannel({ token: peer.token, api_base: peer.apiBase, mention_only: true, stream: false }, context());
      const abort = new AbortController();
      let ready = false;
      const listening = channel.listen(async () => 'accepted', abort.signal, { ...link, ready: () => (ready = true) });
      await until(() => ready, 'ready');
      peer.gatewayDown();
      await until(() => peer.stats.attempts >= 3, 'reconnect attempts');
      const started = Date.now();
      abort.abort();
      await listening;
      assert.ok(Date.now() - started < 2000);
      const attempts = peer.stats.attempts;
      await sleep(1100);
      assert.ok(peer.stats.attempts <= attempts + 1, `no reconnecting after listen returned (${attempts} → ${peer.stats.attempts})`);
    } finally {
      await peer.close();
    }
  });
});

describe('discord: the Message Content intent is off in the developer portal', () => {
  const portal = /Privileged Gateway Intents/;

  it('fails listen with close 4014 naming the intent, logs the fix once, shows it in status notes, and leaves nothing reconnecting', async () => {
    const peer = await startDiscordPeer({ messageContentIntent: false });
    const workspace = mkdtempSync(join(tmpdir(), 'sb-discord-'));
    const lines: string[] = [];
    const log = pino({ level: 'debug' }, { write: (line: string) => void lines.push(line) });
    try {
      const channel = createDiscordChannel(
        { token: peer.token, api_base: peer.apiBase, mention_only: true, stream: false },
        { name: 'discord', log, assistantName: 'Testbot', attachments: createAttachmentStore({ workspace }), state: testChannelState(), stateDir: join(workspace, 'state') },
      );
      const link = { ready: () => undefined, alive: () => undefined, deaf: () => undefined };
      for (let attempt = 0; attempt < 2; attempt++) {
        await assert.rejects(channel.listen(async () => 'accepted', new AbortController().signal, link), /4014.*Message Content|Message Content.*4014/);
      }
      assert.equal(peer.stats.disallowedIntents, 2, 'one IDENTIFY per listen');
      const attempts = peer.stats.attempts;
      await sleep(1100);
      assert.equal(peer.stats.attempts, attempts, 'discord.js does not reconnect after a 4014');
      const naming = lines.filter((line) => portal.test(line));
      assert.equal(naming.length, 1, `one line names the fix:\n${lines.join('')}`);
      assert.equal((JSON.parse(naming[0]!) as { level: number }).level, 50, 'at error level');
      assert.match(naming[0]!, /MESSAGE CONTENT INTENT/);
      assert.deepEqual(lines.filter((line) => /retrying|reconnecting/i.test(line) && /"level":(40|50)/.test(line)), [], 'nothing claims a retry of the gateway');
      assert.equal(channel.statusNotes().length, 1);
      assert.match(channel.statusNotes()[0]!, /MESSAGE CONTENT INTENT/);

      peer.setMessageContentIntent(true); // the operator turns it on: the next listen connects, the note goes
      const abort = new AbortController();
      let ready = false;
      const listening = channel.listen(async () => 'accepted', abort.signal, { ...link, ready: () => (ready = true) });
      await until(() => ready, 'ready once the intent is on');
      assert.deepEqual(channel.statusNotes(), []);
      abort.abort();
      await listening;
    } finally {
      await peer.close();
      rmSync(workspace, { recursive: true, force: true });
    }
  });

  it('the daemon stays up, says which channel is not running and why, and retries that channel slowly', async () => {
    const model = await startFakeOpenAI();
    const peer = await startDiscordPeer({ messageContentIntent: false });
    const config = tempConfig(model.baseUrl, `[log]\nformat = "json"\n${peer.configSection()}allow = ["${peer.users.alice}"]\n`);
    const daemon = startDaemon(['start', '--config', config.file], { env });
    try {
      await daemon.waitFor(/"msg":"ready"/, 'stdout', 20_000);
      const readyLine = JSON.parse(daemon.stdout().split('\n').find((l) => l.includes('"msg":"ready"'))!) as { notRunning: Array<{ name: string; lastError?: string }> };
      assert.equal(readyLine.notRunning[0]?.name, 'discord');
      assert.match(readyLine.notRunning[0]?.lastError ?? '', /4014/);
      await sleep(4500); // the supervisor's backoff: 2 s, then 4 s
      const naming = daemon.stdout().split('\n').filter((line) => portal.test(line));
      assert.equal(naming.length, 1, daemon.stdout());
      assert.ok(peer.stats.disallowedIntents >= 2 && peer.stats.disallowedIntents <= 3, `slow retries, not a spin: ${peer.stats.disallowedIntents}`);
      peer.setMessageContentIntent(true);
      await until(() => peer.connected(), 'the channel connecting once the intent is on', 15_000, () => daemon.stdout().slice(-3000));
      await peer.post('alice', dm, 'hello after the fix');
      await until(() => peer.botMessages(dm).length === 1, 'the reply', 10_000, () => daemon.stdout().slice(-3000));
    } finally {
      daemon.child.kill('SIGTERM');
      await daemon.exited;
      await peer.close();
      await model.close();
      config.cleanup();
    }
  });
});

describe('discord faults (daemon)', () => {
  let peer: DiscordPeer;
  let model: FakeOpenAI;
  let config: ReturnType<typeof tempConfig>;
  let daemon: Daemon;

  const texts = (place: Place): string[] => peer.botMessages(place).map((message) => message.text);
  const detail = (): string => `\nbot messages: ${JSON.stringify([texts(dm), texts(group)])}\npeer: ${JSON.stringify(peer.stats)}\ndaemon log:\n${daemon.stdout().slice(-5000)}\n${daemon.stderr().slice(-2000)}`;
  const start = async (): Promise<void> => {
    daemon = startDaemon(['start', '--config', config.file], { env });
    await daemon.waitFor(/"msg":"ready"/, 'stdout', 20_000);
  };

  before(async () => {
    model = await startFakeOpenAI();
    peer = await startDiscordPeer();
    config = tempConfig(model.baseUrl, `[log]\nformat = "json"\n${peer.configSection()}allow = ["${peer.users.alice}"]\n`);
    await start();
  });
  after(async () => {
    daemon.child.kill('SIGTERM');
    const { code } = await daemon.exited;
    await peer.close();
    await model.close();
    config.cleanup();
    assert.equal(code, 0, 'the daemon stopped cleanly');
  });

  it('resumes after the socket drops mid-conversation, and answers every message exactly once', async () => {
    await peer.post('alice', group, 'group hello', { mention: true });
    await peer.post('alice', dm, 'one');
    await until(() => texts(dm).length === 1 && texts(group).length === 1, 'the first replies', 10_000, detail);

    model.script({ text: 'two, answered late', delayMs: 700 });
    const asked = model.requests.length;
    await peer.post('alice', dm, 'two');
    await model.waitForRequests(asked + 1);
    peer.dropConnection(4000); // while the reply is being written
    await peer.post('alice', dm, 'three'); // lands while the socket is closing: replayed on resume
    await until(() => texts(dm).length === 3, 'the replies after the resume', 10_000, detail);

    peer.gatewayDown(); // an abrupt close, and no gateway for a while
    await peer.post('alice', dm, 'four');
    await sleep(800);
    peer.gatewayUp();
    await until(() => texts(dm).length === 4, 'the reply after the second resume', 10_000, detail);
    await sleep(600);
    assert.deepEqual(texts(dm), ['echo: one', 'two, answered late', 'echo: three', 'echo: four'], detail());
    assert.equal(peer.stats.identifies, 1, 'resumed, never identified again');
    assert.ok(peer.stats.resumes >= 2 && peer.stats.replayed >= 2, JSON.stringify(peer.stats));
  });

  it('catches up over REST when the resume is refused, answering what was sent meanwhile exactly once', async () => {
    const before = { dm: texts(dm).length, group: texts(group).length };
    peer.gatewayDown();
    await peer.post('alice', dm, 'sent while away');
    await peer.post('alice', group, 'also while away', { mention: true });
    await sleep(300);
    peer.gatewayUp({ refuseResume: true });
    await until(() => texts(dm).length === before.dm + 1 && texts(group).length === before.group + 1, 'the caught-up replies', 10_000, detail);
    await peer.post('alice', dm, 'back to normal');
    await until(() => texts(dm).length === before.dm + 2, 'the next reply', 10_000, detail);
    await sleep(600);
    assert.deepEqual(texts(dm).slice(before.dm), ['echo: sent while away', 'echo: back to normal'], detail());
    assert.equal(texts(group).length, before.group + 1, detail());
    assert.match(texts(group).at(-1)!, /also while away/);
    assert.equal(peer.stats.invalidSessions, 1);
    assert.equal(peer.stats.identifies, 2, 'a new session after the refused resume');
    assert.match(daemon.stdout(), /caught up over REST/);
  });

  it('notices a zombie connection (no heartbeat acks) and resumes', async () => {
    const resumes = peer.stats.resumes;
    const before = texts(dm).length;
    peer.zombie();
    await until(() => peer.stats.resumes > resumes, 'a resume after the zombie connection', 10_000, detail);
    await peer.post('alice', dm, 'after the zombie');
    await until(() => texts(dm).length === before + 1, 'the reply', 10_000, detail);
    await sleep(300);
    assert.deepEqual(texts(dm).slice(before), ['echo: after the zombie']);
  });

  it('delivers a reply exactly once through a short and a long rate limit', async () => {
    const before = texts(dm).length;
    const limited = peer.stats.rateLimited;
    peer.rateLimitNext(0.3); // waited out inside the REST client
    await peer.post('alice', dm, 'rate one');
    await until(() => texts(dm).length === before + 1, 'the reply after a short rate limit', 10_000, detail);
    peer.rateLimitNext(2.5); // longer than the REST client waits: the outbox retries after retry_after
    await peer.post('alice', dm, 'rate two');
    await until(() => texts(dm).length === before + 2, 'the reply after a long rate limit', 15_000, detail);
    await sleep(400);
    assert.deepEqual(texts(dm).slice(before), ['echo: rate one', 'echo: rate two']);
    assert.equal(peer.stats.rateLimited, limited + 2);
  });

  it('tells the model a file over Discord’s upload limit cannot be sent, and the reply still arrives', async () => {
    const before = texts(dm).length;
    const big = join(config.dir, 'data', 'workspace', 'video.mp4');
    writeFileSync(big, '');
    truncateSync(big, 12 * 1024 * 1024);
    model.script({ toolCalls: [{ name: 'send_file', arguments: { path: 'video.mp4' } }] }, { text: 'That video is too large for Discord.' });
    const asked = model.requests.length;
    await peer.post('alice', dm, 'send me the video');
    await until(() => texts(dm).length === before + 1, 'the reply', 10_000, detail);
    const toolResult = JSON.stringify(model.requests.at(-1)!.body.messages.at(-1));
    assert.equal(model.requests.length, asked + 2);
    assert.match(toolResult, /video\.mp4\\" is 12 MB; discord accepts files up to 10 MB/, toolResult);
    assert.deepEqual(texts(dm).slice(before), ['That video is too large for Discord.']);
    assert.deepEqual(peer.botFiles(dm), []);
    assert.equal(peer.stats.tooLarge, 0);
  });

  it('answers exactly once when killed between receiving a message and replying, and catches up on what came while it was down', async () => {
    model.script({ text: 'the answer that never left', delayMs: 5000 });
    const asked = model.requests.length;
    const before = texts(dm).length;
    await peer.post('alice', dm, 'slow question');
    await model.waitForRequests(asked + 1);
    daemon.child.kill('SIGKILL');
    await daemon.exited;
    await peer.post('alice', dm, 'sent while the daemon was down');
    await start();
    await until(() => texts(dm).length === before + 2, 'the replies after the restart', 15_000, detail);
    await sleep(800);
    assert.deepEqual(texts(dm).slice(before), ['echo: slow question', 'echo: sent while the daemon was down'], detail());
    assert.deepEqual(peer.unknownRoutes, []);
    assert.doesNotMatch(daemon.stderr(), /discord|warning/i, 'discord.js keeps off the console');
  });
});
