/**
 * A real mail system on 127.0.0.1 for tests: Debian's dovecot (IMAP, LMTP, SASL auth) and
 * postfix (SMTP), each on random free ports with its own config in a temp dir (the recipe
 * is the code below). Mail flows nodemailer → postfix → LMTP → dovecot → imapflow.
 *
 * What it takes to run them unprivileged in a temp dir, each commented where it applies:
 * the dir is 0755 (dovecot's mail processes run as nobody, postfix's as postfix); postfix
 * runs without chroot (the queue has none of the chroot's copies of /etc); its config files
 * are dated a minute back (postfix waits for a file written in the last second to settle);
 * it is started as `postfix check` + its master binary (`postfix start` spends seconds in
 * permission checks); dovecot is stopped by killing its process group, and its pid file is
 * removed (a zombie master would be taken for a running one).
 *
 * postfix listens twice: `smtpPort` takes mail from the local network without auth (how the
 * test people send, and how mail from other servers arrives), `submissionPort` requires SASL
 * login (how the bot sends). Only the test domain is delivered (via LMTP); anything else
 * bounces at once (`default_transport = error`), so nothing can leave the machine.
 *
 * Fault hooks: `stopDovecot()` / `startDovecot()` (IMAP and LMTP go away together; postfix
 * queues mail meanwhile and `flush()` delivers it once dovecot is back).
 */
