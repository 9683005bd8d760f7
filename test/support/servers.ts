/**
 * The real servers the tests run, from Debian's packages: one table that the `npm test`
 * preflight (scripts/test-servers.ts) installs from and each test file that needs a server
 * checks before it starts anything — so a missing server is one clear message naming the
 * `apt-get install …` line, never a hang.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';

export interface TestServer {
  /** What the tests call it. */
  readonly name: string;
  /** Which tests need it. */
  readonly usedBy: string;
  /** Files that must exist for it to work (the Debian packages' paths). */
  readonly binaries: readonly string[];
  /** The Debian packages that provide it. */
  readonly packages: readonly string[];
}

/** Debian's multiarch folder for this machine (where libfaketime lives). */
const multiarch = ({ x64: 'x86_64-linux-gnu', arm64: 'aarch64-linux-gnu', arm: 'arm-linux-gnueabihf', ia32: 'i386-linux-gnu' } as Record<string, string>)[process.arch] ?? `${process.arch}-linux-gnu`;

/** libfaketime's preload library: the wall clock jump test runs the daemon under it. */
export const libfaketime = `/usr/lib/${multiarch}/faketime/libfaketime.so.1`;

/** Debian keeps PostgreSQL 15's programs in its own folder, not on PATH. */
export const postgresBin = '/usr/lib/postgresql/15/bin';

export const testServers: readonly TestServer[] = [
  { name: 'ngircd', usedBy: 'IRC tests (test/irc.e2e.test.ts)', binaries: ['/usr/sbin/ngircd'], packages: ['ngircd'] },
  { name: 'openssl', usedBy: 'the IRC TLS test (its throwaway certificate)', binaries: ['/usr/bin/openssl'], packages: ['openssl'] },
  {
    name: 'dovecot',
    usedBy: 'email tests (test/email.e2e.test.ts): IMAP, LMTP and SASL',
    binaries: ['/usr/sbin/dovecot', '/usr/bin/doveadm', '/usr/lib/dovecot/imap', '/usr/lib/dovecot/lmtp'],
    packages: ['dovecot-imapd', 'dovecot-lmtpd'],
  },
  { name: 'postfix', usedBy: 'email tests (test/email.e2e.test.ts): SMTP', binaries: ['/usr/sbin/postfix', '/usr/sbin/postqueue'], packages: ['postfix'] },
  { name: 'systemd-analyze', usedBy: 'the service unit test (app/service.test.ts)', binaries: ['/usr/bin/systemd-analyze'], packages: ['systemd'] },
  { name: 'libfaketime', usedBy: 'the wall clock jump test (test/clock-jump.e2e.test.ts): the daemon with its clock stepped', binaries: [libfaketime], packages: ['libfaketime'] },
  {
    name: 'postgresql',
    usedBy: 'the PostgreSQL storage and cluster tests (src/store/*.contract.test.ts, test/cluster.e2e.test.ts)',
    binaries: [`${postgresBin}/initdb`, `${postgresBin}/pg_ctl`, `${postgresBin}/postgres`],
    packages: ['postgresql-15'],
  },
  { name: 'iproute2', usedBy: 'the systemd recipe test (test/systemd-recipe.e2e.test.ts): loopback up in its own network namespace', binaries: ['/usr/sbin/ip'], packages: ['iproute2'] },
  { name: 'tmux', usedBy: 'the interactive chat tests (test/chat-tty.e2e.test.ts): a real terminal for the prompt and Ctrl-C', binaries: ['/usr/bin/tmux'], packages: ['tmux'] },
  { name: 'chromium', usedBy: 'the web console tests (test/console.e2e.test.ts): a real browser driven by playwright-core', binaries: ['/usr/bin/chromium'], packages: ['chromium'] },
];

/**
 * The servers (all, or those named) with a file missing. `root` is where the file system is
 * looked at (the tests of this very check point it at an empty folder).
 */
export function missingServers(names?: readonly string[], root = process.env.SWITCHBOARD_TEST_SERVER_ROOT ?? '/'): TestServer[] {
  return testServers.filter((server) => (names === undefined || names.includes(server.name)) && server.binaries.some((binary) => !existsSync(join(root, binary))));
}

/** postfix asks which mail configuration to use at install; this answer keeps apt-get non-interactive. */
export const postfixPreseed = 'postfix postfix/main_mailer_type select No configuration';

/** The shell line that installs `servers`. */
export function installCommand(servers: readonly TestServer[]): string {
  const packages = [...new Set(servers.flatMap((server) => server.packages))];
  const preseed = packages.includes('postfix') ? `echo "${postfixPreseed}" | debconf-set-selections && ` : '';
  return `${preseed}apt-get install -y --no-install-recommends ${packages.join(' ')}`;
}

/** What to tell a person when `servers` are missing. */
export function missingMessage(servers: readonly TestServer[]): string {
  const list = servers.map((server) => `  ${server.name} (${server.packages.join(', ')}): ${server.usedBy}`).join('\n');
  return (
    `The tests run real servers that are not installed here:\n${list}\n` +
    `Install them (as root) with:\n  apt-get update && ${installCommand(servers)}\n` +
    `(npm test does this by itself when it runs as root on a machine with apt-get; set SWITCHBOARD_TEST_INSTALL=0 to stop it.)`
  );
}

/**
 * Throws at once, naming the install line, when a server this test file needs is missing.
 * Call it at the top of the file, before any server or fake is started.
 */
export function requireServers(...names: string[]): void {
  const missing = missingServers(names);
  if (missing.length > 0) throw new Error(missingMessage(missing));
}
