/**
 * What one shell command may write (issue 23, point 5): `tar -chf all.tar .` over a link loop
 * wrote 913 MB in seconds. Link-following flags are refused by the guard; every command runs
 * under RLIMIT_FSIZE ([security] max_write_mb), so no file it writes grows past it; and the
 * workspace's free space is watched, so many files together do not either.
 */
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readdir, realpath, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { testLogger } from '../../test/support/log.ts';
import { createSecurityPolicy } from '../security/policy.ts';
import type { ToolContext, ToolResult } from '../tool.ts';
import { error, text } from '../../test/support/results.ts';
import { createShellTool } from './shell.ts';

describe('shell tool: bytes one command may write', () => {
  let base: string;
  let ws: string;
  before(async () => {
    base = await realpath(await mkdtemp(join(tmpdir(), 'sb-shell-limits-')));
    ws = join(base, 'ws');
    await mkdir(join(ws, 'loop'), { recursive: true });
    await writeFile(join(ws, 'big.bin'), Buffer.alloc(1024 * 1024, 7));
    await writeFile(join(ws, 'small.txt'), 'small\n');
    await symlink('..', join(ws, 'loop', 'up'));
  });
  after(() => rm(base, { recursive: true, force: true }));

  const ctx = (): ToolContext => ({ conversation: 'c', channel: 'test', senderId: 'u', workspace: ws, signal: new AbortController().signal, log: testLogger() });
  // 256 KiB: small enough to cross quickly, large enough for the programs' own buffers.
  const run = (command: string, maxWriteBytes = 256 * 1024): Promise<ToolResult> =>
    createShellTool(createSecurityPolicy({ workspace: ws, autonomy: 'full', maxWriteBytes, commandTimeoutMs: 30_000 })).execute({ command }, ctx());

  it('stops a command that writes a file past the cap, and tells the model why', async () => {
    assert.match(error(await run('cp big.bin copy.bin')), /a file larger than 256 KB.*\[security\] max_write_mb/s);
    assert.ok((await stat(join(ws, 'copy.bin'))).size <= 256 * 1024, 'the copy stopped at the cap');
  });

  it('an archive over the workspace stops at the cap too', async () => {
    assert.match(error(await run('tar -cf all.tar big.bin small.txt')), /larger than 256 KB/);
    assert.ok((await stat(join(ws, 'all.tar'))).size <= 256 * 1024);
  });

  it('stops a command whose files, each under the cap, together pass it', async () => {
    // 1 MiB files, one every 20 ms, forever: only the sum can stop it (the cap is 8 MB; other
    // writers on this filesystem count too, so the bound asserted is loose).
    const forever = "node -e 'const fs = require(\"fs\"); let i = 0; setInterval(() => fs.writeFileSync(\"bulk-\" + i++ + \".bin\", Buffer.alloc(1 << 20, 1)), 20)'";
    const began = performance.now();
    assert.match(error(await run(forever, 8 * 1024 * 1024)), /was stopped: it wrote more than 8 MB in the workspace .*\[security\] max_write_mb/s);
    assert.ok(performance.now() - began < 15_000, 'stopped well before the time limit');
    const bulk = (await readdir(ws)).filter((name) => name.startsWith('bulk-'));
    assert.ok(bulk.length >= 8 && bulk.length < 40, `${bulk.length} files written`);
  });

  it('refuses to follow the link loop at all (tar -chf, cp -rL)', async () => {
    for (const command of ['tar -chf loop.tar loop', 'cp -rL loop out']) {
      assert.match(error(await run(command)), /Command refused: .*follows symbolic links/, command);
    }
  });

  it('runs commands under the cap as before', async () => {
    assert.equal(text(await run('cp small.txt small-copy.txt && cat small-copy.txt')), 'exit code 0\nsmall');
  });
});
