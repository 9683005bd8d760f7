import assert from 'node:assert/strict';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { switchboardCommand } from './invocation.ts';

/** A package root with its launcher, in a fresh temp dir. */
function install(t: { after(fn: () => void): void }, under: string): { base: string; root: string } {
  const base = mkdtempSync(join(tmpdir(), 'invocation-'));
  t.after(() => rmSync(base, { recursive: true, force: true }));
  const root = join(base, under);
  mkdirSync(join(root, 'bin'), { recursive: true });
  writeFileSync(join(root, 'bin/switchboard'), '#!/bin/sh\n');
  chmodSync(join(root, 'bin/switchboard'), 0o755);
  return { base, root };
}

test('a checkout: npx switchboard inside it, the launcher path outside it (switchboard is not in PATH)', (t) => {
  const { base, root } = install(t, 'switchboard');
  mkdirSync(join(root, 'src'));
  const env = { PATH: '/usr/bin:/bin' };
  assert.equal(switchboardCommand({ env, cwd: root, installRoot: root }), 'npx switchboard');
  assert.equal(switchboardCommand({ env, cwd: join(root, 'src'), installRoot: root }), 'npx switchboard');
  assert.equal(switchboardCommand({ env, cwd: base, installRoot: root }), join(root, 'bin/switchboard'));
});

test('a global install (npm install -g links the launcher into PATH): switchboard, wherever you are', (t) => {
  const { base, root } = install(t, 'lib/node_modules/switchboard');
  mkdirSync(join(base, 'bin'));
  symlinkSync(join(root, 'bin/switchboard'), join(base, 'bin/switchboard'));
  const env = { PATH: `/usr/bin:${join(base, 'bin')}` };
  assert.equal(switchboardCommand({ env, cwd: tmpdir(), installRoot: root }), 'switchboard');
  // Another switchboard in PATH is not this one.
  const { base: other } = install(t, 'x');
  assert.equal(switchboardCommand({ env: { PATH: join(other, 'x/bin') }, cwd: tmpdir(), installRoot: root }), join(root, 'bin/switchboard'));
});

test('a dependency of a project: npx switchboard in that project', (t) => {
  const { base, root } = install(t, 'project/node_modules/switchboard');
  assert.equal(switchboardCommand({ env: {}, cwd: join(base, 'project'), installRoot: root }), 'npx switchboard');
});
