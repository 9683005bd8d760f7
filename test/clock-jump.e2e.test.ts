/**
 * The daemon under libfaketime with its wall clock stepped (monotonic time left alone, as a real
 * `date -s` or NTP step does): a reminder due in an hour fires once when the clock jumps two
 * hours ahead, not again when it jumps back a day; the daemon keeps answering; and the uptime in
 * /status and /api/status follows the monotonic clock, not the jumps.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startFakeOpenAI, type FakeOpenAI } from './fixtures/fake-openai.ts';
import { startDaemon, tempConfig, type Daemon } from './support/cli.ts';
import { freePort } from './support/net.ts';
import { libfaketime, requireServers } from './support/servers.ts';
import { quiet, until } from './support/wait.ts';

requireServers('libfaketime');

describe('wall clock jumps under a running daemon (libfaketime)', () => {
  let model: FakeOpenAI;
  let daemon: Daemon;
  let config: ReturnType<typeof tempConfig>;
  let offsetDir: string;
  let offsetFile: string;
  let statusUrl: string;

  /** Steps the daemon's wall clock to `offset` from the real one ("+2h", "-1d", "+0"). */
  const setOffset = (offset: string): void => writeFileSync(offsetFile, `${offset}\n`);

  before(async () => {
    offsetDir = mkdtempSync(join(tmpdir(), 'sb-faketime-'));
    offsetFile = join(offsetDir, 'offset');
    setOffset('+0');
    model = await startFakeOpenAI();
    const port = await freePort();
    statusUrl = `http://127.0.0.1:${port}/api/status`;
    config = tempConfig(model.baseUrl, `[log]\nformat = "json"\n[gateway]\nlisten = "127.0.0.1:${port}"\n[tools]\nenabled = ["schedule"]\n[channels.terminal]\nuser = "ada"\n`);
    daemon = startDaemon(['start', '--config', config.file], {
      env: {
        TEST_MODEL_KEY: 'k',
        LD_PRELOAD: libfaketime,
        FAKETIME_TIMESTAMP_FILE: offsetFile,
        // Re-read the offset file at most every second; the monotonic clock is not faked.
        FAKETIME_CACHE_DURATION: '1',
        FAKETIME_DONT_FAKE_MONOTONIC: '1',
      },
    });
    await daemon.waitFor(/"msg":"ready"/);
  });
  after(async () => {
    daemon.child.kill('SIGTERM');
    await daemon.exited;
    config.cleanup();
    await model.close();
    rmSync(offsetDir, { recursive: true, force: true });
  });

  const lines = (): string[] => daemon.stdout().split('\n').filter((line) => line !== '');

  async function ask(text: string): Promise<string> {
    const before = lines().length;
    daemon.child.stdin.write(`${text}\n`);
    await until(() => lines().length > before, `a reply to ${JSON.stringify(text)}`, 15_000, () => daemon.stderr().slice(-3000));
    return lines()[before]!;
  }

  async function uptime(): Promise<number> {
    const report = (await (await fetch(statusUrl)).json()) as { uptimeSeconds: number; startedAt: string; channels: Array<{ restarts: number }> };
    assert.deepEqual(report.channels.map((channel) => channel.restarts), report.channels.map(() => 0), 'no channel restarted');
    return report.uptimeSeconds;
  }

  it('is really running on the faked clock', async () => {
    setOffset('+3d');
    await quiet(2500);
    model.script({ text: 'ok' });
    await ask('what day is it?');
    const system = model.requests.at(-1)!.body.messages[0]!.content ?? '';
    const year = new Date(Date.now() + 3 * 86_400_000).toISOString().slice(0, 10);
    assert.ok(system.includes(year), `the system prompt dates itself three days ahead (${year}):\n${system.slice(0, 400)}`);
    setOffset('+0');
    await quiet(2500);
  });

  it('fires a reminder due in an hour once when the clock jumps ahead, and not again when it jumps back', async () => {
    model.script({ toolCalls: [{ name: 'schedule', arguments: { action: 'create', message: 'Stretch!', in_minutes: 60 } }] }, { text: 'Scheduled.' });
    assert.equal(await ask('remind me to stretch in an hour'), 'Scheduled.');

    const fired = (): string[] => lines().filter((line) => line.includes('[Scheduled task #1] Stretch!'));
    setOffset('+2h');
    await until(() => fired().length === 1, 'the reminder', 15_000, () => daemon.stderr().slice(-3000));
    setOffset('-1d');
    await quiet(3500);
    setOffset('+2h');
    await quiet(3500);
    assert.equal(fired().length, 1, 'fired once for its due time');
    assert.equal(await ask('still there?'), 'echo: still there?');
  });

  it('keeps its uptime on the monotonic clock through jumps of a day either way', async () => {
    for (const offset of ['+1d', '-1d']) {
      setOffset(offset);
      await quiet(2500);
      const seconds = await uptime();
      assert.ok(seconds > 0 && seconds < 300, `/api/status uptime after a step to ${offset}: ${seconds} s`);
      assert.match(await ask('/status'), /^Up (\d+s|[1-4]m) and running/);
      assert.equal(await ask(`hello at ${offset}`), `echo: hello at ${offset}`);
    }
    setOffset('+0');
  });
});
