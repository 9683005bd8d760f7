/** `switchboard reload` without a running daemon: what it says about an invalid file, and about no daemon. */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { runCli, tempConfig } from './support/cli.ts';

describe('switchboard reload (CLI side)', () => {
  it('an invalid file: exit 78 with the problems, saying the running daemon keeps its config — not "Nothing was started"', async () => {
    const { file, cleanup } = tempConfig('http://127.0.0.1:9/v1');
    try {
      writeFileSync(file, '[provider]\nkind = "openai"\nmodel = "m"\n[agent]\nhistory_turns = "lots"\n[channels.terminal]\n');
      const result = await runCli(['reload', '--config', file]);
      assert.equal(result.code, 78, result.stderr);
      assert.match(result.stderr, /agent\.history_turns: must be a whole number/);
      assert.match(result.stderr, /The running daemon was not asked and keeps the config it had\. Fix the file, then run `switchboard reload` again\.\n$/);
      assert.doesNotMatch(result.stderr, /Nothing was started|start again/);
    } finally {
      cleanup();
    }
  });

  it('a valid file but no daemon: exit 1, naming the pid file it looked at', async () => {
    const { file, cleanup } = tempConfig('http://127.0.0.1:9/v1');
    try {
      const result = await runCli(['reload', '--config', file]);
      assert.equal(result.code, 1, result.stderr);
      assert.match(result.stderr, /no running daemon found for .*switchboard\.pid: ENOENT\)\. Is it running\?/);
    } finally {
      cleanup();
    }
  });
});
