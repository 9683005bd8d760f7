import assert from 'node:assert/strict';
import { mkdir, mkdtemp, realpath, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { testLogger } from '../../test/support/log.ts';
import { error, text } from '../../test/support/results.ts';
import { createSecurityPolicy, type SecurityPolicyOptions } from '../security/policy.ts';
import type { ToolContext } from '../tool.ts';
import { createShellTool } from './shell.ts';

describe('shell tool', () => {
  let base: string;
  let ws: string;
  before(async () => {
    base = await realpath(await mkdtemp(join(tmpdir(), 'sb-shell-')));
    ws = join(base, 'ws');
    await mkdir(join(ws, 'sub'), { recursive: true });
    await writeFile(join(ws, 'notes.md'), 'one\ntwo\nthree\n');
    await symlink('/etc', join(ws, 'etc-link'));
    await symlink('/etc', join(ws, 'sub', 'deep-link'));
  });
  after(() => rm(base, { recursive: true, force: true }));

  const ctx = (signal = new AbortController().signal): ToolContext => ({ conversation: 'c', channel: 'test', senderId: 'u', workspace: ws, signal, log: testLogger() });
  const shell = (options: Partial<SecurityPolicyOptions> = {}) => createShellTool(createSecurityPolicy({ workspace: ws, autonomy: 'full', ...options }));

  it('runs allowed commands in the workspace and reports the exit code', async () => {
    assert.equal(text(await shell().execute({ command: 'echo hello && pwd' }, ctx())), `exit code 0\nhello\n${ws}`);
    assert.equal(text(await shell().execute({ command: 'cat notes.md | grep -n t | sort -r' }, ctx())), 'exit code 0\n3:three\n2:two');
    assert.equal(text(await shell().execute({ command: 'cd sub && pwd' }, ctx())), `exit code 0\n${join(ws, 'sub')}`);
  });

  it('returns a non-zero exit as an ok result the model can read, with stderr', async () => {
    const out = text(await shell().execute({ command: 'ls missing-file 2>&1' }, ctx()));
    assert.match(out, /^exit code 2\n.*missing-file/s);
  });

  it('closes stdin, so a program waiting for input ends at once', async () => {
    assert.equal(text(await shell().execute({ command: 'cat' }, ctx())), 'exit code 0\n(no output)');
  });

  it('stops a command at the time limit and kills the whole pipeline', async () => {
    const started = Date.now();
    const message = error(await shell().execute({ command: 'tail -f notes.md | cat', timeout_seconds: 0.5 }, ctx()));
    assert.match(message, /stopped after 0.5 s \(time limit\)\. Output so far:\none\ntwo\nthree/);
    assert.ok(Date.now() - started < 5000);
  });

  it('never waits longer than the configured limit, whatever the model asks', async () => {
    const message = error(await shell({ commandTimeoutMs: 300 }).execute({ command: 'tail -f notes.md', timeout_seconds: 3600 }, ctx()));
    assert.match(message, /stopped after 0.3 s/);
  });

  it('stops the command when the turn is aborted', async () => {
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 200);
    assert.match(error(await shell().execute({ command: 'tail -f notes.md' }, ctx(controller.signal))), /cancelled/);
  });

  it('caps the output, keeping its start and end', async () => {
    const out = text(await shell({ maxOutputBytes: 1024 }).execute({ command: 'seq 1 100000' }, ctx()));
    assert.match(out, /^exit code 0\n1\n2\n3\n/);
    assert.match(out, /output truncated: \d+ bytes omitted \(limit 1024 bytes\)/);
    assert.match(out, /\n100000$/);
    assert.ok(out.length < 1300);
  });

  it('gives commands a clean environment with HOME set to the workspace', async () => {
    process.env.SB_SHELL_TEST_TOKEN = 'tok-shell-test-123';
    process.env.SB_SHELL_PLAIN = 'plain-value';
    try {
      const out = text(await shell({ extraAllowedCommands: ['printenv'], envPassthrough: ['SB_SHELL_PLAIN'] }).execute({ command: 'printenv' }, ctx()));
      assert.match(out, new RegExp(`HOME=${ws}`));
      assert.match(out, /SB_SHELL_PLAIN=plain-value/);
      assert.doesNotMatch(out, /tok-shell-test-123|SB_SHELL_TEST_TOKEN/);
    } finally {
      delete process.env.SB_SHELL_TEST_TOKEN;
      delete process.env.SB_SHELL_PLAIN;
    }
  });

  it('checks arguments against symlinks, wildcards and earlier cd', async () => {
    assert.match(error(await shell().execute({ command: 'cat etc-link/hostname' }, ctx())), /argument etc-link\/hostname.*symbolic link/);
    assert.match(error(await shell().execute({ command: 'cat e*/hostname' }, ctx())), /e\*\/hostname \(matching etc-link\).*symbolic link/);
    assert.match(error(await shell().execute({ command: 'cd sub && cat deep-link/hostname' }, ctx())), /deep-link\/hostname.*symbolic link/);
    assert.match(error(await shell().execute({ command: 'cd s* && ls' }, ctx())), /exact directory name/);
  });

  it('assesses by the command policy; a refused command is high risk and never runs', async () => {
    const tool = shell();
    assert.deepEqual(tool.assess!({ command: 'ls -la' }, ctx()), { risk: 'low', mutates: false, summary: 'shell: ls -la' });
    assert.deepEqual(tool.assess!({ command: 'git pull' }, ctx()), { risk: 'medium', mutates: true, summary: 'shell: git pull' });
    const refused = tool.assess!({ command: 'sudo ls' }, ctx());
    assert.equal(refused.risk, 'high');
    assert.match(refused.summary, /^shell: sudo ls \(refused: "sudo" is never allowed/);
    assert.match(error(await tool.execute({ command: 'sudo ls' }, ctx())), /^Command refused: "sudo" is never allowed/);
  });

  it('enforces a deny from the autonomy level itself', async () => {
    const readOnly = shell({ autonomy: 'read_only' });
    assert.match(error(await readOnly.execute({ command: 'mkdir made-here' }, ctx())), /read-only.*autonomy = "supervised"/);
    await assert.rejects(stat(join(ws, 'made-here')));
    assert.match(text(await readOnly.execute({ command: 'ls' }, ctx())), /notes\.md/);
    assert.match(error(await shell({ autonomy: 'supervised' }).execute({ command: 'rm notes.md' }, ctx())), /high risk.*autonomy = "full"/);
    await stat(join(ws, 'notes.md'));
  });
});
