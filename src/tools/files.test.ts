import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readFile, realpath, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { testLogger } from '../../test/support/log.ts';
import { error, text } from '../../test/support/results.ts';
import { createSecurityPolicy, type SecurityPolicyOptions } from '../security/policy.ts';
import type { ToolContext } from '../tool.ts';
import { createFileEditTool, createFileReadTool, createFileWriteTool } from './files.ts';

describe('file tools', () => {
  let base: string;
  let ws: string;
  before(async () => {
    base = await realpath(await mkdtemp(join(tmpdir(), 'sb-files-')));
    ws = join(base, 'ws');
    await mkdir(ws);
    await writeFile(join(ws, 'poem.txt'), 'roses\nviolets\nsugar\n');
    await writeFile(join(ws, 'blob.bin'), Buffer.from([1, 2, 0, 3]));
    await writeFile(join(base, 'outside.txt'), 'outside');
    await symlink(join(base, 'outside.txt'), join(ws, 'out-link'));
  });
  after(() => rm(base, { recursive: true, force: true }));

  const ctx: ToolContext = { conversation: 'c', channel: 'test', senderId: 'u', workspace: '', signal: new AbortController().signal, log: testLogger() };
  const policy = (options: Partial<SecurityPolicyOptions> = {}) => createSecurityPolicy({ workspace: ws, autonomy: 'supervised', ...options });

  describe('file_read', () => {
    it('returns numbered lines, with offset and limit', async () => {
      const read = createFileReadTool(policy());
      assert.equal(text(await read.execute({ path: 'poem.txt' }, ctx)), '1\troses\n2\tviolets\n3\tsugar');
      assert.equal(text(await read.execute({ path: 'poem.txt', offset: 2, limit: 1 }, ctx)), '2\tviolets\n[showing lines 2–2 of 3; call file_read with offset=3 to read on]');
      assert.match(error(await read.execute({ path: 'poem.txt', offset: 9 }, ctx)), /has 3 lines/);
    });

    it('caps the output at maxOutputBytes and says where to continue', async () => {
      await writeFile(join(ws, 'long.txt'), Array.from({ length: 1000 }, (_, i) => `line ${i + 1}`).join('\n'));
      const out = text(await createFileReadTool(policy({ maxOutputBytes: 200 })).execute({ path: 'long.txt' }, ctx));
      assert.ok(Buffer.byteLength(out) < 300);
      assert.match(out, /\[showing lines 1–\d+ of 1000; call file_read with offset=\d+ to read on\]$/);
    });

    it('explains missing files, folders and binaries', async () => {
      const read = createFileReadTool(policy());
      assert.match(error(await read.execute({ path: 'nope.md' }, ctx)), /nope.md does not exist; use glob/);
      assert.match(error(await read.execute({ path: '.' }, ctx)), /is a folder/);
      assert.match(error(await read.execute({ path: 'blob.bin' }, ctx)), /binary/);
      assert.match(error(await read.execute({ path: 'out-link' }, ctx)), /symbolic link/);
    });
  });

  describe('file_write', () => {
    it('creates parent folders and round-trips with file_read', async () => {
      const write = createFileWriteTool(policy());
      assert.equal(text(await write.execute({ path: 'a/b/c.md', content: 'hello\nworld\n' }, ctx)), 'Wrote 12 bytes (3 lines) to a/b/c.md.');
      assert.equal(await readFile(join(ws, 'a/b/c.md'), 'utf8'), 'hello\nworld\n');
      assert.equal(text(await createFileReadTool(policy()).execute({ path: 'a/b/c.md' }, ctx)), '1\thello\n2\tworld');
    });

    it('is low risk but mutating, and refused in read-only autonomy', async () => {
      const write = createFileWriteTool(policy({ autonomy: 'read_only' }));
      assert.deepEqual(write.assess!({ path: 'x.md', content: '' }, ctx), { risk: 'low', mutates: true, summary: 'file_write: x.md' });
      assert.match(error(await write.execute({ path: 'x.md', content: 'x' }, ctx)), /read-only/);
      await assert.rejects(readFile(join(ws, 'x.md')));
    });

    it('does not write through a symlink to outside', async () => {
      assert.match(error(await createFileWriteTool(policy()).execute({ path: 'out-link', content: 'pwned' }, ctx)), /symbolic link/);
      assert.equal(await readFile(join(base, 'outside.txt'), 'utf8'), 'outside');
    });
  });

  describe('file_edit', () => {
    it('replaces a unique exact string, literally', async () => {
      const edit = createFileEditTool(policy());
      await writeFile(join(ws, 'e.txt'), 'alpha\nbeta\ngamma\n');
      assert.equal(text(await edit.execute({ path: 'e.txt', old_string: 'beta', new_string: 'BETA $& $1' }, ctx)), 'Edited e.txt: replaced 1 occurrence (first at line 2).');
      assert.equal(await readFile(join(ws, 'e.txt'), 'utf8'), 'alpha\nBETA $& $1\ngamma\n');
    });

    it('refuses a missing or ambiguous old_string, unless replace_all', async () => {
      const edit = createFileEditTool(policy());
      await writeFile(join(ws, 'r.txt'), 'x y x y x');
      assert.match(error(await edit.execute({ path: 'r.txt', old_string: 'z', new_string: 'q' }, ctx)), /old_string was not found in r.txt; read the file/);
      assert.match(error(await edit.execute({ path: 'r.txt', old_string: 'x', new_string: 'q' }, ctx)), /occurs 3 times in r.txt.*replace_all/);
      assert.match(error(await edit.execute({ path: 'r.txt', old_string: '', new_string: 'q' }, ctx)), /must not be empty/);
      assert.match(error(await edit.execute({ path: 'r.txt', old_string: 'x', new_string: 'x' }, ctx)), /the same/);
      assert.equal(text(await edit.execute({ path: 'r.txt', old_string: 'x', new_string: 'q', replace_all: true }, ctx)), 'Edited r.txt: replaced 3 occurrences (first at line 1).');
      assert.equal(await readFile(join(ws, 'r.txt'), 'utf8'), 'q y q y q');
    });

    it('refuses paths outside the workspace', async () => {
      assert.match(error(await createFileEditTool(policy()).execute({ path: '../outside.txt', old_string: 'outside', new_string: 'x' }, ctx)), /escapes the workspace/);
      assert.equal(await readFile(join(base, 'outside.txt'), 'utf8'), 'outside');
    });
  });
});
