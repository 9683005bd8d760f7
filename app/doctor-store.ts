/**
 * `switchboard doctor` in cluster mode (`[store] kind = "postgres"`): the configured PostgreSQL,
 * not the SQLite file in data_dir (which then holds no conversation). Reads only — no migration
 * is applied, no lease taken — so it runs beside the nodes:
 *
 * * store — the server answers, as the configured user (or why not: src/store/postgres/unavailable.ts);
 * * store schema — Switchboard's migrations applied (switchboard_migrations) against those this
 *   version knows (src/store/postgres/schema.ts);
 * * store durability — `synchronous_commit`: off loses commits the daemon already confirmed to a
 *   platform when the server crashes;
 * * cluster nodes — each node's last report (cluster_nodes), alive or gone;
 * * cluster leases — who holds which channel: the session advisory lock each channel's owner
 *   keeps (src/cluster/leases.ts) as pg_locks shows it, named by the nodes' reports.
 */
import type { Client } from 'pg';
import { lockKey } from '../src/cluster/leases.ts';
import { NODE_REPORT_MS } from '../src/cluster/nodes.ts';
import type { Config } from '../src/config/schema.ts';
import { postgresMigrations } from '../src/store/postgres/schema.ts';
import { redactUrl } from '../src/store/postgres/sql.ts';
import { storeUnavailable } from '../src/store/postgres/unavailable.ts';
import type { CheckResult } from './doctor-remote.ts';

/** The checks of a PostgreSQL store, in report order. Never throws. */
export async function checkPostgresStore(config: Config, timeoutMs: number, now = Date.now()): Promise<CheckResult[]> {
  const url = config.store.url!;
  const name = redactUrl(url);
  const { default: pg } = await import('pg');
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: timeoutMs, query_timeout: timeoutMs, application_name: 'switchboard doctor' });
  client.on('error', () => undefined); // a broken connection fails the query that is waiting
  try {
    await client.connect();
  } catch (error) {
    const why = storeUnavailable(name, error);
    return [{ check: 'store', ok: false, detail: `cannot use the PostgreSQL database ${name}: ${why.detail}`, fix: why.fix }];
  }
  try {
    const server = (await client.query<{ version: string; user: string }>("SELECT current_setting('server_version') AS version, current_user AS user")).rows[0]!;
    const results: CheckResult[] = [{ check: 'store', ok: true, detail: `PostgreSQL ${server.version.split(' ')[0]} at ${name} answers (as ${server.user}); it holds every conversation (the SQLite file in data_dir is not used for them)` }];
    results.push(await checkSchema(client, name));
    results.push(await checkDurability(client));
    const nodes = await readNodes(client, now);
    results.push(nodesResult(nodes));
    results.push(await checkLeases(client, config, nodes));
    return results;
  } catch (error) {
    return [{ check: 'store', ok: false, detail: `PostgreSQL at ${name} answered, then failed: ${error instanceof Error ? error.message : String(error)}`, fix: 'check the server\'s log, and that [store] url names Switchboard\'s database' }];
  } finally {
    await client.end().catch(() => undefined);
  }
}

async function checkSchema(client: Client, name: string): Promise<CheckResult> {
  const check = 'store schema';
  const known = postgresMigrations.length;
  const exists = (await client.query<{ exists: boolean }>("SELECT to_regclass('switchboard_migrations') IS NOT NULL AS exists")).rows[0]!.exists;
  if (!exists) return { check, ok: true, warning: true, detail: `${name} has no Switchboard tables yet`, fix: `the first node to start creates them (schema version ${known}); or is [store] url the right database?` };
  const row = (await client.query<{ version: number | null; applied: string | null }>('SELECT max(version) AS version, max(applied_at)::text AS applied FROM switchboard_migrations')).rows[0]!;
  const version = row.version ?? 0;
  if (version > known) return { check, ok: false, detail: `schema version ${version} is newer than this Switchboard knows (${known})`, fix: 'upgrade this install to the version the nodes run' };
  if (version < known) return { check, ok: true, warning: true, detail: `schema version ${version} of ${known}: migrations ${version + 1}–${known} are not applied yet`, fix: 'the next node that starts with this version applies them (every node should run the same version)' };
  return { check, ok: true, detail: `schema version ${version} of ${known}: every migration applied${row.applied ? ` (last ${new Date(Number(row.applied)).toISOString()})` : ''}` };
}

async function checkDurability(client: Client): Promise<CheckResult> {
  const setting = (await client.query<{ synchronous_commit: string }>('SHOW synchronous_commit')).rows[0]!.synchronous_commit;
  const check = 'store durability';
  if (setting === 'off') {
    const database = (await client.query<{ name: string }>('SELECT current_database() AS name')).rows[0]!.name;
    return {
      check,
      ok: true,
      warning: true,
      detail: `synchronous_commit = off: the server acknowledges a commit before it is on disk, so a crash of the database server can lose messages Switchboard already confirmed to their platforms (they are not delivered again)`,
      fix: `ALTER DATABASE "${database}" SET synchronous_commit = on (the default), then restart the nodes`,
    };
  }
  return { check, ok: true, detail: `synchronous_commit = ${setting}: a commit is on disk before the daemon confirms a message to its platform` };
}

