import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { hiddenByUnit, readTemplate, readyProbe, renderUnit, runServiceCommand, type SystemctlRunner } from './service.ts';

const SYSTEMD_ANALYZE = '/usr/bin/systemd-analyze';
const cliPath = fileURLToPath(new URL('../dist/app/cli.js', import.meta.url));
let dir: string;
let configPath: string;

/**
 * An install the unit can see, as `install` would find it from its own files. Only written into
 * the unit, never run: this checkout itself may be under /tmp or /home (CI clones anywhere),
 * which the unit hides and `install` rightly refuses.
 */
const installed = { cliPath: '/opt/switchboard/dist/app/cli.js', nodePath: '/opt/switchboard/node_modules/.bin/node' };

/** A directory for the test's config the unit can see: the checkout's test/artifacts, or /dev/shm when the checkout is where the unit cannot look. */
function visibleScratch(): string {
  const artifacts = fileURLToPath(new URL('../test/artifacts/', import.meta.url));
  mkdirSync(artifacts, { recursive: true });
  const probe = { ...installed, configPath: join(artifacts, 'config.toml'), dataDir: '/var/lib/switchboard', user: false, installDir: '/opt/switchboard' };
  return hiddenByUnit(readTemplate(), probe).length === 0 ? artifacts : '/dev/shm';
}

before(() => {
  // Not under /tmp: the unit's PrivateTmp=true would hide it, and install refuses that.
  dir = mkdtempSync(join(visibleScratch(), 'service-'));
  configPath = join(dir, 'etc', 'config.toml');
  mkdirSync(join(dir, 'etc'));
  writeFileSync(configPath, `data_dir = "/var/lib/switchboard"\n[provider]\nkind = "openai"\nmodel = "m"\napi_key = "\${NOT_SET_HERE}"\n[channels.terminal]\n`);
});

after(() => rmSync(dir, { recursive: true, force: true }));

/** Runs the command against a temp root with a systemctl that records its calls. */
async function service(args: readonly string[], options: { root: string; home?: string; config?: string; failOn?: string } = { root: dir }) {
  const calls: string[][] = [];
  const systemctl: SystemctlRunner = async (callArgs) => {
    calls.push([...callArgs]);
    return options.failOn && callArgs.includes(options.failOn) ? { code: 1, output: 'Failed to enable unit: Access denied' } : { code: 0, output: '' };
  };
  let out = '';
  let err = '';
  const sink = (append: (text: string) => void) => new Writable({ write: (chunk: Buffer, _encoding, done) => (append(chunk.toString('utf8')), done()) });
  const code = await runServiceCommand(args, {
    stdout: sink((text) => (out += text)),
    stderr: sink((text) => (err += text)),
    env: {},
    configFlag: options.config ?? configPath,
    root: options.root,
    home: options.home ?? join(options.root, 'home'),
    systemctl,
    ...installed,
  });
  return { code, out, err, calls };
}

test('install writes the unit with this install\'s paths, reloads, enables, and says how to follow the logs', async () => {
  const root = join(dir, 'root1');
  const { code, out, err, calls } = await service(['install'], { root });
  assert.equal(code, 0, err);
  const unitPath = join(root, 'etc/systemd/system/switchboard.service');
  const unit = readFileSync(unitPath, 'utf8');
  assert.ok(unit.includes(`\nExecStart=${installed.nodePath} ${installed.cliPath} start --config ${configPath}\n`), unit);
  assert.match(unit, /^DynamicUser=yes$/m);
  assert.match(unit, /^StateDirectory=switchboard$/m);
  assert.match(unit, /^RestartPreventExitStatus=78 73$/m);
  assert.doesNotMatch(unit, /^ReadWritePaths=/m, 'data_dir is the StateDirectory: nothing else is writable');
  assert.doesNotMatch(unit, /^ExecStartPost=/m, 'no [gateway] in this config: no readiness probe');
  assert.equal(statSync(unitPath).mode & 0o777, 0o644);
  assert.deepEqual(calls, [['daemon-reload'], ['enable', '--now', 'switchboard.service']]);
  assert.match(out, /journalctl -u switchboard -f/);
});

