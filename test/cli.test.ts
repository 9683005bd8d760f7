import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { runCli, startDaemon, tempConfig } from './support/cli.ts';

const version = (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version;

describe('switchboard CLI', () => {
  it('--help prints usage and exits 0', async () => {
    const result = await runCli(['--help']);
    assert.equal(result.code, 0);
    assert.match(result.stdout, /Usage: switchboard <command>/);
    assert.match(result.stdout, /start .*daemon/);
    assert.match(result.stdout, /chat /);
    assert.equal((await runCli(['help'])).code, 0);
    assert.equal((await runCli(['start', '-h'])).code, 0);
  });

  it('--version prints the package version', async () => {
    const result = await runCli(['--version']);
    assert.equal(result.code, 0);
    assert.equal(result.stdout.trim(), `switchboard ${version}`);
  });

  const usageErrors: Array<[string[], RegExp]> = [
    [[], /Usage/],
    [['frobnicate'], /unknown command "frobnicate"/],
    [['start', '--frob'], /Unknown option '--frob'/],
    [['chat', 'extra'], /unexpected argument "extra" for "switchboard chat"/],
    [['start', '--config'], /--config/],
  ];
  for (const [args, pattern] of usageErrors) {
    it(`exits 2 on a usage error: ${JSON.stringify(args)}`, async () => {
      const result = await runCli(args);
      assert.equal(result.code, 2);
      assert.match(result.stdout + result.stderr, pattern);
    });
  }

  it('exits 78 naming the problem when no config can be found', async () => {
    const { dir, cleanup } = tempConfig('http://127.0.0.1:9/v1');
    try {
      // cwd without switchboard.toml and a HOME without ~/.config/switchboard/config.toml
      const result = await runCli(['start'], { cwd: join(dir, '..'), env: { HOME: dir } });
      assert.equal(result.code, 78);
      assert.match(result.stderr, /no config file found/);
      assert.match(result.stderr, /Copy switchboard\.example\.toml/);
      const missing = await runCli(['start', '--config', join(dir, 'nope.toml')]);
      assert.equal(missing.code, 78);
      assert.match(missing.stderr, /nope\.toml:\n {2}\(file\): the file does not exist/);
    } finally {
      cleanup();
    }
  });

  it('exits 78 with the key, the problem and an example for a bad config, and starts nothing', async () => {
    const { file, cleanup } = tempConfig('http://127.0.0.1:9/v1');
    try {
      writeFileSync(file, '[provider]\nkind = "openai"\nmodel = "m"\n[agent]\nhistory_turns = "lots"\n[channels.terminal]\n');
      const result = await runCli(['start', '--config', file]);
      assert.equal(result.code, 78);
      assert.match(result.stderr, /agent\.history_turns: must be a whole number/);
      assert.match(result.stderr, /e\.g\. \[agent\] history_turns = 50/);
      assert.doesNotMatch(result.stdout + result.stderr, /"msg":"ready"/);
    } finally {
      cleanup();
    }
  });

  it('exits 78 naming the key and the allowed characters for a Telegram webhook secret Telegram would refuse', async () => {
    const { file, cleanup } = tempConfig('http://127.0.0.1:9/v1');
    try {
      writeFileSync(file, '[provider]\nkind = "openai"\nmodel = "m"\n[channels.telegram]\ntoken = "1:a"\nwebhook = { url = "https://bot.example.org/tg", secret = "c2VjcmV0+/w==" }\n');
      const result = await runCli(['start', '--config', file]);
      assert.equal(result.code, 78);
      assert.match(result.stderr, /channels\.telegram\.webhook\.secret: Telegram takes 1–256 characters of A-Z, a-z, 0-9, _ and - only/);
      assert.doesNotMatch(result.stdout + result.stderr, /c2VjcmV0/, 'the secret is not shown');
    } finally {
      cleanup();
    }
  });

  it('exits 78 when a secret the config reads from the environment is missing', async () => {
    const { file, cleanup } = tempConfig('http://127.0.0.1:9/v1');
    try {
      const result = await runCli(['start', '--config', file]);
      assert.equal(result.code, 78);
      assert.match(result.stderr, /provider\.api_key: environment variable TEST_MODEL_KEY is not set/);
    } finally {
      cleanup();
    }
  });

  it('exits 78 when start has no channel configured and no browser chat, naming both ways in', async () => {
    const { file, cleanup } = tempConfig('http://127.0.0.1:9/v1', '');
    try {
      const result = await runCli(['start', '--config', file], { env: { TEST_MODEL_KEY: 'k' } });
      assert.equal(result.code, 78);
      assert.match(result.stderr, /channels: no channel is enabled, so nothing could reach the agent: uncomment the table of the one you want[^\n]*give it its token, or turn on the browser chat: add a `\[gateway\]` table with `listen = "127\.0\.0\.1:8787"` \(its `console = true` is the default\) and open http:\/\/127\.0\.0\.1:8787\//);
      assert.match(result.stderr, /run `switchboard chat` \(npm run chat\): it needs no channel/);
      assert.match(result.stderr, /e\.g\. \[gateway\] listen = "127\.0\.0\.1:8787"/);
    } finally {
      cleanup();
    }
  });

  it('exits 78 when the only way in would be the browser chat and the console is off, saying to turn it on', async () => {
    const { file, cleanup } = tempConfig('http://127.0.0.1:9/v1', '[gateway]\nlisten = "127.0.0.1:8799"\nconsole = false\n');
    try {
      const result = await runCli(['start', '--config', file], { env: { TEST_MODEL_KEY: 'k' } });
      assert.equal(result.code, 78);
      assert.match(result.stderr, /channels: no channel is enabled[^\n]*or turn on the browser chat: set `\[gateway\] console = true` \(it is false here\) and open http:\/\/127\.0\.0\.1:8799\//);
      assert.match(result.stderr, /e\.g\. \[gateway\] console = true/);
      assert.doesNotMatch(result.stdout + result.stderr, /"msg":"ready"/);
    } finally {
      cleanup();
    }
  });

  it('refuses a second process on the same data_dir (exit 1), saying what to do, and frees it when the first stops', async () => {
    const { file, cleanup } = tempConfig('http://127.0.0.1:9/v1');
    try {
      const first = startDaemon(['start', '--config', file], { env: { TEST_MODEL_KEY: 'k' } });
      await first.waitFor(/"msg":"ready"/);
      const second = await runCli(['chat', '--config', file], { env: { TEST_MODEL_KEY: 'k' } });
      assert.equal(second.code, 1);
      assert.match(second.stderr, new RegExp(`^switchboard chat: the Switchboard daemon \\(pid ${first.child.pid}\\) is running on this data_dir \\(.*data\\)\\.`));
      assert.match(second.stderr, /Talk to the agent on one of the daemon's channels, or stop the daemon \(Ctrl-C in its terminal, or systemctl stop switchboard/);
      const third = await runCli(['start', '--config', file], { env: { TEST_MODEL_KEY: 'k' } });
      assert.equal(third.code, 1);
      assert.match(third.stderr, /^switchboard: the data_dir .* is in use by another Switchboard process/);
      first.child.kill('SIGKILL');
      await first.exited;
      const after = await runCli(['chat', '--config', file], { env: { TEST_MODEL_KEY: 'k' }, input: '' });
      assert.equal(after.code, 0, 'a SIGKILLed holder leaves no stale lock');
    } finally {
      cleanup();
    }
  });

  it('a chat beside another chat on the same data_dir says to finish that one first', async () => {
    const { file, cleanup } = tempConfig('http://127.0.0.1:9/v1');
    try {
      const first = startDaemon(['chat', '--config', file], { env: { TEST_MODEL_KEY: 'k' } });
      await first.waitFor(/"msg":"ready"/);
      const second = await runCli(['chat', '--config', file], { env: { TEST_MODEL_KEY: 'k' } });
      assert.equal(second.code, 1);
      assert.match(second.stderr, /^switchboard chat: another switchboard chat is using this data_dir \(.*\); only one chat or daemon may use it at a time\. Finish that chat first \(Ctrl-D in its terminal\)/);
      first.child.stdin.end();
      assert.equal((await first.exited).code, 0);
    } finally {
      cleanup();
    }
  });

  it('finds the config through $SWITCHBOARD_CONFIG', async () => {
    const { file, cleanup } = tempConfig('http://127.0.0.1:9/v1', '[agent]\nbogus = 1\n');
    try {
      const result = await runCli(['chat'], { env: { SWITCHBOARD_CONFIG: file, TEST_MODEL_KEY: 'k' } });
      assert.equal(result.code, 78);
      assert.match(result.stderr, new RegExp(`Config error in ${file.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}`));
    } finally {
      cleanup();
    }
  });
});
