/**
 * Slack end to end: the daemon-level chat contract (Socket Mode), the channel-level contract,
 * the HTTP Events API (signatures, retries, url_verification), Slack's 3-second ack and its
 * retries, rate limits, and faults — a dropped and a silent socket, a lost ack, a disconnect
 * envelope, a 429 and a SIGKILL between receiving and replying — each with exact reply counts.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { createSlackChannel } from '../channels/slack/index.ts';
import { pino } from 'pino';
import { SendError, type InboundMessage } from '../src/channel.ts';
import type { ChannelState } from '../src/store/channel-state.ts';
import type { SlackConfig } from '../channels/slack/config.ts';
import { createAttachmentStore } from '../src/inbound/attachments.ts';
import { runChannelContract } from './contracts/channel.ts';
import { runChatChannelContract, type Place } from './contracts/chat-channel.ts';
import { startFakeOpenAI, type FakeOpenAI } from './fixtures/fake-openai.ts';
import { startSlackPeer, type SlackPeer } from './peers/slack.ts';
import { startDaemon, tempConfig, type Daemon } from './support/cli.ts';
import { testLogger } from './support/log.ts';
import { quiet, until } from './support/wait.ts';
import { testChannelState } from './support/channel-state.ts';

runChatChannelContract('slack', () => startSlackPeer());

runChannelContract('slack', async () => {
  const peer = await startSlackPeer();
  const workspace = mkdtempSync(join(tmpdir(), 'sb-slack-'));
  const config = { bot_token: peer.botToken, app_token: peer.appToken, api_url: peer.apiUrl, listen: '127.0.0.1:0', mention_only: true, stream: false } satisfies SlackConfig;
  const channel = createSlackChannel(config, { name: 'slack', log: testLogger(), assistantName: 'Testbot', attachments: createAttachmentStore({ workspace }), state: testChannelState(), stateDir: workspace });
  const dm: Place = { kind: 'dm', user: 'alice' };
  return {
    channel,
    say: (text) => peer.post('alice', dm, text),
    received: async () => peer.botMessages(dm).map((m) => m.text),
    close: async () => {
      await peer.close();
      rmSync(workspace, { recursive: true, force: true });
    },
  };
});

describe('slack acknowledges an event within Slack\'s 3 seconds, before the work that needs Slack', () => {
  let peer: SlackPeer;
  let workspace: string;
  // Slack's deadline and retries, compressed: ack within 1 s, retries at once, after 0.5 s and after 1 s.
  before(async () => {
    peer = await startSlackPeer({ ackTimeoutMs: 1000, retryDelaysMs: [0, 500, 1000] });
    workspace = mkdtempSync(join(tmpdir(), 'sb-slack-'));
  });
  after(async () => {
    await peer.close();
    rmSync(workspace, { recursive: true, force: true });
  });

  interface ListenState {
    refusing: boolean;
    gate?: Promise<void>;
    /** Every push, refused ones too. */
    pushed: InboundMessage[];
    /** Pushes the runtime took. */
    accepted: InboundMessage[];
    logs: string[];
  }

  /**
   * Runs the channel in this process with a push that rejects (like a runtime shutting down)
   * while `refusing`, and that waits for `gate` when one is set (a slow inbox). `state` is the
   * channel's durable state (keep it across two calls for a restart).
   */
  async function listening(config: SlackConfig, body: (state: ListenState) => Promise<void>, options: { state?: ChannelState; refusing?: boolean } = {}): Promise<void> {
    const state: ListenState = { refusing: options.refusing ?? true, pushed: [], accepted: [], logs: [] };
    const log = pino({ level: 'info' }, { write: (line: string) => void state.logs.push(line) });
    const channel = createSlackChannel(
      config,
      { name: 'slack', log, assistantName: 'Testbot', attachments: createAttachmentStore({ workspace }), state: options.state ?? testChannelState(), stateDir: workspace },
      { retryMs: [100] },
    );
    const abort = new AbortController();
    let ready = false;
    const push = async (message: InboundMessage): Promise<'accepted'> => {
      state.pushed.push(message);
      await state.gate;
      if (state.refusing) throw new Error('Switchboard is shutting down; the message was not accepted');
      state.accepted.push(message);
      return 'accepted';
    };
    const done = channel.listen(push, abort.signal, { ready: () => void (ready = true), alive: () => undefined, deaf: () => undefined });
    try {
      await until(() => ready, 'ready');
      await body(state);
    } finally {
      abort.abort();
      await done;
    }
  }

  const socketConfig = (): SlackConfig => ({ bot_token: peer.botToken, app_token: peer.appToken, api_url: peer.apiUrl, listen: '127.0.0.1:0', mention_only: true, stream: false });
  const httpConfig = (): SlackConfig => ({ bot_token: peer.botToken, signing_secret: peer.signingSecret, api_url: peer.apiUrl, listen: '127.0.0.1:0', mention_only: true, stream: false });
  const listenerUrl = (state: ListenState): string => /"url":"([^"]+)"/.exec(state.logs.find((line) => line.includes('slack events listener'))!)![1]!;

  it('Socket Mode: a slow push does not hold the ack back (Slack would retry it after 3 s): acked at once, pushed once', async () => {
    peer.reset();
    const consoleCalls = watchConsole();
    try {
      await listening(socketConfig(), async (state) => {
        state.refusing = false;
        let release!: () => void;
        state.gate = new Promise((resolve) => (release = resolve));
        await peer.post('alice', dm, 'a slow inbox');
        await until(() => state.pushed.length === 1, 'the push');
        await until(() => peer.envelopes().every((e) => e.acked), 'the ack while push is pending');
        await quiet(1500); // past the peer's ack deadline
        release();
        await until(() => state.accepted.length === 1, 'the push taken');
        assert.equal(peer.stats.redeliveries, 0, 'Slack had no reason to retry');
        assert.equal(state.pushed.length, 1);
      });
    } finally {
      consoleCalls.restore();
    }
    assert.deepEqual(consoleCalls.calls, [], 'Bolt and the Socket Mode client wrote nothing to the console');
  });

  it('Socket Mode: a slow users.info does not hold the ack back; the message still carries the name', async () => {
    peer.reset();
    peer.usersInfoDelay(2500);
    await listening(
      socketConfig(),
      async (state) => {
        await peer.post('alice', dm, 'who am I');
        await until(() => peer.envelopes().every((e) => e.acked), 'the ack');
        await until(() => state.accepted.length === 1, 'the push', 10_000);
        assert.equal(state.accepted[0]!.sender.name, 'alice');
        assert.equal(peer.stats.redeliveries, 0, 'acked within the deadline: no retry');
        assert.ok(Math.max(...peer.stats.ackLatencies) < 1000, `ack latencies ${peer.stats.ackLatencies.join(', ')} ms`);
      },
      { refusing: false },
    );
  });

  it('Socket Mode: a push refused at first: the event is acknowledged anyway (journaled) and pushed once the runtime takes it', async () => {
    peer.reset();
    await listening(socketConfig(), async (state) => {
      await peer.post('alice', dm, 'refused at first');
      await until(() => state.pushed.length >= 1, 'the first push');
      await until(() => peer.envelopes().every((e) => e.acked), 'the ack');
      state.refusing = false;
      await until(() => state.accepted.length === 1, 'a push taken');
      assert.deepEqual([...new Set(state.pushed.map((m) => m.id))], [state.pushed[0]!.id], 'every try has the same id');
      assert.equal(peer.stats.redeliveries, 0);
    });
  });

  it('Socket Mode: acknowledged but not pushed when the listen stops: the next listen pushes it, without Slack delivering it again', async () => {
    peer.reset();
    const durable = testChannelState();
    await listening(
      socketConfig(),
      async () => {
        await peer.post('alice', dm, 'before the restart');
        await until(() => peer.envelopes().every((e) => e.acked), 'the ack');
      },
      { state: durable, refusing: true },
    );
    await listening(
      socketConfig(),
      async (state) => {
        await until(() => state.accepted.length === 1, 'the push after the restart');
        assert.equal(state.accepted[0]!.text, 'before the restart');
        assert.equal(peer.stats.redeliveries, 0);
      },
      { state: durable, refusing: false },
    );
  });

  it('Socket Mode: an event never acknowledged is sent again three times (retry_attempt 1–3), then Slack gives up; it is pushed once', async () => {
    peer.reset();
    await listening(
      socketConfig(),
      async (state) => {
        peer.loseAcks(true);
        await peer.post('alice', dm, 'ack lost');
        await until(() => peer.stats.lost === 1, 'Slack giving up', 10_000);
        peer.loseAcks(false);
        assert.equal(peer.envelopes()[0]!.deliveries, 4);
        assert.equal(peer.stats.redeliveries, 3);
        await quiet(300);
        assert.deepEqual(state.accepted.map((m) => m.text), ['ack lost']);
      },
      { refusing: false },
    );
  });

  it('HTTP: 200 at once while push is refused; pushed once it is taken; Slack\'s retry of it is recognised', async () => {
    peer.reset();
    await listening(httpConfig(), async (state) => {
      peer.useHttp(listenerUrl(state));
      const body = peer.eventBody('alice', dm, 'refused at first');
      assert.equal((await peer.sendHttpEvent(body)).status, 200);
      state.refusing = false;
      await until(() => state.accepted.length === 1, 'the push taken');
      assert.equal((await peer.sendHttpEvent(body, { retryNum: 1, retryReason: 'http_timeout' })).status, 200);
      await quiet(300);
      assert.equal(state.accepted.length, 1, 'the retry was known');
    });
  });

  it('HTTP: a slow users.info does not hold the 200 back: no X-Slack-Retry-Num', async () => {
    peer.reset();
    await listening(
      httpConfig(),
      async (state) => {
        peer.useHttp(listenerUrl(state));
        peer.usersInfoDelay(2500);
        await peer.post('alice', dm, 'over http, slowly');
        await until(() => state.accepted.length === 1, 'the push', 10_000);
        await quiet(300);
        assert.deepEqual(
          peer.stats.httpDeliveries.map((d) => [d.retry, d.status]),
          [[0, 200]],
        );
        assert.equal(state.accepted[0]!.sender.name, 'alice');
      },
      { refusing: false },
    );
  });

  it('a thread the bot answered in before a restart stays addressed when conversations.replies fails once', async () => {
    peer.reset();
    const thread: Place = { kind: 'thread' };
    await listening(
      socketConfig(),
      async (state) => {
        peer.botPostedIn(thread, 'an earlier answer');
        peer.failReplies(1, 'http_500');
        await peer.post('alice', thread, 'a follow-up');
        await until(() => state.accepted.length === 1, 'the push');
        assert.equal(state.accepted[0]!.addressed, true, 'a follow-up in the bot\'s thread, not chatter');
        assert.equal(peer.calls.filter((c) => c.method === 'conversations.replies').length, 2, 'asked again after the failure');
      },
      { refusing: false },
    );
  });

  it('a Slack Connect file stub (file_access: check_file_info) is completed with files.info and saved', async () => {
    peer.reset();
    peer.fileStubs(true);
    await listening(
      socketConfig(),
      async (state) => {
        await peer.postFile('alice', dm, { name: 'shared.txt', mime: 'text/plain', data: new TextEncoder().encode('from another org') }, 'see this');
        await until(() => state.accepted.length === 1, 'the push');
        const [file] = state.accepted[0]!.attachments ?? [];
        assert.equal(file?.name, 'shared.txt');
        assert.ok(file?.path, `saved (${file?.note ?? ''})`);
        assert.equal(readFileSync(join(workspace, file.path), 'utf8'), 'from another org');
        assert.ok(peer.calls.some((c) => c.method === 'files.info'));
      },
      { refusing: false },
    );
  });

  it('auth.test runs once per process; a refused token rejects listen, with no unhandled rejection', async () => {
    peer.reset();
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown): void => void unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      const config = { bot_token: peer.botToken, app_token: peer.appToken, api_url: peer.apiUrl, listen: '127.0.0.1:0', mention_only: true, stream: false } satisfies SlackConfig;
      const context = { name: 'slack', log: testLogger(), assistantName: 'Testbot', attachments: createAttachmentStore({ workspace }), state: testChannelState(), stateDir: workspace };
      const link = { ready: () => undefined, alive: () => undefined, deaf: () => undefined };
      const push = async (): Promise<'accepted'> => 'accepted';
      const refused = createSlackChannel({ ...config, bot_token: 'xoxb-not-the-token' }, context);
      await assert.rejects(refused.listen(push, new AbortController().signal, link), /invalid_auth/);

      const channel = createSlackChannel(config, context);
      for (let i = 0; i < 2; i++) {
        const abort = new AbortController();
        let ready = false;
        const done = channel.listen(push, abort.signal, { ...link, ready: () => void (ready = true) });
        await until(() => ready, `listen ${i + 1} ready`);
        abort.abort();
        await done;
      }
      await quiet(300);
      assert.equal(peer.calls.filter((c) => c.method === 'auth.test').length, 2, 'one refused, then one for both listens of the other channel');
      assert.deepEqual(unhandled, []);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });
});