test('install never overwrites a different unit without a .bak; an identical one needs none', async () => {
  const root = join(dir, 'root2');
  const unitPath = join(root, 'etc/systemd/system/switchboard.service');
  mkdirSync(join(root, 'etc/systemd/system'), { recursive: true });
  writeFileSync(unitPath, '[Service]\nExecStart=/old/node old.js\n');
  const first = await service(['install'], { root });
  assert.equal(first.code, 0, first.err);
  assert.equal(readFileSync(`${unitPath}.bak`, 'utf8'), '[Service]\nExecStart=/old/node old.js\n');
  assert.match(first.out, /saved the previous unit as .*switchboard\.service\.bak/);

  writeFileSync(unitPath, '[Service]\nExecStart=/hand/edited\n');
  await service(['install'], { root });
  assert.equal(readFileSync(`${unitPath}.bak`, 'utf8'), '[Service]\nExecStart=/old/node old.js\n', 'the first backup is kept');
  assert.equal(readFileSync(`${unitPath}.bak.1`, 'utf8'), '[Service]\nExecStart=/hand/edited\n');

  const again = await service(['install'], { root });
  assert.doesNotMatch(again.out, /saved the previous unit/);
  assert.equal(existsSync(`${unitPath}.bak.2`), false);
});

test('install --user: the user unit, systemctl --user, a private data_dir', async () => {
  const root = join(dir, 'root3');
  const home = join(root, 'home', 'alice');
  const userConfig = join(home, '.config/switchboard/config.toml');
  mkdirSync(join(home, '.config/switchboard'), { recursive: true });
  writeFileSync(userConfig, `data_dir = "./data"\n[provider]\nkind = "openai"\nmodel = "m"\n`);
  const { code, out, calls } = await service(['install', '--user'], { root, home, config: userConfig });
  assert.equal(code, 0);
  const unit = readFileSync(join(home, '.config/systemd/user/switchboard.service'), 'utf8');
  assert.doesNotMatch(unit, /^(User|Group|DynamicUser|StateDirectory)=/m);
  assert.match(unit, /^WantedBy=default\.target$/m);
  assert.ok(unit.includes(`\nReadWritePaths=-${join(home, '.config/switchboard/data')}\n`), unit);
  assert.match(unit, /^ProtectHome=read-only$/m);
  assert.equal(statSync(join(home, '.config/switchboard/data')).mode & 0o777, 0o700);
  assert.deepEqual(calls, [['--user', 'daemon-reload'], ['--user', 'enable', '--now', 'switchboard.service']]);
  assert.match(out, /journalctl --user -u switchboard -f/);
});

test('a failing systemctl is reported with exit 1; uninstall disables, removes, reloads', async () => {
  const root = join(dir, 'root4');
  const failed = await service(['install'], { root, failOn: 'enable' });
  assert.equal(failed.code, 1);
  assert.match(failed.err, /systemctl enable --now switchboard\.service failed \(exit 1\): Failed to enable unit: Access denied/);

  const unitPath = join(root, 'etc/systemd/system/switchboard.service');
  assert.ok(existsSync(unitPath));
  const removed = await service(['uninstall'], { root });
  assert.equal(removed.code, 0, removed.err);
  assert.equal(existsSync(unitPath), false);
  assert.deepEqual(removed.calls, [['disable', '--now', 'switchboard.service'], ['daemon-reload']]);
  const twice = await service(['uninstall'], { root });
  assert.equal(twice.code, 0);
  assert.match(twice.out, /was not installed/);
});

test('usage errors exit 2; a config error is thrown as ConfigError (exit 78 in main)', async () => {
  assert.equal((await service(['restart'], { root: join(dir, 'root5') })).code, 2);
  assert.equal((await service(['install', '--force'], { root: join(dir, 'root5') })).code, 2);
  await assert.rejects(service(['install'], { root: join(dir, 'root5'), config: join(dir, 'missing.toml') }), { name: 'ConfigError' });
});

