/**
 * A throwaway PostgreSQL 15 server for tests, from Debian's package: initdb in a temp dir
 * (as the `postgres` user: initdb refuses root), started on 127.0.0.1 and a free port with trust
 * auth, stopped (`-m immediate`) and deleted at the end. About a second to start.
 *
 * Each test gets its own database (`createDatabase`) so suites sharing one server never see each
 * other's rows.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, chownSync, mkdtempSync, rmSync } from 'node:fs';
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
  // fsync off: a test server's data need not survive a machine crash, and it is much faster.
  const options = `-c listen_addresses=127.0.0.1 -p ${port} -c unix_socket_directories=${root} -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200`;
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
