/** The shipped example config parses, and docs/configuration.md embeds it word for word. */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { loadConfig } from './config.ts';

const root = join(import.meta.dirname, '..');

describe('switchboard.example.toml', () => {
  it('is a valid config as shipped, with no channel enabled: `chat` needs none, `start` says what to enable', () => {
    const { config } = loadConfig(join(root, 'switchboard.example.toml'), { OPENAI_API_KEY: 'sk-x' });
    assert.deepEqual(Object.keys(config.channels), []);
    assert.ok(config.gateway);
  });

  it('is embedded in docs/configuration.md exactly', () => {
    const example = readFileSync(join(root, 'switchboard.example.toml'), 'utf8');
    assert.ok(readFileSync(join(root, 'docs', 'configuration.md'), 'utf8').includes(example), 'docs/configuration.md is out of date: paste switchboard.example.toml into it');
  });

  it('with every commented channel table enabled is still valid', () => {
    const example = readFileSync(join(root, 'switchboard.example.toml'), 'utf8');
    const start = example.indexOf('# [channels.terminal]');
    const enabled = example.slice(0, start) + example.slice(start).replace(/^# (\[|[a-z_]+ = )/gm, '$1');
    const dir = mkdtempSync(join(tmpdir(), 'sb-example-'));
    try {
      writeFileSync(join(dir, 'switchboard.toml'), enabled);
      const env = Object.fromEntries(
        ['OPENAI_API_KEY', 'TELEGRAM_BOT_TOKEN', 'TELEGRAM_WEBHOOK_SECRET', 'DISCORD_BOT_TOKEN', 'SLACK_BOT_TOKEN', 'SLACK_APP_TOKEN', 'SLACK_SIGNING_SECRET', 'MATRIX_ACCESS_TOKEN', 'IRC_SASL_PASSWORD', 'IRC_NICKSERV_PASSWORD', 'EMAIL_PASSWORD', 'WEBHOOK_SECRET'].map((name) => [name, 'x']),
      );
      const { config } = loadConfig(join(dir, 'switchboard.toml'), env);
      assert.equal(config.channels.terminal?.user, 'alice');
      assert.equal(config.channels.telegram?.webhook?.listen, '127.0.0.1:8443');
      assert.deepEqual(config.channels.discord?.allow, ['80351110224678912']);
      assert.equal(config.channels.slack?.listen, '127.0.0.1:3000');
      assert.deepEqual(config.channels.matrix?.rooms, ['#general:example.org']);
      assert.equal(config.channels.irc?.sasl?.user, 'switchboard');
      assert.equal(config.channels.email?.imap.port, 993);
      assert.equal(config.channels.webhook?.reply_timeout_seconds, 120);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
