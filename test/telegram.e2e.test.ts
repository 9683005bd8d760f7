/**
 * Telegram end to end: the channel and the real daemon against a local Bot API peer
 * (test/peers/telegram.ts). The shared contract suites, then faults: dropped and lost polls,
 * a restarted server, SIGKILL before the update was confirmed, a stalled poll (watchdog),
 * 429 on sendMessage, and webhook mode.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { createTelegramChannel } from '../channels/telegram/index.ts';
import { createAttachmentStore } from '../src/inbound/attachments.ts';
import { runChannelContract } from './contracts/channel.ts';
import { runChatChannelContract, type Place } from './contracts/chat-channel.ts';
import { startFakeOpenAI, type FakeOpenAI } from './fixtures/fake-openai.ts';
import { startTelegramPeer, type TelegramPeer } from './peers/telegram.ts';
import { startDaemon, tempConfig, type Daemon } from './support/cli.ts';
import { testLogger } from './support/log.ts';
import { quiet, until } from './support/wait.ts';
import { testChannelState } from './support/channel-state.ts';

const dm: Place = { kind: 'dm', user: 'alice' };
const env = { TEST_MODEL_KEY: 'sk-telegram' };

// The contract's group test keeps unaddressed chatter as context: that needs privacy mode off
// (BotFather /setprivacy → Disable), as the README says. With it on (every new bot), Telegram
// never delivers that chatter — channels/telegram/index.test.ts tests that.
runChatChannelContract('telegram', () => startTelegramPeer({ canReadAllGroupMessages: true }));

runChannelContract('telegram', async () => {
  const peer = await startTelegramPeer();
  const workspace = mkdtempSync(join(tmpdir(), 'sb-tg-'));
  const channel = createTelegramChannel(
    { token: peer.token, api_root: peer.apiRoot, poll_timeout_seconds: 5, mention_only: true, stream: false },
    { name: 'telegram', log: testLogger(), assistantName: 'Testbot', attachments: createAttachmentStore({ workspace }), state: testChannelState(), stateDir: workspace },
  );
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


describe('telegram faults', () => {
  let model: FakeOpenAI;
  let peer: TelegramPeer;
  let config: ReturnType<typeof tempConfig>;
  let daemon: Daemon | undefined;

  before(async () => {
    model = await startFakeOpenAI();
    peer = await startTelegramPeer();
  });
  after(async () => {
    await stop();
    await peer.close();
    await model.close();
  });

  const texts = (): string[] => peer.botMessages(dm).map((m) => m.text);
  const log = (): string => `\nbot messages: ${JSON.stringify(texts())}\ndaemon log:\n${daemon?.stdout().slice(-4000)}\n${daemon?.stderr().slice(-2000)}`;

  /** A daemon on a fresh data dir (or the same one with `reuse`), fast restarts, short polls. */
  async function start(reuse = false): Promise<void> {
    // a test that failed before its stop() leaves its daemon: two pollers on one token would fail every later test (and keep this file from ending)
    if (daemon && daemon.child.exitCode === null && daemon.child.signalCode === null) {
      daemon.child.kill('SIGKILL');
      await daemon.exited;
    }
    if (!reuse) {
      peer.reset();
      model.requests.length = 0;
      config = tempConfig(
        model.baseUrl,
        `[log]\nformat = "json"\n[runtime]\nrestart_initial_seconds = 0.2\nrestart_max_seconds = 1\n${peer.configSection()}poll_timeout_seconds = 1\nallow = ["${peer.users.alice}"]\n`,
      );
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
    await until(() => texts().length >= n, `reply ${n} (${text})`, 15_000, log);
  }

  it('reconnects after getUpdates connections are dropped or a batch is lost, answering every message once', async () => {
    await start();
    await roundTrip('one', 1);
    await until(() => peer.pollsWaiting > 0, 'a waiting poll');
    assert.equal(peer.dropPolls(), 1);
    await roundTrip('two', 2);
    // The batch carrying "three" is lost in transit: it was never confirmed, so it comes again.
    peer.dropNextDelivery();
    await peer.post('alice', dm, 'three');
    const three = peer.lastUpdateId;
    await until(() => texts().length >= 3, 'the reply to the lost batch', 15_000, log);
    assert.equal(peer.deliveries(three), 2, 'the lost batch was handed out again');
    await until(() => peer.pollsWaiting > 0, 'a waiting poll');
    peer.dropPolls();
    await roundTrip('four', 4);
    await quiet();
    assert.deepEqual(texts(), ['echo: one', 'echo: two', 'echo: three', 'echo: four']);
    await stop();
  });

  it('reconnects after the Bot API server restarts, losing and doubling nothing', async () => {
    await start();
    await roundTrip('before', 1);
    const restarting = peer.restart(500);
    await peer.post('alice', dm, 'while down'); // Telegram keeps it until the bot is back
    await restarting;
    await until(() => texts().length >= 2, 'the reply after the restart', 20_000, log);
    await roundTrip('after', 3);
    await quiet();
    assert.deepEqual(texts(), ['echo: before', 'echo: while down', 'echo: after']);
    await stop();
  });

  it('answers exactly once after SIGKILL between receiving an update and replying, though the dead poller never confirmed it', async () => {
    await start();
    model.script({ text: 'never sent', delayMs: 60_000 });
    peer.stallAfterNextDelivery(); // the poll that would confirm the update never gets through
    await peer.post('alice', dm, 'survive this');
    const update = peer.lastUpdateId;
    await model.waitForRequests(1);
    assert.equal(peer.pending, 1, 'the update is still unconfirmed');
    daemon!.child.kill('SIGKILL');
    await daemon!.exited;
    peer.unstall();
    await start(true);
    await until(() => texts().length >= 1, 'the reply after restart', 20_000, log);
    await until(() => peer.pending === 0, 'the update confirmed');
    await quiet();
    assert.deepEqual(texts(), ['echo: survive this']);
    // The dead poller stored its offset once the update was in the inbox (channels/telegram/offset.ts), so the new
    // one usually confirms it without reading it again; killed before that write, Telegram hands it out again and
    // the inbox recognises it. Either way it is answered once.
    assert.ok([1, 2].includes(peer.deliveries(update)), `handed out ${peer.deliveries(update)} times`);
    assert.equal(model.requests.length, 2, 'the model was asked once before the kill and once after');
    await stop();
  });

  it('restarts a poller stuck on a hung getUpdates (liveness watchdog)', async () => {
    await start();
    await roundTrip('hello', 1);
    peer.stallPolls();
    await daemon!.waitFor(/no sign of life/, 'stdout', 20_000);
    peer.unstall();
    await roundTrip('still there?', 2);
    assert.deepEqual(texts(), ['echo: hello', 'echo: still there?']);
    await stop();
  });

  it('delivers a reply once after a 429, waiting retry_after', async () => {
    await start();
    peer.rateLimitSends(1, 1);
    await roundTrip('rate me', 1);
    await quiet();
    assert.deepEqual(texts(), ['echo: rate me']);
    const sends = peer.calls.filter((c) => c.method === 'sendMessage');
    assert.deepEqual(
      sends.map((c) => c.status),
      [429, 200],
    );
    assert.ok(sends[1]!.at - sends[0]!.at >= 900, `retried after ${sends[1]!.at - sends[0]!.at} ms, before retry_after`);
    await stop();
  });
});

