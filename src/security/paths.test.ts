import assert from 'node:assert/strict';
import { mkdir, mkdtemp, realpath, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { isInside, resolveInWorkspace, systemLocation } from './paths.ts';

describe('resolveInWorkspace', () => {
  let base: string;
  let ws: string;
  before(async () => {
    base = await realpath(await mkdtemp(join(tmpdir(), 'sb-paths-')));
    ws = join(base, 'ws');
    await mkdir(join(ws, 'notes'), { recursive: true });
    await writeFile(join(ws, 'notes', 'todo.md'), 'x');
    await writeFile(join(base, 'outside.txt'), 'secret');
    await symlink('/etc', join(ws, 'etc-link'));
    await symlink(join(base, 'outside.txt'), join(ws, 'out-file'));
    await symlink(join(base, 'nowhere', 'new.txt'), join(ws, 'dangling-out'));
    await symlink('notes/todo.md', join(ws, 'todo-link'));
    await symlink('loop-b', join(ws, 'loop-a'));
    await symlink('loop-a', join(ws, 'loop-b'));
  });
  after(() => rm(base, { recursive: true, force: true }));

  const accepts = async (input: string, expected: string): Promise<void> => {
    const result = await resolveInWorkspace(ws, input);
    assert.deepEqual(result, { ok: true, path: join(ws, expected) }, input);
  };
  const refuses = async (input: string, message: RegExp): Promise<void> => {
    const result = await resolveInWorkspace(ws, input);
    assert.equal(result.ok, false, `${input} should be refused`);
    if (!result.ok) assert.match(result.error, message, input);
  };

  it('resolves relative, absolute-inside and not-yet-existing paths', async () => {
    await accepts('notes/todo.md', 'notes/todo.md');
    await accepts('./notes/../notes/todo.md', 'notes/todo.md');
    await accepts(join(ws, 'notes/todo.md'), 'notes/todo.md');
    await accepts('new/dir/file.txt', 'new/dir/file.txt');
    await accepts('.', '');
  });

  it('follows symlinks that stay inside and returns the real path', async () => {
    await accepts('todo-link', 'notes/todo.md');
  });

  it('refuses escapes with a sentence that names the fix', async () => {
    await refuses('../outside.txt', /escapes the workspace; use a path relative to the workspace, e.g. notes\/todo.md/);
    await refuses('notes/../../outside.txt', /escapes the workspace/);
    await refuses('/etc/passwd', /absolute path \/etc\/passwd is outside the workspace/);
    await refuses(join(base, 'outside.txt'), /outside the workspace/);
  });

  it('refuses symlinks that lead outside, also for files that do not exist yet', async () => {
    await refuses('etc-link/passwd', /through a symbolic link/);
    await refuses('etc-link/new-file', /through a symbolic link/);
    await refuses('out-file', /through a symbolic link/);
    await refuses('dangling-out', /through a symbolic link/);
    await refuses('loop-a', /loop of symbolic links/);
  });

  it('refuses encoded, NUL, ~ and empty paths', async () => {
    await refuses('%2e%2e%2fetc', /percent-encoded/);
    await refuses('notes%2Ftodo.md', /percent-encoded/);
    await refuses('..%5c..%5cetc', /percent-encoded/);
    await refuses('notes/todo.md\0.png', /NUL byte/);
    await refuses('~/.ssh/id_rsa', /home directory/);
    await refuses('', /empty/);
  });

  it('refuses system locations even when the workspace would contain them', async () => {
    const result = await resolveInWorkspace('/', 'etc/passwd');
    assert.equal(result.ok, false);
    if (!result.ok) assert.match(result.error, /\/etc is a system location/);
    const proc = await resolveInWorkspace('/', '/proc/self/environ');
    assert.equal(proc.ok, false);
  });

  it('refuses /proc/self/cwd even though it points back into the workspace', async () => {
    await refuses('/proc/self/cwd/notes/todo.md', /outside the workspace/);
  });

  it('reports a missing workspace', async () => {
    const result = await resolveInWorkspace(join(base, 'missing'), 'x');
    assert.equal(result.ok, false);
    if (!result.ok) assert.match(result.error, /workspace .* does not exist/);
  });
});

describe('isInside / systemLocation', () => {
  it('compares whole path components', () => {
    assert.equal(isInside('/srv/ws', '/srv/ws'), true);
    assert.equal(isInside('/srv/ws', '/srv/ws/a'), true);
    assert.equal(isInside('/srv/ws', '/srv/ws2'), false);
    assert.equal(isInside('/srv/ws', '/srv'), false);
  });

  it('lets a workspace live under /root but never under /proc', () => {
    assert.equal(systemLocation('/root/ws/file', '/root/ws'), undefined);
    assert.equal(systemLocation('/root/.ssh/id_rsa', '/srv/ws'), '/root');
    assert.equal(systemLocation('/proc/1/environ', '/proc'), '/proc');
    assert.equal(systemLocation('/etcetera/x', '/'), undefined);
  });
});
