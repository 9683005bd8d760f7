/**
 * Config reload end to end: a real daemon with Telegram, its config rewritten to add Slack,
 * change Telegram's allow list and the model; SIGHUP applies it without a restart. Then an
 * invalid file is rejected and the daemon keeps answering; `switchboard reload` works too.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Place } from './contracts/chat-channel.ts';
import { startFakeOpenAI, type FakeOpenAI } from './fixtures/fake-openai.ts';
import { startSlackPeer, type SlackPeer } from './peers/slack.ts';
import { startTelegramPeer, type TelegramPeer } from './peers/telegram.ts';
import { runCli, startDaemon, tempConfig, type Daemon } from './support/cli.ts';
import { freePort } from './support/net.ts';
import { quiet, until } from './support/wait.ts';

const env = { TEST_MODEL_KEY: 'sk-reload' };
const alice: Place = { kind: 'dm', user: 'alice' };
const bob: Place = { kind: 'dm', user: 'bob' };

describe('config reload', () => {
  let model: FakeOpenAI;
  let telegram: TelegramPeer;
  let slack: SlackPeer;
  let config: ReturnType<typeof tempConfig>;
  let daemon: Daemon;

  before(async () => {
    model = await startFakeOpenAI();
    telegram = await startTelegramPeer();
    slack = await startSlackPeer();
  });
  after(async () => {
    if (daemon && daemon.child.exitCode === null && daemon.child.signalCode === null) {
      daemon.child.kill('SIGKILL');
      await daemon.exited;
    }
    config?.cleanup();
    await slack.close();
    await telegram.close();
    await model.close();
  });

  const log = (): string => `\ndaemon stdout:\n${daemon.stdout().slice(-6000)}\nstderr:\n${daemon.stderr().slice(-2000)}`;
  const tgTexts = (place: Place): string[] => telegram.botMessages(place).map((m) => m.text);
  const reloads = (pattern: RegExp): number => daemon.stdout().split('\n').filter((line) => pattern.test(line)).length;
  const lastModel = (): string => model.requests.at(-1)!.body.model;
  const telegramSection = (allow: string): string => `${telegram.configSection()}poll_timeout_seconds = 1\nallow = ["${allow}"]\n`;
  const head = `[log]\nformat = "json"\n[runtime]\nrestart_initial_seconds = 0.2\n`;

  it('adds a channel, restarts a changed one, switches the model, and survives an invalid file', async () => {
    config = tempConfig(model.baseUrl, `${head}${telegramSection(telegram.users.alice)}`);
    daemon = startDaemon(['start', '--config', config.file], { env });
    await daemon.waitFor(/"msg":"ready"/, 'stdout', 20_000);
    assert.ok(existsSync(join(config.dir, 'data', 'switchboard.pid')), 'pid file written');

    await telegram.post('alice', alice, 'one');
    await until(() => tgTexts(alice).length === 1, 'the first reply', 15_000, log);
    assert.equal(lastModel(), 'test-model');

    // Slack added, Telegram now lets only bob through, a new model.
    const original = readFileSync(config.file, 'utf8');
    writeFileSync(
      config.file,
      original.replace('model = "test-model"', 'model = "model-2"').replace(`allow = ["${telegram.users.alice}"]`, `allow = ["${telegram.users.bob}"]`) +
        `${slack.configSection()}allow = ["${slack.users.alice}"]\n`,
    );
    daemon.child.kill('SIGHUP');
    await daemon.waitFor(/"msg":"config reloaded"/, 'stdout');
    const line = daemon.stdout().split('\n').find((l) => l.includes('"msg":"config reloaded"'))!;
    const logged = JSON.parse(line) as { restarted: string[]; added: string[]; removed: string[]; agentRebuilt: boolean; needsRestart: string[] };
    assert.deepEqual([logged.restarted, logged.added, logged.removed, logged.agentRebuilt, logged.needsRestart], [['telegram'], ['slack'], [], true, []]);

    await slack.post('alice', alice, 'hello slack');
    await until(() => slack.botMessages(alice).length === 1, 'the slack reply', 15_000, log);
    assert.equal(slack.botMessages(alice)[0]!.text, 'echo: hello slack');
    assert.equal(lastModel(), 'model-2', 'the next turn uses the new model');

    await telegram.post('bob', bob, 'bob here');
    await until(() => tgTexts(bob).length === 1, 'the reply to bob on the restarted telegram', 15_000, log);
    await telegram.post('alice', alice, 'still me');
    await quiet();
    assert.deepEqual(tgTexts(alice), ['echo: one'], 'alice is no longer allowed');
    assert.match(daemon.stdout(), /"msg":"message ignored"/);

    // An invalid file: rejected, logged, the old config keeps running.
    const valid = readFileSync(config.file, 'utf8');
    writeFileSync(config.file, valid.replace('kind = "openai"', 'kind = "nope"'));
    daemon.child.kill('SIGHUP');
    await daemon.waitFor(/config reload rejected: the new config is invalid/, 'stdout');
    assert.match(daemon.stdout(), /provider\.kind/);
    await slack.post('alice', alice, 'after the bad file');
    await until(() => slack.botMessages(alice).length === 2, 'a reply after the rejected reload', 15_000, log);
    assert.equal(lastModel(), 'model-2');

    // `switchboard reload` (no gateway: SIGHUP through the pid file).
    writeFileSync(config.file, valid.replace('model = "model-2"', 'model = "model-3"'));
    const result = await runCli(['reload', '--config', config.file], { env });
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stdout, /sent SIGHUP to the daemon/);
    await until(() => reloads(/"msg":"config reloaded"/) === 2, 'the second reload', 15_000, log);
    await telegram.post('bob', bob, 'again');
    await until(() => tgTexts(bob).length === 2, 'the reply after switchboard reload', 15_000, log);
    assert.equal(lastModel(), 'model-3');
    assert.deepEqual(tgTexts(bob), ['echo: bob here', 'echo: again']);

    daemon.child.kill('SIGTERM');
    const { code } = await daemon.exited;
    assert.equal(code, 0, `exit code${log()}`);
    assert.ok(!existsSync(join(config.dir, 'data', 'switchboard.pid')), 'pid file removed at stop');
    const none = await runCli(['reload', '--config', config.file], { env });
    assert.equal(none.code, 1);
    assert.match(none.stderr, /no running daemon found/);
    // A pid file left by a crash, whose pid is not (or no longer) a switchboard, is never signalled.
    const other = spawn('sleep', ['30'], { stdio: 'ignore' });
    writeFileSync(join(config.dir, 'data', 'switchboard.pid'), `${other.pid}\n`);
    const stale = await runCli(['reload', '--config', config.file], { env });
    other.kill('SIGKILL');
    assert.equal(other.signalCode ?? (await once(other, 'exit'))[1], 'SIGKILL', 'the other process got no SIGHUP');
    assert.equal(stale.code, 1);
    assert.match(stale.stderr, /is not a running switchboard/);
  });

  it('switchboard reload through the gateway prints what the reload did, or why it was refused', async () => {
    config.cleanup();
    const port = await freePort();
    config = tempConfig(model.baseUrl, `${head}[gateway]\nlisten = "127.0.0.1:${port}"\ntoken = "tok"\n${telegramSection(telegram.users.alice)}`);
    daemon = startDaemon(['start', '--config', config.file], { env });
    await daemon.waitFor(/"msg":"ready"/, 'stdout', 20_000);
    const original = readFileSync(config.file, 'utf8');
    writeFileSync(config.file, original.replace('model = "test-model"', 'model = "model-4"').replace('restart_initial_seconds = 0.2', 'restart_initial_seconds = 0.3'));
    const ok = await runCli(['reload', '--config', config.file], { env });
    assert.equal(ok.code, 0, ok.stderr);
    assert.match(ok.stdout, /config reloaded: restarted none; added none; removed none; agent rebuilt for the next turn/);
    assert.match(ok.stdout, /needs a restart to apply \(old values kept\): runtime\.restart_initial_seconds/);
    await telegram.post('alice', alice, 'via gateway');
    await until(() => tgTexts(alice).includes('echo: via gateway'), 'a reply after the gateway reload', 15_000, log);
    assert.equal(lastModel(), 'model-4');

    // Valid for the CLI (which does not need secrets), invalid for the daemon: a secret it lacks.
    writeFileSync(config.file, original.replace('${TEST_MODEL_KEY}', '${SB_RELOAD_UNSET_KEY}'));
    const refused = await runCli(['reload', '--config', config.file], { env });
    assert.equal(refused.code, 1, refused.stdout);
    assert.match(refused.stderr, /the daemon rejected the new config\.\nConfig error in .*SB_RELOAD_UNSET_KEY.*\nThe running daemon keeps the config it had\. Fix the file, then run `switchboard reload` again\./s);
    assert.doesNotMatch(refused.stderr, /Nothing was started/);
    assert.match(daemon.stdout(), /config reload rejected: the new config is invalid/);
    await telegram.post('alice', alice, 'still answered');
    await until(() => tgTexts(alice).includes('echo: still answered'), 'a reply after the refused reload', 15_000, log);
    assert.equal(lastModel(), 'model-4');
    daemon.child.kill('SIGTERM');
    assert.equal((await daemon.exited).code, 0, `exit code${log()}`);
  });
});