describe('telegram webhook mode', () => {
  let model: FakeOpenAI;
  let peer: TelegramPeer;
  let config: ReturnType<typeof tempConfig>;
  let daemon: Daemon;

  before(async () => {
    model = await startFakeOpenAI();
    peer = await startTelegramPeer({ webhook: true });
    config = tempConfig(model.baseUrl, `[log]\nformat = "json"\n${peer.configSection()}allow = ["${peer.users.alice}"]\n`);
    daemon = startDaemon(['start', '--config', config.file], { env });
    await daemon.waitFor(/"msg":"ready"/, 'stdout', 20_000);
  });
  after(async () => {
    daemon.child.kill('SIGTERM');
    await daemon.exited;
    config.cleanup();
    await peer.close();
    await model.close();
  });

  it('sets the webhook with the secret and answers a DM delivered to it', async () => {
    const set = peer.calls.find((c) => c.method === 'setWebhook');
    assert.ok(set, 'setWebhook was called');
    assert.equal(set.params.url, peer.webhook!.url);
    assert.equal(set.params.secret_token, peer.webhook!.secret);
    await peer.post('alice', dm, 'via webhook');
    await until(() => peer.botMessages(dm).length === 1, 'the reply', 15_000, () => daemon.stdout().slice(-3000));
    assert.equal(peer.botMessages(dm)[0]!.text, 'echo: via webhook');
    assert.ok(peer.webhookAnswers.includes(200));
    assert.equal(peer.calls.filter((c) => c.method === 'getUpdates').length, 0, 'no polling in webhook mode');
  });

  it('rejects a request without the right secret token', async () => {
    const message = peer.messageFrom('alice', dm, 'forged');
    assert.equal(await peer.webhookRequest({ message }, 'wrong-secret'), 401);
    await quiet();
    assert.equal(peer.botMessages(dm).length, 1, 'nothing answered the forged update');
    assert.doesNotMatch(JSON.stringify(model.requests), /forged/);
  });
});

