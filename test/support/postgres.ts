/**
 * A throwaway PostgreSQL 15 server for tests, from Debian's package: initdb in a temp dir
 * (as the `postgres` user: initdb refuses root), started on 127.0.0.1 and a free port with trust
 * auth, stopped (`-m immediate`) and deleted at the end. About a second to start.
 *
 * Each test gets its own database (`createDatabase`) so suites sharing one server never see each
 * other's rows.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, chownSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './net.ts';
import { postgresBin, requireServers } from './servers.ts';

export interface TestPostgres {
  readonly port: number;
  /** A URL of the server's `postgres` database (for admin statements). */
  readonly adminUrl: string;
  /** Creates an empty database and returns its URL. */
  createDatabase(name?: string): Promise<string>;
  /**
   * Creates a login role with no other attribute (not a superuser, cannot create databases or
   * roles) that must give `password` over TCP (scram-sha-256: its pg_hba.conf line goes before
   * the trust lines), and returns once the server asks it for that password.
   */
  createRole(name: string, password: string): Promise<void>;
  /** Stops the server at once (as a crash would) and starts it again on the same port and data. */
  restart(): void;
  stop(): void;
}

const asPostgres = (args: readonly string[], timeout = 60_000): string => {
  const result = spawnSync('runuser', ['-u', 'postgres', '--', ...args], { encoding: 'utf8', timeout, stdio: ['ignore', 'pipe', 'pipe'] });
  if (result.error || result.status !== 0) {
    throw new Error(`test postgres: \`${args.join(' ')}\` failed (${result.error ? String(result.error) : `exit ${result.status}`}):\n${`${result.stdout}${result.stderr}`.trim().slice(-2000)}`);
  }
  return result.stdout;
};

/** Starts a PostgreSQL server; throws at once (naming the install line) when PostgreSQL is not installed. */
export async function startPostgres(): Promise<TestPostgres> {
  requireServers('postgresql');
  const root = mkdtempSync(join(tmpdir(), 'sb-pg-'));
  chmodSync(root, 0o755);
  const dir = join(root, 'data');
  const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
  const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim());
  chownSync(root, uid, gid);
  asPostgres([`${postgresBin}/initdb`, '-D', dir, '-U', 'postgres', '--auth=trust', '--no-sync', '-E', 'UTF8', '--locale=C']);
  const port = await freePort();
  // fsync off: a test server's data need not survive a machine crash, and it is much faster. It
  // still survives a crash of the server itself (`restart` stops it with `-m immediate`): every
  // commit's WAL is written to the OS before the commit is acknowledged. synchronous_commit must
  // stay on for that — with it off, a commit the daemon was told about (and so confirmed to the
  // platform) can vanish in the crash, which no production server does, and a test would see a
  // message "lost" by the server, not by the daemon.
  const options = `-c listen_addresses=127.0.0.1 -p ${port} -c unix_socket_directories=${root} -c fsync=off -c full_page_writes=off -c max_connections=200`;
  const start = (): void => void asPostgres([`${postgresBin}/pg_ctl`, '-D', dir, '-w', '-t', '30', '-l', join(root, 'log'), '-o', options, 'start']);
  const stopServer = (mode: 'fast' | 'immediate'): void => void asPostgres([`${postgresBin}/pg_ctl`, '-D', dir, '-w', '-t', '30', '-m', mode, 'stop']);
  start();
  const adminUrl = `postgres://postgres@127.0.0.1:${port}/postgres`;
  let databases = 0;
  let stopped = false;
  return {
    port,
    adminUrl,
    async createDatabase(name = `t${process.pid}_${++databases}`) {
      const { default: pg } = await import('pg');
      const client = new pg.Client({ connectionString: adminUrl });
      await client.connect();
      try {
        await client.query(`CREATE DATABASE "${name}"`);
      } finally {
        await client.end();
      }
      return `postgres://postgres@127.0.0.1:${port}/${name}`;
    },
    async createRole(name, password) {
      const { default: pg } = await import('pg');
      const admin = new pg.Client({ connectionString: adminUrl });
      await admin.connect();
      try {
        await admin.query(`CREATE ROLE "${name}" LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD '${password.replace(/'/g, "''")}'`);
        const hba = join(dir, 'pg_hba.conf');
        writeFileSync(hba, `host all ${name} 127.0.0.1/32 scram-sha-256\n${readFileSync(hba, 'utf8')}`);
        await admin.query('SELECT pg_reload_conf()');
      } finally {
        await admin.end();
      }
      // The postmaster reloads on SIGHUP, a moment later: wait until a wrong password is refused.
      for (let tries = 0; ; tries++) {
        const probe = new pg.Client({ connectionString: `postgres://${name}:not-${password}@127.0.0.1:${port}/postgres` });
        const refused = await probe.connect().then(
          () => false,
          (error: { code?: string }) => error.code === '28P01',
        );
        await probe.end().catch(() => undefined);
        if (refused) return;
        if (tries > 100) throw new Error(`test postgres: the server did not start asking ${name} for a password`);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    },
    restart() {
      stopServer('immediate');
      start();
    },
    stop() {
      if (stopped) return;
      stopped = true;
      try {
        stopServer('immediate');
      } finally {
        rmSync(root, { recursive: true, force: true });
      }
    },
  };
}