import { execFileSync, spawn } from 'node:child_process';
import { chmodSync, chownSync, closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { createConnection, createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface MailAccount {
  readonly address: string;
  readonly password: string;
}

export interface MailServer {
  readonly domain: string;
  readonly host: '127.0.0.1';
  readonly imapPort: number;
  /** postfix, no auth (people, other servers). */
  readonly smtpPort: number;
  /** postfix, SASL login required (the bot). */
  readonly submissionPort: number;
  readonly accounts: Readonly<Record<string, MailAccount>>;
  readonly dir: string;
  /** Kills dovecot (IMAP, LMTP and auth, every connection drops); resolves once its IMAP port is closed. */
  stopDovecot(): Promise<void>;
  /** Starts dovecot again; resolves once IMAP accepts connections. */
  startDovecot(): Promise<void>;
  /** Asks postfix to deliver its deferred mail now. */
  flush(): Promise<void>;
  /** postfix's log, for failure messages. */
  maillog(): string;
  close(): Promise<void>;
}

const binaries = ['/usr/sbin/dovecot', '/usr/bin/doveadm', '/usr/sbin/postfix'];
const RUN_TIMEOUT_MS = 30_000;

/** Starts dovecot + postfix with one mailbox per local part in `users` (password = `<user>pw`). */
export async function startMailServer(users: readonly string[], domain = 'test.example'): Promise<MailServer> {
  const missing = binaries.filter((binary) => !existsSync(binary));
  if (missing.length > 0) {
    throw new Error(
      `the email tests need dovecot and postfix (missing ${missing.join(', ')}): ` +
        `echo "postfix postfix/main_mailer_type select No configuration" | debconf-set-selections && apt-get install -y dovecot-imapd dovecot-lmtpd postfix`,
    );
  }
  if (process.getuid?.() !== 0) throw new Error('the email tests run dovecot and postfix, which must be started as root (they drop privileges themselves)');
  const dir = mkdtempSync(join(tmpdir(), 'sb-mail-'));
  chmodSync(dir, 0o755); // dovecot's mail processes run as nobody, postfix's as postfix
  const [imapPort, lmtpPort, authPort, smtpPort, submissionPort] = (await freePorts(5)) as [number, number, number, number, number];
  const commandLog = join(dir, 'commands.log');
  /** Runs a server command; its output goes to a file (the daemons it starts inherit stdio, so no pipes). */
  const run = (command: string, args: readonly string[]): Promise<void> =>
    new Promise((resolve, reject) => {
      const fd = openSync(commandLog, 'a');
      const child = spawn(command, args, { stdio: ['ignore', fd, fd] });
      closeSync(fd);
      // A server command that hangs fails the test with what it printed, instead of hanging it.
      const timer = setTimeout(() => {
        child.kill('SIGKILL');
        reject(new Error(`${command} ${args.join(' ')} did not finish within ${RUN_TIMEOUT_MS} ms: ${readFileSync(commandLog, 'utf8').slice(-2000)}`));
      }, RUN_TIMEOUT_MS);
      child.once('error', (error) => {
        clearTimeout(timer);
        reject(error);
      });
      child.once('exit', (code) => {
        clearTimeout(timer);
        if (code === 0) resolve();
        else reject(new Error(`${command} ${args.join(' ')} exited with ${code}: ${readFileSync(commandLog, 'utf8').slice(-2000)}`));
      });
    });
  const accounts = Object.fromEntries(users.map((user) => [user, { address: `${user}@${domain}`, password: `${user}pw` }]));

  // dovecot
  const dovecotDir = join(dir, 'dovecot');
  const home = join(dir, 'home');
  mkdirSync(dovecotDir);
  mkdirSync(home);
  chmodSync(home, 0o777);
  writeFileSync(join(dovecotDir, 'users'), Object.values(accounts).map((a) => `${a.address}:{PLAIN}${a.password}\n`).join(''));
  const dovecotConf = join(dovecotDir, 'dovecot.conf');
  writeFileSync(
    dovecotConf,
    `protocols = imap lmtp
listen = 127.0.0.1
base_dir = ${dovecotDir}/run
state_dir = ${dovecotDir}/state
log_path = ${dovecotDir}/dovecot.log
ssl = no
disable_plaintext_auth = no
auth_mechanisms = plain login
mail_location = maildir:~/Maildir
mail_uid = nobody
mail_gid = nogroup
first_valid_uid = 1
imap_idle_notify_interval = 1 secs
passdb {
  driver = passwd-file
  args = scheme=PLAIN username_format=%u ${dovecotDir}/users
}
userdb {
  driver = static
  args = uid=nobody gid=nogroup home=${home}/%u
}
service imap-login {
  inet_listener imap {
    address = 127.0.0.1
    port = ${imapPort}
  }
  inet_listener imaps {
    port = 0
  }
}
service pop3-login {
  inet_listener pop3 {
    port = 0
  }
}
service lmtp {
  inet_listener lmtp {
    address = 127.0.0.1
    port = ${lmtpPort}
  }
}
service auth {
  inet_listener {
    address = 127.0.0.1
    port = ${authPort}
  }
}
namespace inbox {
  inbox = yes
  mailbox Sent {
    special_use = \\Sent
    auto = subscribe
  }
}
`,
  );

  // postfix
  const postfixDir = join(dir, 'postfix');
  mkdirSync(join(postfixDir, 'queue'), { recursive: true });
  mkdirSync(join(postfixDir, 'data'));
  const postfixUser = Number(execFileSync('id', ['-u', 'postfix']).toString().trim());
  chownSync(join(postfixDir, 'data'), postfixUser, -1);
  writeFileSync(
    join(postfixDir, 'main.cf'),
    `compatibility_level = 3.6
queue_directory = ${postfixDir}/queue
data_directory = ${postfixDir}/data
mail_owner = postfix
setgid_group = postdrop
inet_interfaces = 127.0.0.1
inet_protocols = ipv4
myhostname = mx.${domain}
mydomain = ${domain}
mydestination =
mynetworks = 127.0.0.0/8
virtual_mailbox_domains = ${domain}
virtual_transport = lmtp:inet:127.0.0.1:${lmtpPort}
default_transport = error:outside mail is disabled in tests
relay_transport = error:outside mail is disabled in tests
smtpd_sasl_type = dovecot
smtpd_sasl_path = inet:127.0.0.1:${authPort}
smtpd_relay_restrictions = permit_mynetworks, permit_sasl_authenticated, reject_unauth_destination
smtputf8_enable = no
alias_maps =
alias_database =
biff = no
queue_run_delay = 1s
minimal_backoff_time = 1s
maximal_backoff_time = 2s
service_throttle_time = 1s
maillog_file = ${postfixDir}/maillog
maillog_file_prefixes = ${postfixDir}
`,
  );
  const master = readFileSync('/etc/postfix/master.cf', 'utf8')
    .split('\n')
    .filter((line) => !/^smtp\s+inet\s/.test(line))
    // no chroot: the queue is in a temp dir without the chroot's copies of /etc files
    .map((line) => line.replace(/^(\S+\s+(?:unix|unix-dgram|fifo|pass)\s+\S+\s+\S+\s+)y(\s)/, '$1n$2'));
  master.unshift(
    `127.0.0.1:${smtpPort} inet n - n - - smtpd -o smtpd_sasl_auth_enable=no`,
    `127.0.0.1:${submissionPort} inet n - n - - smtpd -o smtpd_sasl_auth_enable=yes -o smtpd_client_restrictions=permit_sasl_authenticated,reject`,
  );
  writeFileSync(join(postfixDir, 'master.cf'), master.join('\n'));
  // postfix waits for a config file written in the last second to settle: date them back
  const past = new Date(Date.now() - 60_000);
  for (const file of ['main.cf', 'master.cf']) utimesSync(join(postfixDir, file), past, past);

  const dovecotPid = (): number | undefined => {
    try {
      return Number(readFileSync(join(dovecotDir, 'run', 'master.pid'), 'utf8').trim()) || undefined;
    } catch {
      return undefined;
    }
  };
  let closed = false;
  const stopAllSync = (): void => {
    try {
      execFileSync('postfix', ['-c', postfixDir, 'stop'], { stdio: 'ignore' });
    } catch {
      // not running
    }
    const pid = dovecotPid();
    if (pid !== undefined) {
      try {
        process.kill(-pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  };
  // A test process that dies without close() must not leave the servers running.
  process.once('exit', () => {
    if (!closed) stopAllSync();
  });

  const startDovecot = async (): Promise<void> => {
    await run('dovecot', ['-c', dovecotConf]);
    await waitForPort(imapPort, true);
    await waitForPort(lmtpPort, true);
    await waitForPort(authPort, true);
  };
  /** Kills dovecot's whole process group (master, login, imap, lmtp): connections drop at once, like a crash. */
  const stopDovecot = async (): Promise<void> => {
    const pid = dovecotPid();
    if (pid !== undefined) {
      try {
        process.kill(-pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
    await waitForPort(imapPort, false);
    // SIGKILL is final; the killed master may linger as a zombie, which a new master would take for a running one
    rmSync(join(dovecotDir, 'run', 'master.pid'), { force: true });
  };
  // `postfix start` spends seconds in its permission checks: create the queue, then run the master.
  // (where Debian keeps it; asking `postconf` costs seconds)
  const masterBinary = ['/usr/lib/postfix/sbin/master', '/usr/libexec/postfix/master'].find((file) => existsSync(file)) ?? 'master';
  const startPostfix = async (): Promise<void> => {
    await run('postfix', ['-c', postfixDir, 'check']);
    await run(masterBinary, ['-c', postfixDir, '-w']);
  };

  try {
    await startDovecot();
    await startPostfix();
    await waitForPort(smtpPort, true);
    await waitForPort(submissionPort, true);
  } catch (error) {
    stopAllSync();
    const log = (file: string): string => (existsSync(file) ? readFileSync(file, 'utf8').slice(-3000) : '');
    throw new Error(`the mail server did not start: ${String(error)}\n${log(join(dovecotDir, 'dovecot.log'))}\n${log(join(postfixDir, 'maillog'))}`, { cause: error });
  }

  return {
    domain,
    host: '127.0.0.1',
    imapPort,
    smtpPort,
    submissionPort,
    accounts,
    dir,
    stopDovecot,
    startDovecot,
    async flush() {
      await run('postqueue', ['-c', postfixDir, '-f']);
    },
    maillog() {
      const file = join(postfixDir, 'maillog');
      return existsSync(file) ? readFileSync(file, 'utf8') : '';
    },
    async close() {
      if (closed) return;
      closed = true;
      await run('postfix', ['-c', postfixDir, 'stop']).catch(() => undefined);
      await stopDovecot();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

async function freePorts(n: number): Promise<number[]> {
  const servers = await Promise.all(
    Array.from({ length: n }, () => new Promise<ReturnType<typeof createServer>>((resolve, reject) => {
      const server = createServer();
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve(server));
    })),
  );
  const ports = servers.map((server) => (server.address() as AddressInfo).port);
  await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))));
  return ports;
}

/** Waits until `port` accepts (open = true) or refuses (open = false) connections. */
async function waitForPort(port: number, open: boolean, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const accepting = await new Promise<boolean>((resolve) => {
      const socket = createConnection({ host: '127.0.0.1', port });
      socket.once('connect', () => {
        socket.destroy();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
    });
    if (accepting === open) return;
    if (Date.now() > deadline) throw new Error(`port ${port} did not ${open ? 'open' : 'close'} within ${timeoutMs} ms`);
    await sleep(25);
  }
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