/** CPU seconds (user + system) a process has used so far, from /proc (Linux clock ticks of 1/100 s). */
function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

describe('telegram against a server that answers getUpdates at once (no long polling)', () => {
  let model: FakeOpenAI;
  let peer: TelegramPeer;
  let config: ReturnType<typeof tempConfig>;
  let daemon: Daemon | undefined;

  before(async () => {
    model = await startFakeOpenAI();
    peer = await startTelegramPeer({ ignoreTimeout: true });
    config = tempConfig(model.baseUrl, `[log]\nformat = "json"\n${peer.configSection()}allow = ["${peer.users.alice}"]\n`);
    daemon = startDaemon(['start', '--config', config.file], { env });
    await daemon.waitFor(/"msg":"ready"/, 'stdout', 20_000);
  });
  after(async () => {
    if (daemon) {
      daemon.child.kill('SIGTERM');
      await daemon.exited;
    }
    config?.cleanup();
    await peer?.close();
    await model?.close();
  });

  it('does not spin while idle, says so once, and still answers within a second or two', async (t) => {
    await daemon!.waitFor(/answers getUpdates at once/, 'stdout', 10_000);
    const pid = daemon!.child.pid!;
    const polls = (): number => peer.calls.filter((c) => c.method === 'getUpdates').length;
    const cpuBefore = cpuSeconds(pid);
    const pollsBefore = polls();
    const started = Date.now();
    await new Promise((resolve) => setTimeout(resolve, 5000));
    const seconds = (Date.now() - started) / 1000;
    const share = (cpuSeconds(pid) - cpuBefore) / seconds;
    const rate = (polls() - pollsBefore) / seconds;
    assert.ok(share < 0.05, `idle CPU ${(share * 100).toFixed(1)} % of a core over ${seconds.toFixed(1)} s (${rate.toFixed(1)} polls/s)`);
    assert.ok(rate <= 3, `${rate.toFixed(1)} getUpdates a second while idle`);
    const warnings = daemon!.stdout().split('\n').filter((line) => line.includes('answers getUpdates at once'));
    assert.equal(warnings.length, 1, 'the warning is logged once');
    assert.match(warnings[0]!, new RegExp(`"server":"${peer.apiRoot}"`));
    assert.doesNotMatch(warnings[0]!, new RegExp(peer.token), 'the token stays out of the log');

    const sent = Date.now();
    await peer.post('alice', dm, 'are you there?');
    await until(() => peer.botMessages(dm).length === 1, 'the reply', 10_000, () => daemon!.stdout().slice(-3000));
    const latency = Date.now() - sent;
    assert.equal(peer.botMessages(dm)[0]!.text, 'echo: are you there?');
    assert.ok(latency < 3000, `answered after ${latency} ms`);
    t.diagnostic(`idle CPU ${(share * 100).toFixed(2)} % of a core over ${seconds.toFixed(1)} s, ${rate.toFixed(2)} getUpdates/s, reply after ${latency} ms`);
  });
});
