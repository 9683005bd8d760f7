/**
 * A real IRC server for tests: Debian's ngircd, run in the foreground on 127.0.0.1 with its
 * own temp config dir and random free ports (plain, and TLS with a throwaway self-signed
 * certificate when asked). It can be killed and started again on the same ports.
 *
 * ngircd throttles a client that sends faster than about 3 commands a second (it holds the
 * rest back); that is the real-server behaviour the IRC channel's pacing is tested against.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface Ngircd {
  readonly host: '127.0.0.1';
  /** Plain-text port. */
  readonly port: number;
  /** TLS port, when started with `tls`. */
  readonly tlsPort: number | undefined;
  /** The self-signed certificate (PEM) the TLS port presents, when started with `tls`. */
  readonly certificate: string | undefined;
  /** Kills the server (SIGKILL by default: every connection drops at once). */
  kill(signal?: NodeJS.Signals): Promise<void>;
  /** Starts it again on the same ports (after `kill`). */
  start(): Promise<void>;
  /** Kills and starts again; resolves once it listens. */
  restart(signal?: NodeJS.Signals): Promise<void>;
  /** What the server logged (for failure messages). */
  log(): string;
  close(): Promise<void>;
}

export interface NgircdOptions {
  /** Also listen with TLS (needs the openssl command for the certificate). */
  readonly tls?: boolean;
}

const BINARIES = ['/usr/sbin/ngircd', '/usr/local/sbin/ngircd', '/usr/bin/ngircd'];

export function ngircdBinary(): string {
  const found = BINARIES.find((path) => existsSync(path)) ?? whichSync('ngircd');
  if (!found) throw new Error('ngircd is not installed: the IRC tests need a real IRC server (apt-get install ngircd)');
  return found;
}

function whichSync(name: string): string | undefined {
  const result = spawnSync('sh', ['-c', `command -v ${name}`], { encoding: 'utf8' });
  const path = result.stdout.trim();
  return result.status === 0 && path !== '' ? path : undefined;
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}

export async function startNgircd(options: NgircdOptions = {}): Promise<Ngircd> {
  const binary = ngircdBinary();
  const dir = mkdtempSync(join(tmpdir(), 'sb-ngircd-'));
  chmodSync(dir, 0o755); // ngircd drops to nobody: it must still read its certificate
  mkdirSync(join(dir, 'conf.d'));
  let certificate: string | undefined;
  if (options.tls) {
    const made = spawnSync(
      'openssl',
      ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem'), '-days', '2', '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1,DNS:localhost'],
      { encoding: 'utf8' },
    );
    if (made.status !== 0) throw new Error(`openssl could not make a test certificate (is openssl installed?): ${made.stderr ?? made.error}`);
    chmodSync(join(dir, 'key.pem'), 0o644);
    certificate = readFileSync(join(dir, 'cert.pem'), 'utf8');
  }

  let port = 0;
  let tlsPort: number | undefined;
  let child: ChildProcess | undefined;
  let output = '';
  let exited: Promise<void> = Promise.resolve();

  const writeConfig = (): void => {
    writeFileSync(
      join(dir, 'ngircd.conf'),
      [
        '[Global]',
        'Name = irc.switchboard.test',
        'Info = Switchboard test server',
        'AdminInfo1 = test',
        'AdminInfo2 = test',
        'AdminEMail = test@example.invalid',
        'Listen = 127.0.0.1',
        `Ports = ${port}`,
        `PidFile = ${join(dir, 'ngircd.pid')}`,
        `HelpFile = ${join(dir, 'none')}`,
        'MotdPhrase = Switchboard test server',
        'ServerUID = nobody',
        'ServerGID = nogroup',
        '[Limits]',
        'MaxConnectionsIP = 0',
        'MaxNickLength = 30',
        'MaxJoins = 50',
        'PingTimeout = 120',
        'PongTimeout = 20',
        '[Options]',
        'PAM = no',
        'DNS = no',
        'Ident = no',
        `IncludeDir = ${join(dir, 'conf.d')}`,
        ...(options.tls ? ['[SSL]', `CertFile = ${join(dir, 'cert.pem')}`, `KeyFile = ${join(dir, 'key.pem')}`, `Ports = ${tlsPort}`] : []),
        '',
      ].join('\n'),
    );
  };

  /** Spawns ngircd; resolves once it listens, rejects when it fails to bind. */
  const launch = (): Promise<void> =>
    new Promise((resolve, reject) => {
      output = '';
      const proc = spawn(binary, ['-n', '-f', join(dir, 'ngircd.conf')], { stdio: ['ignore', 'pipe', 'pipe'] });
      child = proc;
      let settled = false;
      const timer = setTimeout(() => fail(new Error(`ngircd did not start in time:\n${output}`)), 10_000);
      const fail = (error: Error): void => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        proc.kill('SIGKILL');
        reject(error);
      };
      const onData = (chunk: Buffer): void => {
        output += chunk.toString('utf8');
        if (/Can't bind|Can't listen|Cannot bind|Address already in use|No listening ports/i.test(output)) fail(new Error(`ngircd could not listen:\n${output}`));
        else if (!settled && /Server "[^"]+" \(on "[^"]+"\) ready/.test(output)) {
          settled = true;
          clearTimeout(timer);
          resolve();
        }
      };
      proc.stdout!.on('data', onData);
      proc.stderr!.on('data', onData);
      exited = new Promise((done) => proc.once('exit', () => done()));
      proc.once('error', (error) => fail(error));
      proc.once('exit', (code) => fail(new Error(`ngircd exited (${code}):\n${output}`)));
    });

  // pick ports; another process may take one between our probe and ngircd's bind: try again
  for (let attempt = 0; ; attempt++) {
    port = await freePort();
    tlsPort = options.tls ? await freePort() : undefined;
    writeConfig();
    try {
      await launch();
      break;
    } catch (error) {
      await exited;
      if (attempt >= 4) {
        rmSync(dir, { recursive: true, force: true });
        throw error;
      }
    }
  }

  const kill = async (signal: NodeJS.Signals = 'SIGKILL'): Promise<void> => {
    const proc = child;
    child = undefined;
    if (!proc || proc.exitCode !== null || proc.signalCode !== null) return;
    proc.kill(signal);
    await exited;
  };

  const start = async (): Promise<void> => {
    // the old listening socket is gone once the process exited; retry briefly all the same
    for (let attempt = 0; ; attempt++) {
      try {
        await launch();
        return;
      } catch (error) {
        await exited;
        if (attempt >= 20) throw error;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }
  };

  return {
    host: '127.0.0.1',
    port,
    tlsPort,
    certificate,
    kill,
    start,
    async restart(signal) {
      await kill(signal);
      await start();
    },
    log: () => output,
    async close() {
      await kill('SIGTERM');
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