describe('slack rate limits (chat.postMessage 1/s per channel, chat.update Tier 3)', () => {
  it('a 429 of any call is a SendError with Retry-After — per chat for posts, the whole channel for edits — and the peer counts calls inside the wait', async () => {
    const peer = await startSlackPeer({ rateLimits: { postsPerSecond: 1, postBurst: 1, updatesPerMinute: 50, updateBurst: 1 } });
    const workspace = mkdtempSync(join(tmpdir(), 'sb-slack-'));
    try {
      const config = { bot_token: peer.botToken, app_token: peer.appToken, api_url: peer.apiUrl, listen: '127.0.0.1:0', mention_only: true, stream: false } satisfies SlackConfig;
      const channel = createSlackChannel(config, { name: 'slack', log: testLogger(), assistantName: 'Testbot', attachments: createAttachmentStore({ workspace }), state: testChannelState(), stateDir: workspace });
      const ref = { channel: 'slack', account: peer.botUserId, chat: peer.channelId(dm) };
      await channel.send({ ...ref, text: 'one' });
      const limited = await channel.send({ ...ref, text: 'two' }).then(() => undefined, (error: unknown) => error);
      assert.ok(limited instanceof SendError, String(limited));
      assert.deepEqual([limited.permanent, limited.retryAfterMs, limited.scope], [false, 1000, 'chat']);
      assert.equal(peer.callsInsideWait(ref.chat), 0, 'the refused call came before the wait was announced');
      await assert.rejects(channel.send({ ...ref, text: 'three' }), SendError);
      assert.equal(peer.callsInsideWait(ref.chat), 1, 'a call that ignored Retry-After is counted');

      const group = { ...ref, chat: peer.channelId({ kind: 'group' }) };
      const draft = await channel.sendDraft({ ...group, text: 'draft' });
      await channel.edit(group, draft, 'draft, longer');
      const edit = await channel.edit(group, draft, 'draft, longer still').then(() => undefined, (error: unknown) => error);
      assert.ok(edit instanceof SendError, String(edit));
      assert.equal(edit.scope, 'channel', 'Tier 3 covers the workspace, not one chat');
      assert.ok(edit.retryAfterMs !== undefined && edit.retryAfterMs >= 1000);
      assert.equal(peer.stats.rateLimited, 3);

      peer.rateLimitNext('chat.postMessage', 3);
      const drafted = await channel.sendDraft({ ...ref, chat: peer.channelId({ kind: 'dm', user: 'bob' }), text: 'a draft' }).then(() => undefined, (error: unknown) => error);
      assert.ok(drafted instanceof SendError && drafted.retryAfterMs === 3000 && drafted.scope === 'chat', String(drafted));
      const file = join(workspace, 'report.txt');
      writeFileSync(file, 'numbers');
      peer.rateLimitNext('files.getUploadURLExternal', 2);
      const upload = await channel.sendFile(group, { path: file, name: 'report.txt' }).then(() => undefined, (error: unknown) => error);
      assert.ok(upload instanceof SendError && upload.retryAfterMs === 2000 && upload.scope === 'channel' && !upload.permanent, String(upload));
    } finally {
      await peer.close();
      rmSync(workspace, { recursive: true, force: true });
    }
  });
});

