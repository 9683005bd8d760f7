/**
 * IRC end to end, against a real IRC server (ngircd) with real clients as the people
 * (test/peers/irc.ts): the shared contract suites; the channel on its own (addressing through
 * the server, NickServ, TLS, send errors, a kick and rejoin, a taken nick regained); then the
 * daemon: a long reply paced through ngircd's flood throttle, the server killed and restarted
 * mid-conversation, and a SIGKILL between receiving a message and replying.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { getCACertificates, setDefaultCACertificates } from 'node:tls';
import { after, before, describe, it } from 'node:test';
import { createIrcChannel, type IrcChannel, type IrcChannelOptions } from '../channels/irc/index.ts';
import { SendError, type ChannelContext, type InboundMessage } from '../src/channel.ts';
import type { IrcConfig } from '../channels/irc/config.ts';
import { refOf } from '../src/conversation.ts';
import { createAttachmentStore } from '../src/inbound/attachments.ts';
import { runChannelContract } from './contracts/channel.ts';
import { runChatChannelContract, type Place } from './contracts/chat-channel.ts';
import { startFakeOpenAI, type FakeOpenAI } from './fixtures/fake-openai.ts';
import { BOT_NICK, IRC_CHANNEL, startIrcPeer, type IrcPeer } from './peers/irc.ts';
import { startDaemon, tempConfig, type Daemon } from './support/cli.ts';
import { testLogger } from './support/log.ts';
import { requireServers } from './support/servers.ts';
import { testChannelState } from './support/channel-state.ts';

// A real ngircd runs these tests: without it, fail now with the install line instead of waiting.
requireServers('ngircd');

const dm: Place = { kind: 'dm', user: 'alice' };
const group: Place = { kind: 'group' };
const env = { TEST_MODEL_KEY: 'sk-irc' };
const lacks = { threads: 'IRC has no threads', edits: 'IRC messages cannot be edited', files: 'IRC has no file transfer here (no DCC)' };
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

function ircConfig(port: number, over: Partial<IrcConfig> = {}): IrcConfig {
  return { host: '127.0.0.1', port, tls: false, nick: BOT_NICK, channels: [IRC_CHANNEL], rejoin_on_kick: true, lines_per_second: 3, mention_only: true, ...over };
}

function context(dir: string): ChannelContext {
  return { name: 'irc', log: testLogger(), assistantName: 'Testbot', attachments: createAttachmentStore({ workspace: dir }), state: testChannelState(), stateDir: join(dir, 'state') };
}

/** The channel (no daemon) listening against the peer's server, with what it pushed. */
async function listening(peer: IrcPeer, config: IrcConfig, options: IrcChannelOptions = {}, nickFree = true) {
  if (nickFree) await peer.nickFree(BOT_NICK); // the previous test's bot has left
  const dir = mkdtempSync(join(tmpdir(), 'sb-irc-'));
  const channel = createIrcChannel(config, context(dir), options);
  const pushed: InboundMessage[] = [];
  const abort = new AbortController();
  let readies = 0;
  const run = channel.listen(
    async (message) => {
      pushed.push(message);
      return 'accepted';
    },
    abort.signal,
    { ready: () => void readies++, alive: () => undefined, deaf: () => undefined },
  );
  run.catch(() => undefined);
  const deadline = Date.now() + 10_000;
  while (readies === 0) {
    if (Date.now() > deadline) throw new Error('the IRC channel did not become ready');
    await sleep(20);
  }
  return {
    channel,
    pushed,
    run,
    async stop() {
      abort.abort();
      await run.catch(() => undefined);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

runChatChannelContract('irc', () => startIrcPeer(), lacks);

/** One server and its people for the rest of the file (starting them costs ngircd's join delays). */
let shared: IrcPeer | undefined;
const haveOpenssl = spawnSync('openssl', ['version']).status === 0; // for the TLS server's certificate
const sharedPeer = async (): Promise<IrcPeer> => (shared ??= await startIrcPeer({ tls: haveOpenssl }));
after(async () => shared?.close());

describe('irc: channel-level contract', () => {
  runChannelContract('irc', async () => {
    const peer = await sharedPeer();
    peer.reset();
    const dir = mkdtempSync(join(tmpdir(), 'sb-irc-'));
    const channel: IrcChannel = createIrcChannel(ircConfig(peer.port, { lines_per_second: 10 }), context(dir));
    return {
      channel,
      say: (text) => peer.post('alice', dm, text),
      received: async () => {
        // a send resolves once the server has handled the lines; wait for the last of them to reach alice
        await peer.until(() => peer.inTransit(dm) === 0, 'the lines to arrive', 5000);
        return peer.botMessages(dm).map((m) => m.text);
      },
      close: async () => rmSync(dir, { recursive: true, force: true }),
    };
  });
});

describe('irc channel against ngircd', () => {
  let peer: IrcPeer;

  before(async () => {
    peer = await sharedPeer();
    peer.reset();
  });

  it('through a real server: mentions, context, private messages, actions (never NOTICEs or CTCP), NickServ, reply prefix, send errors, kick and rejoin', async () => {
    const nickserv = await peer.connectPerson('NickServ');
    const bot = await listening(peer, ircConfig(peer.port, { nickserv_password: 'hunter2' }), { rejoinDelayMs: 400 });
    try {
      await peer.post('bob', group, 'just chatting among ourselves');
      await peer.post('alice', group, 'what now?', { mention: true });
      await peer.post('alice', group, 'Testbot, are you there?');
      await peer.post('alice', dm, 'a private word');
      const mallory = await peer.connectPerson('mallory2', { join: true });
      mallory.client.raw(`NOTICE ${IRC_CHANNEL} :${BOT_NICK}: a notice is never answered`);
      mallory.client.raw(`PRIVMSG ${BOT_NICK} :\x01VERSION\x01`);
      mallory.client.raw(`PRIVMSG ${IRC_CHANNEL} :\x01ACTION pokes ${BOT_NICK}\x01`);
      await mallory.sync();
      await peer.until(() => bot.pushed.length >= 5, 'five pushes');
      await sleep(300);
      assert.deepEqual(
        bot.pushed.map((m) => [m.sender.id, m.chat, m.text, m.direct, m.addressed]),
        [
          ['bob', '#switchboard', 'just chatting among ourselves', false, false],
          ['alice', '#switchboard', 'what now?', false, true],
          ['alice', '#switchboard', 'Testbot, are you there?', false, true],
          ['alice', 'alice', 'a private word', true, true],
          ['mallory2', '#switchboard', `* mallory2 pokes ${BOT_NICK}`, false, true],
        ],
      );
      for (const m of bot.pushed) {
        assert.equal(m.account, BOT_NICK);
        assert.match(m.sender.aliases![0]!, new RegExp(`^${m.sender.id}!~?\\w+@127\\.0\\.0\\.1$`));
      }
      assert.equal(new Set(bot.pushed.map((m) => m.id)).size, 5, 'every message has its own id');
      await peer.until(() => mallory.inbox.some((m) => m.notice && m.text.startsWith('\x01VERSION')), 'the CTCP VERSION answer (from the library; never pushed)');
      assert.deepEqual(
        nickserv.inbox.map((m) => [m.from, m.text]),
        [[BOT_NICK, `IDENTIFY ${BOT_NICK} hunter2`]],
      );

      // a reply in the channel addresses the person it answers, on its first line only
      const question = bot.pushed[1]!;
      await bot.channel.send({ ...refOf(question), text: '**Sure.** See [the docs](https://example.org).\n\n- one\n- two', replyTo: question.id });
      await bot.channel.send({ ...refOf(question), text: 'a second part', replyTo: question.id });
      await peer.until(() => peer.botMessages(group).length === 2, 'both parts');
      assert.deepEqual(
        peer.lines(group).map((l) => l.text),
        ['alice: Sure. See the docs (https://example.org).', '- one', '- two', 'a second part'],
      );
      await mallory.quit();

      // send errors: no such nick is permanent, so is a malformed target; not connected is retryable
      const ref = { channel: 'irc', account: BOT_NICK };
      await assert.rejects(bot.channel.send({ ...ref, chat: 'nobody-here', text: 'hello?' }), (error: unknown) => error instanceof SendError && error.permanent && /No such nick/i.test(error.message));
      await assert.rejects(bot.channel.send({ ...ref, chat: 'bad target', text: 'x' }), (error: unknown) => error instanceof SendError && error.permanent);
      await bot.channel.send({ ...ref, chat: 'alice', text: 'still fine' });
      const idle = createIrcChannel(ircConfig(peer.port), context(tmpdir()));
      await assert.rejects(idle.send({ ...ref, chat: 'alice', text: 'x' }), (error: unknown) => error instanceof SendError && !error.permanent);

      // kicked: a reply meanwhile (the channel is +n) is retryable; rejoined after the delay
      // (400 ms here), and what is said then is heard and answered again
      const joins = peer.stats.botJoins;
      await peer.channelMode('+n');
      await peer.kickBot();
      await peer.until(() => !peer.botInChannel(), 'the kick');
      await assert.rejects(
        bot.channel.send({ ...refOf(question), text: 'while kicked' }),
        (error: unknown) => error instanceof SendError && !error.permanent && error.retryAfterMs === 1400 && /not in the channel/.test(error.message),
      );
      await peer.until(() => peer.botInChannel() && peer.stats.botJoins === joins + 1, 'the rejoin');
      await peer.post('alice', group, 'welcome back', { mention: true });
      await peer.until(() => bot.pushed.some((m) => m.text === 'welcome back'), 'the push after the rejoin');
      await bot.channel.send({ ...refOf(question), text: 'back again' });
      await peer.until(() => peer.lines(group).some((l) => l.text === 'back again'), 'the reply after the rejoin');
      await peer.channelMode('-n');
    } finally {
      await bot.stop();
      await nickserv.quit();
    }
  });

  it('takes an alternate nick when its own is taken, and regains it when the holder quits', async () => {
    await peer.nickFree(BOT_NICK);
    const holder = await peer.connectPerson(BOT_NICK, { join: true });
    const bot = await listening(peer, ircConfig(peer.port), { regainIntervalMs: 60_000 }, false);
    try {
      assert.equal(peer.botNick, `${BOT_NICK}_`);
      await peer.post('alice', dm, 'hello alternate'); // peer.post DMs the bot's current nick
      await peer.post('alice', group, `${BOT_NICK}: the configured nick still addresses it`);
      await peer.until(() => bot.pushed.length === 2, 'two pushes');
      assert.deepEqual(
        bot.pushed.map((m) => [m.account, m.text, m.addressed]),
        [
          [BOT_NICK, 'hello alternate', true],
          [BOT_NICK, 'the configured nick still addresses it', true],
        ],
      );
      await holder.quit(); // the bot sees the QUIT in the shared channel and takes its nick at once
      await peer.until(() => peer.botNick === BOT_NICK, 'the nick regained', 5000);
    } finally {
      await bot.stop();
    }
  });

  it('regains its nick by retrying periodically when it cannot see the holder leave', async () => {
    await peer.nickFree(BOT_NICK);
    const holder = await peer.connectPerson(BOT_NICK);
    // ngircd holds back a client for 2 s after each NICK: retrying faster would only pile them up
    const bot = await listening(peer, ircConfig(peer.port), { regainIntervalMs: 2000 }, false);
    try {
      assert.equal(peer.botNick, `${BOT_NICK}_`);
      await holder.quit();
      await peer.until(() => peer.botNick === BOT_NICK, 'the nick regained', 5000);
      await peer.post('alice', dm, 'are you back?');
      await peer.until(() => bot.pushed.some((m) => m.text === 'are you back?'), 'the push to the regained nick');
    } finally {
      await bot.stop();
    }
  });

  it('connects with TLS, verifying the server certificate', { skip: haveOpenssl ? false : 'openssl is not installed (needed for a test certificate)' }, async () => {
    // not trusted yet: the connection is refused, and the reason says why
    await peer.nickFree(BOT_NICK);
    const untrusted = createIrcChannel(ircConfig(peer.server.tlsPort!, { tls: true }), context(tmpdir()));
    await assert.rejects(
      untrusted.listen(async () => 'accepted', new AbortController().signal, { ready: () => assert.fail('ready without a trusted certificate'), alive: () => undefined, deaf: () => undefined }),
      /self[- ]signed certificate/i,
    );
    setDefaultCACertificates([...getCACertificates('default'), peer.server.certificate!]);
    const bot = await listening(peer, ircConfig(peer.server.tlsPort!, { tls: true }));
    try {
      await peer.post('alice', dm, 'over TLS');
      await peer.until(() => bot.pushed.length === 1, 'the push');
      await bot.channel.send({ ...refOf(bot.pushed[0]!), text: 'encrypted hello' });
      await peer.until(() => peer.lines(dm).some((l) => l.text === 'encrypted hello'), 'the reply');
    } finally {
      await bot.stop();
    }
  });
});

describe('irc faults (daemon)', () => {
  let peer: IrcPeer;
  let model: FakeOpenAI;
  let config: ReturnType<typeof tempConfig>;
  let daemon: Daemon;

  const texts = (place: Place): string[] => peer.botMessages(place).map((m) => m.text);
  const detail = (): string => `\nbot lines: ${JSON.stringify(peer.lines(dm).map((l) => l.text))}\nstats: ${JSON.stringify(peer.stats)}\ndaemon log:\n${daemon.stdout().slice(-5000)}\n${daemon.stderr().slice(-2000)}`;
  const start = async (): Promise<void> => {
    daemon = startDaemon(['start', '--config', config.file], { env });
    await daemon.waitFor(/"msg":"ready"/, 'stdout', 20_000);
  };
  const until = async (condition: () => boolean, what: string, timeoutMs = 15_000): Promise<void> => {
    const deadline = Date.now() + timeoutMs;
    while (!condition()) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${detail()}`);
      await sleep(20);
    }
  };

  before(async () => {
    model = await startFakeOpenAI();
    peer = await sharedPeer();
    peer.reset();
    config = tempConfig(model.baseUrl, `[log]\nformat = "json"\n${peer.configSection()}allow = ["alice", "bob"]\n`);
    await start();
  });
  after(async () => {
    // Whatever part of before() ran is undone, so a failed start cannot leave the file hanging.
    const code = daemon === undefined ? 0 : (daemon.child.kill('SIGTERM'), (await daemon.exited).code);
    await model?.close();
    config?.cleanup();
    assert.equal(code, 0, 'the daemon stopped cleanly');
  });

  it('delivers a long reply (40 lines and a 2000-character line) complete and in order, paced under the flood limit', async () => {
    const lines = Array.from({ length: 40 }, (_, i) => `line ${i + 1} of the long answer`);
    const words = Array.from({ length: 400 }, (_, i) => `w${i}`);
    let paragraph = words.join(' ');
    paragraph = paragraph.slice(0, paragraph.lastIndexOf(' ', 1990));
    model.script({ text: `${lines.join('\n')}\n\n${paragraph}` });
    const connections = peer.stats.botConnections;
    const started = Date.now();
    await peer.post('alice', dm, 'tell me everything');
    const expected = [...lines, ...paragraph.split(' ')];
    const received = (): string[] => peer.lines(dm).flatMap((l) => (l.text.startsWith('line ') ? [l.text] : l.text.split(' ')));
    await until(() => received().length >= expected.length, 'every line', 40_000);
    await sleep(500);
    assert.deepEqual(received(), expected, 'every line and word, in order, once');
    const relayed = peer.lines(dm);
    for (const line of relayed) assert.ok(line.bytes <= 512, `a relayed line of ${line.bytes} bytes`);
    assert.ok(relayed.length >= 44, `the 2000-character line became several lines (${relayed.length})`);
    assert.ok(Math.max(...relayed.map((l) => l.bytes)) > 400, 'long lines use the room a line has');
    assert.equal(peer.stats.botConnections, connections, 'never disconnected (no flood kick)');
    // no quit but a bot's own goodbye (an earlier test's bot stopping can land late under load)
    assert.deepEqual(peer.stats.botQuits.filter((quit) => quit !== '"Switchboard stopping"'), [], 'never quit or kicked for flooding');
    // 3 lines/s with a burst of 3: ~14 s for 45 lines; faster would have been throttled by ngircd
    const seconds = (relayed.at(-1)!.at - started) / 1000;
    assert.ok(seconds >= (relayed.length - 6) / 3, `paced: ${relayed.length} lines in ${seconds.toFixed(1)} s`);
  });

  it('comes back after the server is killed and restarted, and answers every message exactly once', async (t) => {
    peer.reset();
    await peer.post('alice', dm, 'before the restart');
    await until(() => texts(dm).length === 1, 'the first reply');
    // The reply counts as sent once the PONG to the PING after it is back; ngircd's pacing can
    // hold that PING for a second. Killing the server inside that window would make the reply
    // go out again after the reconnect — IRC's one at-least-once window (README, IRC).
    await sleep(1500);
    const { killedAt, listeningAt } = await peer.restartServer();
    await until(() => peer.stats.lastBotJoinAt > listeningAt, 'the bot back in the channel', 30_000);
    const rejoinedAt = peer.stats.lastBotJoinAt;
    t.diagnostic(`IRC reconnect: server killed → listening again ${listeningAt - killedAt} ms → bot rejoined ${rejoinedAt - listeningAt} ms later (${rejoinedAt - killedAt} ms in all)`);
    await until(() => peer.botInChannel(), 'the people to see the bot back');
    await peer.post('alice', dm, 'after the restart');
    await peer.post('bob', group, 'and in the channel', { mention: true });
    await until(() => texts(dm).length === 2 && texts(group).length === 1, 'the replies after the restart');
    await sleep(800);
    assert.deepEqual(texts(dm), ['echo: before the restart', 'echo: after the restart'], detail());
    assert.equal(texts(group).length, 1, detail());
    assert.match(texts(group)[0]!, /^bob: echo: .*and in the channel$/, 'answered in the channel, addressed to bob');
    assert.match(daemon.stdout(), /channel stopped; restarting/, 'the supervisor restarted the listen');
  });

  it('answers exactly once when killed between receiving a message and replying', async () => {
    peer.reset();
    model.script({ text: 'the answer that never left', delayMs: 5000 });
    const asked = model.requests.length;
    await peer.post('alice', dm, 'slow question');
    await model.waitForRequests(asked + 1);
    daemon.child.kill('SIGKILL');
    await daemon.exited;
    await start();
    await until(() => texts(dm).length === 1, 'the reply after the restart', 20_000);
    await sleep(800);
    assert.deepEqual(texts(dm), ['echo: slow question'], detail());
  });
});
