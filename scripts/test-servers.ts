/**
 * `npm test`'s first step: makes sure the real servers the tests run are installed.
 *
 * - All there: one line, go on.
 * - Missing, and this process may install them (root, apt-get present, SWITCHBOARD_TEST_INSTALL
 *   not "0"): prints what it installs, installs it from Debian, checks again.
 * - Missing, and it may not: one message naming the exact `apt-get install …` line, exit 1 —
 *   within a second, instead of test files that wait for servers that never come.
 *
 * Every command it runs has a time limit, so it cannot hang either.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { installCommand, missingMessage, missingServers, postfixPreseed, testServers } from '../test/support/servers.ts';

const APT_TIMEOUT_MS = 15 * 60_000;

function say(line: string): void {
  process.stdout.write(`${line}\n`);
}

function fail(message: string): never {
  process.stderr.write(`${message}\n`);
  process.exit(1);
}

function run(command: string, args: readonly string[], input?: string): void {
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  const result = spawnSync(command, args, { env, input, encoding: 'utf8', timeout: APT_TIMEOUT_MS, stdio: [input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'] });
  if (result.error || result.status !== 0) {
    const why = result.error ? String(result.error) : `exit code ${result.status}`;
    fail(`test servers: \`${command} ${args.join(' ')}\` failed (${why}):\n${`${result.stdout ?? ''}${result.stderr ?? ''}`.trim().slice(-3000)}\n\n${missingMessage(missingServers())}`);
  }
}

const missing = missingServers();
if (missing.length === 0) {
  say(`test servers: ${testServers.map((server) => server.name).join(', ')} installed`);
  process.exit(0);
}

const root = process.getuid?.() === 0;
const apt = existsSync('/usr/bin/apt-get');
const allowed = process.env.SWITCHBOARD_TEST_INSTALL !== '0';
if (!root || !apt || !allowed) {
  const why = !allowed ? 'SWITCHBOARD_TEST_INSTALL=0' : !apt ? 'there is no apt-get here' : 'this is not root';
  fail(`${missingMessage(missing)}\nNot installing them: ${why}.`);
}

const packages = [...new Set(missing.flatMap((server) => server.packages))];
say(`test servers: installing from Debian for ${missing.map((server) => server.name).join(', ')}: ${installCommand(missing)}`);
if (packages.includes('postfix')) run('debconf-set-selections', [], `${postfixPreseed}\n`);
run('apt-get', ['update', '-qq']);
// policy-rc.d on these machines keeps the packages' own services from starting; the tests start their own.
run('apt-get', ['install', '-y', '-qq', '--no-install-recommends', ...packages]);
const still = missingServers();
if (still.length > 0) fail(`test servers: installed ${packages.join(' ')}, but files are still missing.\n${missingMessage(still)}`);
say(`test servers: installed ${packages.join(' ')}`);
