/**
 * The daemon says when it is up even while a channel keeps failing: `ready` at warn, naming
 * the channel that is not running — here an IRC server that refuses connections.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { freePort } from './support/net.ts';
import { startDaemon, tempConfig } from './support/cli.ts';


describe('the ready line', () => {
  it('is logged while a channel keeps failing, naming it', async () => {
    const port = await freePort();
    const { file, cleanup } = tempConfig('http://127.0.0.1:9/v1', `[log]\nformat = "json"\n[channels.irc]\nhost = "127.0.0.1"\nport = ${port}\ntls = false\nnick = "readybot"\n`);
    const daemon = startDaemon(['start', '--config', file], { env: { TEST_MODEL_KEY: 'k' } });
    try {
      await daemon.waitFor(/"msg":"ready"/, 'stdout', 20_000);
      const line = JSON.parse(daemon.stdout().split('\n').find((l) => l.includes('"msg":"ready"'))!) as { level: number; channels: string[]; notRunning: Array<{ name: string; state: string; lastError?: string }> };
      assert.equal(line.level, 40, 'warn: not everything is running');
      assert.deepEqual(line.channels, ['irc']);
      assert.equal(line.notRunning.length, 1);
      assert.equal(line.notRunning[0]!.name, 'irc');
      assert.equal(line.notRunning[0]!.state, 'backoff');
      assert.match(line.notRunning[0]!.lastError ?? '', /ECONNREFUSED/);
      daemon.child.kill('SIGTERM');
      assert.equal((await daemon.exited).code, 0);
    } finally {
      if (daemon.child.exitCode === null && daemon.child.signalCode === null) daemon.child.kill('SIGKILL');
      cleanup();
    }
  });
});
