import assert from 'node:assert/strict';
import { mkdir, mkdtemp, realpath, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { testLogger } from '../../test/support/log.ts';
import { error, text } from '../../test/support/results.ts';
import { createSecurityPolicy, type SecurityPolicyOptions } from '../security/policy.ts';
import type { ToolContext } from '../tool.ts';
import { createGlobTool, createGrepTool } from './search.ts';

describe('search tools', () => {
  let base: string;
  let ws: string;
  before(async () => {
    base = await realpath(await mkdtemp(join(tmpdir(), 'sb-search-')));
    ws = join(base, 'ws');
    await mkdir(join(ws, 'src', 'deep'), { recursive: true });
    await mkdir(join(ws, 'node_modules', 'pkg'), { recursive: true });
    await mkdir(join(ws, 'outdir'), { recursive: true });
    await writeFile(join(ws, 'src', 'a.ts'), 'const a = 1; // TODO tidy\nexport default a;\n');
    await writeFile(join(ws, 'src', 'deep', 'b.ts'), 'todo: lowercase\n');
    await writeFile(join(ws, 'README.md'), '# TODO list\n');
    await writeFile(join(ws, 'node_modules', 'pkg', 'index.ts'), '// TODO vendored\n');
    await writeFile(join(ws, 'image.bin'), Buffer.from('TODO\0binary'));
    await writeFile(join(base, 'secret.txt'), 'TODO secret outside\n');
    await symlink('/etc', join(ws, 'etc-link'));
    await symlink(join(base, 'secret.txt'), join(ws, 'secret-link.ts'));
    await symlink('src/a.ts', join(ws, 'inside-link.ts'));
  });
  after(() => rm(base, { recursive: true, force: true }));

  const ctx = (signal = new AbortController().signal): ToolContext => ({ conversation: 'c', channel: 'test', senderId: 'u', workspace: ws, signal, log: testLogger() });
  const policy = (options: Partial<SecurityPolicyOptions> = {}) => createSecurityPolicy({ workspace: ws, ...options });

  describe('glob', () => {
    it('lists matches sorted, skipping node_modules unless named', async () => {
      const glob = createGlobTool(policy());
      assert.equal(text(await glob.execute({ pattern: 'src/**/*.ts' }, ctx())), 'src/a.ts\nsrc/deep/b.ts');
      assert.equal(text(await glob.execute({ pattern: 'node_modules/**/*.ts' }, ctx())), 'node_modules/pkg/index.ts');
      assert.equal(text(await glob.execute({ pattern: '*.py' }, ctx())), 'No files match *.py.');
    });

    it('leaves out names that lead outside through symlinks', async () => {
      const out = text(await createGlobTool(policy()).execute({ pattern: 'etc-link/*' }, ctx()));
      assert.match(out, /^No files match etc-link\/\*\.\n\[\d+ names left out: they lead outside the workspace through symbolic links\]$/);
      const top = text(await createGlobTool(policy()).execute({ pattern: '*.ts' }, ctx()));
      assert.equal(top.split('\n')[0], 'inside-link.ts');
      assert.doesNotMatch(top, /secret-link/);
    });

    it('refuses absolute, parent and home patterns', async () => {
      const glob = createGlobTool(policy());
      assert.match(error(await glob.execute({ pattern: '/etc/*' }, ctx())), /relative to the workspace/);
      assert.match(error(await glob.execute({ pattern: '../*' }, ctx())), /may not contain "\.\."/);
      assert.match(error(await glob.execute({ pattern: 'src/../../*' }, ctx())), /may not contain "\.\."/);
      assert.match(error(await glob.execute({ pattern: '~/*' }, ctx())), /"~" is outside/);
    });
  });

  describe('grep', () => {
    it('finds matches as path:line: text, skipping binaries, node_modules and links outside', async () => {
      const out = text(await createGrepTool(policy()).execute({ pattern: 'TODO' }, ctx()));
      assert.equal(out, 'README.md:1: # TODO list\ninside-link.ts:1: const a = 1; // TODO tidy\nsrc/a.ts:1: const a = 1; // TODO tidy');
    });

    it('supports ignore_case, path and glob', async () => {
      const grep = createGrepTool(policy());
      assert.equal(text(await grep.execute({ pattern: 'todo', ignore_case: true, path: 'src', glob: '*.ts' }, ctx())), 'src/a.ts:1: const a = 1; // TODO tidy\nsrc/deep/b.ts:1: todo: lowercase');
      assert.equal(text(await grep.execute({ pattern: 'export', path: 'src/a.ts' }, ctx())), 'src/a.ts:2: export default a;');
      assert.match(text(await grep.execute({ pattern: 'nothing-here' }, ctx())), /^No matches/);
    });

    it('caps the number of matches', async () => {
      await writeFile(join(ws, 'many.txt'), 'hit\n'.repeat(500));
      const out = text(await createGrepTool(policy()).execute({ pattern: '^hit$', path: 'many.txt' }, ctx()));
      assert.equal(out.split('\n').length, 201);
      assert.match(out, /\[stopped at 200 matches/);
    });

    it('refuses invalid patterns and paths outside', async () => {
      const grep = createGrepTool(policy());
      assert.match(error(await grep.execute({ pattern: '(unclosed' }, ctx())), /not a valid JavaScript regular expression/);
      assert.match(error(await grep.execute({ pattern: 'root', path: '../' }, ctx())), /escapes the workspace/);
      assert.match(error(await grep.execute({ pattern: 'root', path: 'etc-link' }, ctx())), /symbolic link/);
      assert.match(error(await grep.execute({ pattern: 'root', path: '/etc' }, ctx())), /outside the workspace/);
      assert.match(error(await grep.execute({ pattern: 'x', glob: '../**' }, ctx())), /glob may not contain/);
    });

    it('stops a catastrophic regular expression without blocking the daemon', async () => {
      await writeFile(join(ws, 'redos.txt'), `${'a'.repeat(40)}!\n`);
      let ticks = 0;
      const interval = setInterval(() => ticks++, 20);
      const message = error(await createGrepTool(policy({ commandTimeoutMs: 500 })).execute({ pattern: '^(a+)+$', path: 'redos.txt' }, ctx()));
      clearInterval(interval);
      assert.match(message, /longer than 0.5 s and was stopped.*nested quantifiers/);
      assert.ok(ticks >= 10, `event loop kept running (${ticks} ticks)`);
    });
  });
});
