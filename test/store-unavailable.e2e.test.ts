/**
 * The built daemon (bin/switchboard) started on a PostgreSQL store it cannot use: one short
 * paragraph on stderr (the server without its password, the cause, the fix), no stack trace,
 * and the exit code the systemd unit acts on — 75 (EX_TEMPFAIL) when the server may come back
 * (retried with a back-off), 78 (EX_CONFIG) when the config must change first (not retried).
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { startFakeOpenAI, type FakeOpenAI } from './fixtures/fake-openai.ts';
import { runCli, startDaemon, tempConfig } from './support/cli.ts';
import { ensureDist, launcherPath, repoRoot } from './support/dist.ts';
import { freePort } from './support/net.ts';
import { startPostgres, type TestPostgres } from './support/postgres.ts';

const secret = 'hunter2-not-in-output';

describe('a PostgreSQL store that cannot be used at start', () => {
  let model: FakeOpenAI;
  let server: TestPostgres;
  const cleanups: Array<() => void> = [];

  before(async () => {
    server = await startPostgres();
    model = await startFakeOpenAI();
    await ensureDist();
  });
  after(async () => {
    for (const cleanup of cleanups) cleanup();
    await model.close();
    server.stop();
  });

  async function start(url: string): Promise<{ code: number | null; stderr: string; stdout: string }> {
    const config = tempConfig(model.baseUrl, `[store]\nkind = "postgres"\nurl = "${url}"\n[channels.terminal]\nuser = "tester"\n`);
    cleanups.push(config.cleanup);
    const daemon = startDaemon(['start', '--config', config.file], { command: [launcherPath], env: { TEST_MODEL_KEY: 'k', SWITCHBOARD_LOG_LEVEL: 'info' } });
    daemon.child.stdin.end();
    const timer = setTimeout(() => daemon.child.kill('SIGKILL'), 60_000);
    const { code } = await daemon.exited;
    clearTimeout(timer);
    return { code, stderr: daemon.stderr(), stdout: daemon.stdout() };
  }

  function assertOneParagraph(stderr: string, stdout: string): void {
    assert.doesNotMatch(stderr, /^\s+at /m, `no stack trace:\n${stderr}`);
    assert.ok(stderr.trim().split('\n').length <= 2, `at most two lines:\n${stderr}`);
    assert.doesNotMatch(`${stderr}${stdout}`, new RegExp(secret), 'the password is never shown');
  }

  it('a closed port: connection refused, exit 75 (try again later)', async () => {
    const port = await freePort();
    const { code, stderr, stdout } = await start(`postgres://switchboard:${secret}@127.0.0.1:${port}/switchboard`);
    assert.equal(code, 75, stderr);
    assertOneParagraph(stderr, stdout);
    assert.match(stderr, new RegExp(`postgres://switchboard@127\\.0\\.0\\.1:${port}/switchboard`));
    assert.match(stderr, /connection refused: nothing listens on 127\.0\.0\.1:\d+ \(ECONNREFUSED\)/);
    assert.match(stderr, /Fix: start PostgreSQL/);
    assert.match(stderr, /exit 75: the systemd unit .* tries again later/);
  });

  it('a running server and a wrong password: authentication failed, exit 78 (not retried)', async () => {
    await server.createRole('sb_wrong', 'the-right-one');
    const { code, stderr, stdout } = await start(`postgres://sb_wrong:${secret}@127.0.0.1:${server.port}/postgres`);
    assert.equal(code, 78, stderr);
    assertOneParagraph(stderr, stdout);
    assert.match(stderr, new RegExp(`postgres://sb_wrong@127\\.0\\.0\\.1:${server.port}/postgres`));
    assert.match(stderr, /the server refused the password of user "sb_wrong" \(28P01\)/);
    assert.match(stderr, /exit 78: not retried/);
  });

  it('a database that does not exist: named, with the createdb line, exit 78', async () => {
    const { code, stderr, stdout } = await start(`postgres://postgres:${secret}@127.0.0.1:${server.port}/nowhere`);
    assert.equal(code, 78, stderr);
    assertOneParagraph(stderr, stdout);
    assert.match(stderr, /the database "nowhere" does not exist \(3D000\)\. Fix: create it: createdb --owner=postgres nowhere/);
  });

  it('an operator command (pairing list) says the same in one line, without the note on restarts', async () => {
    const port = await freePort();
    const config = tempConfig(model.baseUrl, `[store]\nkind = "postgres"\nurl = "postgres://switchboard:${secret}@127.0.0.1:${port}/switchboard"\n`);
    cleanups.push(config.cleanup);
    const result = await runCli(['pairing', 'list', '--config', config.file], { env: { TEST_MODEL_KEY: 'k' } });
    assert.equal(result.code, 75, result.stderr);
    assert.equal(result.stderr, `switchboard: cannot use the PostgreSQL database postgres://switchboard@127.0.0.1:${port}/switchboard ([store] url): connection refused: nothing listens on 127.0.0.1:${port} (ECONNREFUSED). Fix: start PostgreSQL (systemctl start postgresql), or correct the host and port in [store] url.\n`);
  });

  it('the systemd unit retries 75 (with a growing pause on systemd ≥ 254) and never 78', () => {
    const unit = readFileSync(`${repoRoot}systemd/switchboard.service`, 'utf8');
    const dropIn = readFileSync(`${repoRoot}systemd/switchboard.service.d/backoff.conf`, 'utf8');
    const value = (text: string, key: string): string | undefined => new RegExp(`^${key}=(.*)$`, 'm').exec(text)?.[1];
    assert.equal(value(unit, 'Restart'), 'on-failure');
    const prevent = (value(unit, 'RestartPreventExitStatus') ?? '').split(/\s+/);
    assert.ok(prevent.includes('78'), 'a config error is not retried');
    assert.ok(!prevent.includes('75'), 'EX_TEMPFAIL is retried');
    // The unit itself stays valid on systemd 252 (Debian 12): the back-off keys are in the drop-in only.
    assert.doesNotMatch(unit, /^Restart(Steps|MaxDelaySec)=/m);
    assert.ok(Number(value(unit, 'RestartSec')) >= 5, 'without the drop-in a pause of a few seconds, not a busy loop');
    assert.equal(value(unit, 'StartLimitIntervalSec'), '0', 'an outage longer than a start limit must not leave the service dead');
    const first = Number(value(dropIn, 'RestartSec'));
    const most = Number(value(dropIn, 'RestartMaxDelaySec'));
    const steps = Number(value(dropIn, 'RestartSteps'));
    assert.ok(first >= 1 && most >= 60 && most <= 300 && steps >= 3, `a back-off: RestartSec=${first}, RestartMaxDelaySec=${most}, RestartSteps=${steps}`);
    assert.match(dropIn, /^\[Service\]$/m);
  });
});
