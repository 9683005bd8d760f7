/**
 * Every command answers `--help` (and `-h`, and `switchboard help <command>`) with its own
 * usage and exit 0 — without a config file, since someone asking for help may not have one.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { runCli } from './support/cli.ts';

// A cwd without switchboard.toml and a HOME without ~/.config/switchboard/config.toml.
const nowhere = mkdtempSync(join(tmpdir(), 'sb-help-'));
after(() => rmSync(nowhere, { recursive: true, force: true }));
const options = { cwd: nowhere, env: { HOME: nowhere } };

const commands = ['start', 'chat', 'memory', 'pairing', 'reload', 'status', 'onboard', 'doctor', 'service', 'backup', 'store'];

describe('every command answers --help', () => {
  for (const command of commands) {
    it(`switchboard ${command} --help / -h / help ${command}`, async () => {
      const long = await runCli([command, '--help'], options);
      assert.equal(long.code, 0, long.stderr);
      assert.match(long.stdout, new RegExp(`^Usage: switchboard ${command}\\b`), long.stdout);
      assert.equal(long.stderr, '');
      const short = await runCli([command, '-h'], options);
      assert.equal(short.code, 0, short.stderr);
      assert.equal(short.stdout, long.stdout);
      const viaHelp = await runCli(['help', command], options);
      assert.equal(viaHelp.code, 0, viaHelp.stderr);
      assert.equal(viaHelp.stdout, long.stdout);
    });
  }

  it('after a subcommand or before the command, and with --config, it is still the help', async () => {
    for (const args of [['memory', 'list', '--help'], ['pairing', 'approve', '--help'], ['service', 'install', '--help'], ['--config', 'missing.toml', 'status', '--help'], ['doctor', '--json', '--help'], ['store', 'copy', '--to', 'postgres://x/y', '--help']]) {
      const result = await runCli(args, options);
      assert.equal(result.code, 0, `${args.join(' ')}: ${result.stderr}`);
      assert.match(result.stdout, new RegExp(`^Usage: switchboard ${args.find((arg) => commands.includes(arg))}\\b`), args.join(' '));
    }
  });

  it('help alone is the overview; help with an unknown command is a usage error', async () => {
    const overview = await runCli(['help'], options);
    assert.equal(overview.code, 0);
    assert.match(overview.stdout, /^Usage: switchboard <command>/);
    for (const command of commands) assert.match(overview.stdout, new RegExp(`^  ${command} `, 'm'), command);
    const unknown = await runCli(['help', 'frobnicate'], options);
    assert.equal(unknown.code, 2);
    assert.match(unknown.stderr, /unknown command "frobnicate"/);
  });
});