const env = { TEST_MODEL_KEY: 'sk-slack' };
const dm: Place = { kind: 'dm', user: 'alice' };



/** A daemon on one config (kept across restarts) talking to the peer. */
function harness(): {
  peer: () => SlackPeer;
  model: () => FakeOpenAI;
  start: (section?: string) => Promise<Daemon>;
  restart: () => Promise<Daemon>;
  stop: () => Promise<void>;
  log: () => string;
  texts: (place?: Place) => string[];
} {
  let peer: SlackPeer;
  let model: FakeOpenAI;
  let daemon: Daemon | undefined;
  let config: ReturnType<typeof tempConfig> | undefined;
  before(async () => {
    model = await startFakeOpenAI();
    peer = await startSlackPeer({ pingIntervalMs: 1000 });
  });
  after(async () => {
    await stopDaemon();
    config?.cleanup();
    await peer.close();
    await model.close();
  });
  async function stopDaemon(): Promise<void> {
    if (!daemon) return;
    const running = daemon.child.exitCode === null && daemon.child.signalCode === null;
    if (running) daemon.child.kill('SIGTERM');
    const { code } = await daemon.exited;
    if (running) assert.equal(code, 0, `daemon exit code\n${daemon.stdout().slice(-4000)}\n${daemon.stderr()}`);
    daemon = undefined;
  }
  async function launch(): Promise<Daemon> {
    daemon = startDaemon(['start', '--config', config!.file], { env });
    await daemon.waitFor(/"msg":"ready"/, 'stdout', 20_000);
    return daemon;
  }
  return {
    peer: () => peer,
    model: () => model,
    async start(section = peer.configSection()) {
      await stopDaemon();
      config?.cleanup();
      peer.reset();
      model.requests.length = 0;
      config = tempConfig(model.baseUrl, `[log]\nformat = "json"\nlevel = "debug"\n[runtime]\nrestart_initial_seconds = 0.2\n${section}allow = ["${peer.users.alice}"]\n`);
      return launch();
    },
    async restart() {
      await stopDaemon();
      return launch();
    },
    stop: stopDaemon,
    log: () => `daemon stdout:\n${daemon?.stdout().slice(-6000)}\nstderr:\n${daemon?.stderr().slice(-2000)}`,
    texts: (place = dm) => peer.botMessages(place).map((m) => m.text),
  };
}