test('install refuses paths the unit hides: a checkout, config or data_dir under /tmp (PrivateTmp), naming the option and the fix', async () => {
  const tmp = mkdtempSync(join(tmpdir(), 'service-hidden-'));
  try {
    const root = join(dir, 'root6');
    const config = join(tmp, 'config.toml');
    writeFileSync(config, `data_dir = "./data"\n[provider]\nkind = "openai"\nmodel = "m"\n`);
    const refused = await service(['install'], { root, config });
    assert.equal(refused.code, 1);
    assert.ok(refused.err.includes(`the service could not see the config (${config}): the unit has PrivateTmp=true, which gives the service an empty /tmp and /var/tmp of its own. Fix: put the config in /etc/switchboard`), refused.err);
    assert.ok(refused.err.includes(`the service could not see the data_dir (${join(tmp, 'data')}): the unit has PrivateTmp=true`), refused.err);
    assert.match(refused.err, /set data_dir = "\/var\/lib\/switchboard"/);
    assert.equal(existsSync(join(root, 'etc/systemd/system/switchboard.service')), false, 'nothing written');
    assert.deepEqual(refused.calls, [], 'systemctl not run');
    assert.equal((await service(['install', '--dry-run'], { root, config })).code, 1, '--dry-run says so too');
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
  // A checkout under /tmp or /var/tmp: the program itself.
  const params = { nodePath: '/usr/bin/node', cliPath: '/var/tmp/switchboard/dist/app/cli.js', configPath: '/etc/switchboard/config.toml', dataDir: '/var/lib/switchboard', user: false, installDir: '/var/tmp/switchboard' };
  const [program, ...rest] = hiddenByUnit(renderUnit(readTemplate(), params), params);
  assert.deepEqual(rest, []);
  assert.equal(
    program,
    'the service could not see the program (/var/tmp/switchboard/dist/app/cli.js): the unit has PrivateTmp=true, which gives the service an empty /tmp and /var/tmp of its own. Fix: put the checkout (or the npm install) elsewhere — e.g. sudo git clone <this repository> /opt/switchboard (or sudo mv /var/tmp/switchboard /opt/switchboard) — and run service install from there.',
  );
  // /home stays visible (rendered read-only); ProtectHome=true or InaccessiblePaths= in a unit would hide it.
  const home = { ...params, cliPath: '/home/ada/switchboard/dist/app/cli.js', installDir: '/home/ada/switchboard' };
  assert.deepEqual(hiddenByUnit(renderUnit(readTemplate(), home), home), []);
  assert.match(hiddenByUnit('ProtectHome=true\n', home)[0]!, /the unit has ProtectHome=true, which hides \/home, \/root and \/run\/user/);
  assert.match(hiddenByUnit('InaccessiblePaths=-/opt\n', { ...params, cliPath: '/opt/s/dist/app/cli.js' })[0]!, /InaccessiblePaths=-\/opt, which hides \/opt/);
});

/** systemd-analyze's complaints about our file (it also reports unrelated system units). */
function verify(unitPath: string): Promise<{ code: number; complaints: string[] }> {
  return new Promise((resolve) => {
    execFile(SYSTEMD_ANALYZE, ['verify', unitPath], { timeout: 30_000 }, (error, stdout, stderr) => {
      const complaints = `${stdout}${stderr}`.split('\n').filter((line) => line.includes('switchboard.service'));
      resolve({ code: error ? (typeof error.code === 'number' ? error.code : 1) : 0, complaints });
    });
  });
}

test('the rendered units pass systemd-analyze verify', { skip: existsSync(SYSTEMD_ANALYZE) ? false : `${SYSTEMD_ANALYZE} is not installed (Debian package systemd)` }, async () => {
  const variants = [
    { name: 'system', user: false, dataDir: '/var/lib/switchboard', readyAddress: '127.0.0.1:8787' },
    { name: 'system-elsewhere', user: false, dataDir: join(dir, 'data dir with spaces'), readyAddress: '0.0.0.0:8787' },
    { name: 'user', user: true, dataDir: join(dir, 'userdata'), readyAddress: undefined },
  ];
  for (const variant of variants) {
    const unitDir = join(dir, `verify-${variant.name}`);
    mkdirSync(unitDir);
    const unitPath = join(unitDir, 'switchboard.service');
    writeFileSync(unitPath, renderUnit(readTemplate(), { nodePath: process.execPath, cliPath, configPath, dataDir: variant.dataDir, user: variant.user, readyAddress: variant.readyAddress, installDir: dir }));
    const { code, complaints } = await verify(unitPath);
    assert.equal(code, 0, `${variant.name}: ${complaints.join('\n')}`);
    assert.deepEqual(complaints, [], `${variant.name}: systemd-analyze complained`);
  }
});

test('the readiness probe waits for /readyz to answer 200', async () => {
  let asked = 0;
  const server = createServer((req, res) => {
    asked++;
    res.writeHead(req.url === '/readyz' && asked >= 3 ? 200 : 503).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  // The same text systemd would run: "…" unquoted once by systemd, then given to node -e.
  const code = await new Promise<number | null>((resolve) => {
    const child = spawn(process.execPath, ['-e', readyProbe(`127.0.0.1:${port}`)], { stdio: 'ignore' });
    child.on('exit', resolve);
  });
  server.close();
  assert.equal(code, 0);
  assert.equal(asked, 3);
  assert.doesNotMatch(readyProbe('[::]:8787'), /["$%\\]/, 'nothing systemd would expand or unquote');
});