interface NodeRow {
  readonly node: string;
  readonly version: string;
  readonly alive: boolean;
  readonly seenAgoSeconds: number;
  readonly channels: readonly string[];
  readonly inFlight: number;
}

async function readNodes(client: Client, now: number): Promise<NodeRow[]> {
  const exists = (await client.query<{ exists: boolean }>("SELECT to_regclass('cluster_nodes') IS NOT NULL AS exists")).rows[0]!.exists;
  if (!exists) return [];
  const { rows } = await client.query<{ node: string; version: string; seen_at: string; channels: string; in_flight: number }>('SELECT node, version, seen_at::text, channels, in_flight FROM cluster_nodes ORDER BY node');
  return rows.map((row) => {
    const seen = Number(row.seen_at);
    // the rule of src/cluster/nodes.ts: gone after three missed reports
    const alive = now - seen <= 3 * NODE_REPORT_MS;
    return { node: row.node, version: row.version, alive, seenAgoSeconds: Math.max(0, Math.round((now - seen) / 1000)), channels: alive ? (JSON.parse(row.channels) as string[]) : [], inFlight: alive ? row.in_flight : 0 };
  });
}

function nodesResult(nodes: readonly NodeRow[]): CheckResult {
  const check = 'cluster nodes';
  const alive = nodes.filter((node) => node.alive);
  const gone = nodes.filter((node) => !node.alive);
  if (alive.length === 0) {
    return { check, ok: true, warning: true, detail: `no node is running${gone.length ? ` (gone: ${gone.map((node) => `${node.node}, last seen ${node.seenAgoSeconds} s ago`).join('; ')})` : ' (none has ever joined)'}`, fix: 'start a node: switchboard start (systemctl start switchboard)' };
  }
  const describe = (node: NodeRow): string => `${node.node} (v${node.version}, channels: ${node.channels.join(', ') || 'none'}, ${node.inFlight} in flight)`;
  return { check, ok: true, detail: `${alive.length} running: ${alive.map(describe).join('; ')}${gone.length ? `; gone: ${gone.map((node) => `${node.node} (last seen ${node.seenAgoSeconds} s ago)`).join(', ')}` : ''}` };
}

/** The two 32-bit halves pg_locks shows a bigint advisory lock key as (classid high, objid low, objsubid 1). */
function lockHalves(key: bigint): { classid: number; objid: number } {
  const unsigned = BigInt.asUintN(64, key);
  return { classid: Number(unsigned >> 32n), objid: Number(unsigned & 0xffff_ffffn) };
}

async function checkLeases(client: Client, config: Config, nodes: readonly NodeRow[]): Promise<CheckResult> {
  const check = 'cluster leases';
  // The channels this config competes for (the terminal only runs under `chat`), and each node's browser chat.
  const names = new Set<string>([...Object.keys(config.channels).filter((name) => name !== 'terminal'), ...nodes.flatMap((node) => node.channels)]);
  const { rows } = await client.query<{ classid: number; objid: number; pid: number; addr: string | null }>(
    `SELECT l.classid::int8 AS classid, l.objid::int8 AS objid, l.pid, host(a.client_addr) AS addr
       FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid
      WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
  );
  const holders = new Map(rows.map((row) => [`${Number(row.classid)}:${Number(row.objid)}`, row]));
  const held: string[] = [];
  const free: string[] = [];
  for (const name of [...names].sort()) {
    const { classid, objid } = lockHalves(lockKey(name));
    const holder = holders.get(`${classid}:${objid}`);
    if (holder === undefined) {
      free.push(name);
      continue;
    }
    const node = nodes.find((candidate) => candidate.alive && candidate.channels.includes(name))?.node;
    held.push(`${name} → ${node ?? 'a node not yet reported'} (backend pid ${holder.pid}${holder.addr ? `, from ${holder.addr}` : ''})`);
  }
  const running = nodes.some((node) => node.alive);
  if (names.size === 0) return { check, ok: true, detail: 'no channel configured here to hold' };
  if (free.length > 0 && running) {
    return { check, ok: true, warning: true, detail: `${held.length ? `held: ${held.join('; ')}; ` : ''}not held by any node: ${free.join(', ')}`, fix: 'a channel no node holds is not listened to: start a node that has it configured, or see that node\'s log for why it cannot' };
  }
  return { check, ok: true, detail: held.length ? `held: ${held.join('; ')}${free.length ? `; not held (no node running): ${free.join(', ')}` : ''}` : `none held (no node running): ${free.join(', ')}` };
}