describe('slack Socket Mode faults', () => {
  const h = harness();

  it('reconnects after the socket is dropped mid-conversation; nothing is lost or answered twice', async () => {
    await h.start();
    const peer = h.peer();
    await peer.post('alice', dm, 'first');
    await until(() => h.texts().length === 1, 'the first reply', 10_000, h.log);
    // The model is answering when the socket goes: the reply still goes out over the Web API.
    h.model().script({ text: 'slow answer', delayMs: 800 });
    await peer.post('alice', dm, 'second');
    await h.model().waitForRequests(2);
    peer.dropSocket();
    // Posted while the bot is away: delivered when it is back.
    await peer.post('alice', dm, 'third');
    await until(() => h.texts().length === 3, 'every reply', 15_000, h.log);
    await quiet();
    assert.deepEqual(h.texts(), ['echo: first', 'slow answer', 'echo: third']);
    assert.ok(peer.stats.connections >= 2, 'the channel reconnected');
    assert.ok(peer.envelopes().every((e) => e.acked), 'every envelope was acknowledged');
  });

  it('an envelope whose ack was lost at a drop is redelivered and answered once', async () => {
    await h.start();
    const peer = h.peer();
    peer.dropOnNextAck();
    await peer.post('alice', dm, 'only once');
    await until(() => peer.stats.redeliveries >= 1 && peer.envelopes().every((e) => e.acked), 'the redelivery and its ack', 15_000, h.log);
    await until(() => h.texts().length === 1, 'the reply', 10_000, h.log);
    await quiet(800);
    assert.deepEqual(h.texts(), ['echo: only once']);
    assert.equal(h.model().requests.length, 1, 'the redelivered event did not reach the model again');
  });

  it('notices a silent socket (no pings, pongs or events) and reconnects', async () => {
    await h.start();
    const peer = h.peer();
    const connections = peer.stats.connections;
    peer.goSilent();
    await peer.post('alice', dm, 'are you there?');
    await until(() => h.texts().length === 1, 'the reply after reconnecting', 25_000, h.log);
    assert.ok(peer.stats.connections > connections, 'a new connection was made');
    await quiet();
    assert.deepEqual(h.texts(), ['echo: are you there?']);
  });

  it('reconnects at once on a disconnect envelope', async () => {
    await h.start();
    const peer = h.peer();
    peer.sendDisconnect();
    await until(() => peer.stats.connections === 2 && peer.liveSockets() >= 1, 'the new connection', 10_000, h.log);
    await peer.post('alice', dm, 'after refresh');
    await until(() => h.texts().length === 1, 'the reply', 10_000, h.log);
    assert.deepEqual(h.texts(), ['echo: after refresh']);
  });

  it('a refused bot token: the supervisor retries the listen, the daemon stays up, and answers once Slack takes it', async () => {
    h.peer().refuseAuth(2);
    const daemon = await h.start();
    const peer = h.peer();
    // "ready" comes once every channel is up or has failed its first attempt: wait for the third.
    await until(() => peer.calls.filter((c) => c.method === 'auth.test').length === 3, 'the third auth.test', 15_000, h.log);
    await peer.post('alice', dm, 'finally');
    await until(() => h.texts().length === 1, 'the reply', 10_000, h.log);
    assert.deepEqual(h.texts(), ['echo: finally']);
    assert.equal((daemon.stdout().match(/"msg":"channel stopped; restarting"/g) ?? []).length, 2, h.log());
    assert.match(daemon.stdout(), /invalid_auth/);
    assert.equal(peer.calls.filter((c) => c.method === 'auth.test').length, 3, 'two refused, one that worked');
    assert.equal(daemon.child.exitCode, null, 'the daemon did not crash');
  });

  it('waits out a 429 and delivers the reply once', async () => {
    await h.start();
    const peer = h.peer();
    peer.rateLimitNextPost(1);
    await peer.post('alice', dm, 'rate me');
    await until(() => h.texts().length === 1, 'the reply', 15_000, h.log);
    await quiet(800);
    assert.equal(peer.stats.rateLimited, 1);
    assert.deepEqual(h.texts(), ['echo: rate me']);
    assert.equal(peer.calls.filter((c) => c.method === 'chat.postMessage').length, 2, 'one refused post, one that went through');
  });

  it('SIGKILLed between receiving and replying: exactly one reply after the restart', async () => {
    const daemon = await h.start();
    const peer = h.peer();
    h.model().script({ text: 'never sent', delayMs: 30_000 });
    // The ack is lost too, so Slack redelivers the event to the restarted daemon: its inbox must know it.
    peer.loseAcks(true);
    await peer.post('alice', dm, 'survive this');
    await h.model().waitForRequests(1);
    daemon.child.kill('SIGKILL');
    await daemon.exited;
    peer.loseAcks(false);
    await h.restart();
    await until(() => h.texts().length === 1, 'the reply after the restart', 15_000, h.log);
    await until(() => peer.envelopes().every((e) => e.acked), 'the redelivered event acknowledged', 10_000, h.log);
    await quiet(800);
    assert.ok(peer.stats.redeliveries >= 1, 'the event was delivered again after the restart');
    assert.deepEqual(h.texts(), ['echo: survive this']);
    assert.equal(h.model().requests.length, 2, 'asked once before the kill, once after — not again for the redelivery');
  });
});

describe('slack HTTP Events API', () => {
  const h = harness();
  let url: string;

  before(async () => {
    const daemon = await h.start(h.peer().httpConfigSection());
    url = /"url":"(http:\/\/[^"]+\/slack\/events)"/.exec(daemon.stdout())![1]!;
    h.peer().useHttp(url);
  });

  it('answers a signed event, echoes url_verification, and rejects bad or stale signatures with 401', async () => {
    const peer = h.peer();
    await peer.post('alice', dm, 'over http');
    await until(() => h.texts().length === 1, 'the reply', 10_000, h.log);
    assert.deepEqual(h.texts(), ['echo: over http']);
    await quiet();
    assert.ok(peer.stats.httpDeliveries.length >= 2, 'the message and the echo of the reply were POSTed');
    assert.ok(peer.stats.httpDeliveries.every((d) => d.status === 200), JSON.stringify(peer.stats.httpDeliveries));

    const challenge = await peer.sendHttpEvent({ token: 'x', challenge: 'c-123', type: 'url_verification' });
    assert.equal(challenge.status, 200);
    assert.deepEqual(JSON.parse(challenge.body), { challenge: 'c-123' });

    const forged = await peer.sendHttpEvent(peer.eventBody('alice', dm, 'forged message'), { badSignature: true });
    assert.equal(forged.status, 401);
    const stale = await peer.sendHttpEvent(peer.eventBody('alice', dm, 'stale message'), { timestamp: Math.floor(Date.now() / 1000) - 10 * 60 });
    assert.equal(stale.status, 401);
    await quiet();
    assert.equal(h.model().requests.length, 1, 'nothing unsigned reached the model');
    assert.doesNotMatch(JSON.stringify(h.model().requests), /forged|stale/);
    assert.equal(h.texts().length, 1);
  });

  it('answers a retried event (X-Slack-Retry-Num) 200 and only once', async () => {
    const peer = h.peer();
    const before = h.texts().length;
    const requests = h.model().requests.length;
    const body = peer.eventBody('alice', dm, 'said twice');
    assert.equal((await peer.sendHttpEvent(body)).status, 200);
    assert.equal((await peer.sendHttpEvent(body, { retryNum: 1 })).status, 200);
    await until(() => h.texts().length === before + 1, 'the reply', 10_000, h.log);
    await quiet(800);
    assert.equal(h.texts().at(-1), 'echo: said twice');
    assert.equal(h.texts().length, before + 1, 'answered once');
    assert.equal(h.model().requests.length, requests + 1);
  });
});

/** Records what is written through `console` (Bolt falls back to console loggers wherever it is not given ours). */
function watchConsole(): { calls: unknown[][]; restore: () => void } {
  const calls: unknown[][] = [];
  const saved = { ...console };
  for (const method of ['log', 'info', 'warn', 'error', 'debug', 'trace'] as const) console[method] = (...args: unknown[]) => void calls.push(args);
  return { calls, restore: () => void Object.assign(console, saved) };
}
