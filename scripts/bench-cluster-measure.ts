/**
 * What `bench:cluster` reads besides the wall clock: CPU time of the nodes and of PostgreSQL from
 * /proc, and each turn's wait split into waiting for its conversation's earlier turn, waiting for a
 * free slot, and pickup (runnable with a slot free → turn started). Scripts only.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import type { TestCluster } from '../test/support/cluster.ts';

/** Linux's USER_HZ: /proc/<pid>/stat counts CPU time in these ticks. */
const TICKS_PER_SECOND = 100;

/** utime + stime (and, with `children`, the reaped children's) of a process, in ms; 0 once it is gone. */
export function cpuMs(pid: number, children = false): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // fields after the command (which may hold spaces) start at ") "
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(fields[11]) + Number(fields[12]) + (children ? Number(fields[13]) + Number(fields[14]) : 0);
    return (ticks * 1000) / TICKS_PER_SECOND;
  } catch {
    return 0;
  }
}

/**
 * PostgreSQL's CPU so far, in ms: the postmaster with its reaped children (backends that ended)
 * plus every live child (backends, WAL writer, checkpointer…).
 */
export function postgresCpuMs(postmaster: number): number {
  let total = cpuMs(postmaster, true);
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const parent = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (parent === postmaster) total += cpuMs(Number(entry));
    } catch {
      // ended meanwhile: its time is in the postmaster's children's now
    }
  }
  return total;
}

/** CPU ms of each node and of PostgreSQL, read before a step; `per(messages)` after it gives ms per message. */
export function cpuMeter(cluster: TestCluster, postmaster: number | undefined): { per(messages: number): { nodes: number[]; postgres: number | undefined } } {
  const read = (): { nodes: number[]; postgres: number | undefined } => ({
    nodes: cluster.nodes.map((node) => cpuMs(node.daemon.child.pid!)),
    postgres: postmaster === undefined ? undefined : postgresCpuMs(postmaster),
  });
  const before = read();
  return {
    per(messages) {
      const after = read();
      return {
        nodes: after.nodes.map((ms, i) => (ms - before.nodes[i]!) / messages),
        postgres: after.postgres === undefined ? undefined : (after.postgres - before.postgres!) / messages,
      };
    },
  };
}

/** One turn as the queue saw it: times in epoch ms. */
export interface TurnTimes {
  readonly node: string;
  readonly conversation: string;
  /** Its job was stored (with the message). */
  readonly created: number;
  /** A worker slot took its job. */
  readonly taken: number;
  /** Its job completed (the turn's end, as the queue saw it): its conversation's next job can be taken. */
  readonly completed: number;
  /**
   * Its slot on the node was free again: the reply sent (the worker returns after the delivery),
   * or the job's completion when later. Since the job completes in the turn's own commit, before
   * the send, the completion alone would count a send's time as the next turn's pickup.
   */
  readonly freed: number;
  /** The turn started (the node's log: end minus duration). */
  readonly started: number;
}

export interface TurnWaits {
  /** Runnable (its conversation's earlier turn done) with a slot free on its node → the turn started. */
  readonly pickup: number[];
  /** Runnable → a slot free on the node that ran it (0 when one was free). */
  readonly slotWait: number[];
  /** Stored → runnable: waiting for the conversation's earlier turns (first in first out). */
  readonly fifoWait: number[];
  /** Pickup's first part: runnable with a slot free → a worker slot claimed its job. */
  readonly claim: number[];
  /** Pickup's second part: claimed → the turn started (its inbox entry read, admission). */
  readonly startUp: number[];
}

/**
 * Splits each turn's wait. Runnable = stored, and the conversation's previous job completed. A
 * slot is free for it on node N at time t when fewer than `slots` of the turns N took before this
 * one were stored and not yet done at t: those were ahead of it, running or in line (the queue is
 * first in first out); a turn stored later but taken first took a slot it could have had.
 */
export function splitWaits(turns: readonly TurnTimes[], slots: number): TurnWaits {
  const byConversation = new Map<string, TurnTimes[]>();
  for (const turn of turns) byConversation.set(turn.conversation, [...(byConversation.get(turn.conversation) ?? []), turn]);
  const runnable = new Map<TurnTimes, number>();
  for (const list of byConversation.values()) {
    list.sort((a, b) => a.created - b.created);
    list.forEach((turn, i) => runnable.set(turn, Math.max(turn.created, i === 0 ? 0 : list[i - 1]!.completed)));
  }
  const waits: TurnWaits = { pickup: [], slotWait: [], fifoWait: [], claim: [], startUp: [] };
  for (const turn of turns) {
    const ready = runnable.get(turn)!;
    const earlier = turns.filter((other) => other !== turn && other.node === turn.node && other.taken < turn.taken);
    // Ahead of it for a slot at t: taken before it, stored by t (so in line or running), not yet done.
    const busyAt = (t: number): number => earlier.filter((other) => other.created <= t && other.freed > t).length;
    let free = ready;
    if (busyAt(ready) >= slots) {
      // the first end of an earlier turn after `ready` that leaves a slot
      const ends = earlier.map((other) => other.freed).filter((end) => end > ready).sort((a, b) => a - b);
      free = ends.find((end) => busyAt(end) < slots) ?? turn.taken;
    }
    waits.fifoWait.push(ready - turn.created);
    waits.slotWait.push(free - ready);
    waits.pickup.push(Math.max(0, turn.started - Math.max(free, ready)));
    waits.claim.push(Math.max(0, turn.taken - Math.max(free, ready)));
    waits.startUp.push(turn.started - turn.taken);
  }
  for (const list of Object.values(waits) as number[][]) list.sort((a, b) => a - b);
  return waits;
}

/** The turns of a bench step: pg-boss's job rows joined with the nodes' "turn done" log lines by inbox seq. */
export async function turnTimes(cluster: TestCluster, url: string): Promise<TurnTimes[]> {
  const started = new Map<number, { node: string; at: number }>();
  for (const node of cluster.nodes) {
    for (const line of node.stdout().split('\n')) {
      if (!line.includes('"msg":"turn done"')) continue;
      const entry = JSON.parse(line) as { time: number; ms: number; seq: number };
      started.set(entry.seq, { node: node.name, at: entry.time - entry.ms });
    }
  }
  const { default: pg } = await import('pg');
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query<{ seq: string; conversation: string; created: string; taken: string; completed: string; sent: string | null }>(
      `SELECT data->>'seq' AS seq, singleton_key AS conversation, extract(epoch FROM created_on) * 1000 AS created,
              extract(epoch FROM started_on) * 1000 AS taken, extract(epoch FROM completed_on) * 1000 AS completed,
              (SELECT max(sent_at) FROM outbox WHERE inbox_seq = (data->>'seq')::bigint) AS sent
         FROM pgboss.job_common WHERE name = 'switchboard-turns' AND state = 'completed'`,
    );
    return rows.flatMap((row) => {
      const turn = started.get(Number(row.seq));
      if (!turn) return [];
      const completed = Number(row.completed);
      return [{ node: turn.node, conversation: row.conversation, created: Number(row.created), taken: Number(row.taken), completed, freed: Math.max(completed, Number(row.sent ?? 0)), started: turn.at }];
    });
  } finally {
    await client.end();
  }
}

/** "min / median / max" of repeated runs. */
export function spread(values: readonly number[], digits = 1): string {
  const sorted = [...values].sort((a, b) => a - b);
  if (sorted.length === 0) return 'n/a';
  const mid = sorted[Math.floor((sorted.length - 1) / 2)]!;
  return [sorted[0]!, mid, sorted.at(-1)!].map((value) => value.toFixed(digits)).join(' / ');
}

/**
 * Counts what PostgreSQL was sent while `step` ran (`log_statement = all` meanwhile, read back
 * from the test server's log): statements, and transactions (BEGIN) among them.
 */
export async function countStatements(
  adminUrl: string,
  step: () => Promise<void>,
): Promise<{ statements: number; transactions: number; byApplication: Map<string, number>; list: Map<string, number> }> {
  const { default: pg } = await import('pg');
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    const dataDir = (await admin.query<{ data_directory: string }>('SHOW data_directory')).rows[0]!.data_directory;
    const logFile = join(dataDir, '..', 'log'); // test/support/postgres.ts logs beside its data dir
    await admin.query("ALTER SYSTEM SET log_line_prefix = '%m [%p] {%a} '");
    await admin.query("ALTER SYSTEM SET log_statement = 'all'");
    await admin.query('SELECT pg_reload_conf()');
    await new Promise((resolve) => setTimeout(resolve, 300));
    const from = readFileSync(logFile).length;
    await step();
    await admin.query("ALTER SYSTEM SET log_statement = 'none'");
    await admin.query('SELECT pg_reload_conf()');
    await new Promise((resolve) => setTimeout(resolve, 300));
    // one entry per log line, with the lines of a statement of several lines (they start with a tab) joined to it
    const entries = readFileSync(logFile).subarray(from).toString('utf8').split(/\n(?!\t)/);
    const lines = entries.filter((line) => /LOG: {2}(statement|execute [^:]*):/.test(line) && !line.includes('log_statement'));
    const byApplication = new Map<string, number>();
    /** Each statement (its application, then its text with whitespace folded) → how many times it was sent. */
    const list = new Map<string, number>();
    for (const line of lines) {
      const app = (/\{([^}]*)\}/.exec(line)?.[1] ?? '').replace(/:.*/, '') || 'store';
      byApplication.set(app, (byApplication.get(app) ?? 0) + 1);
      const text = `${app}: ${line.replace(/^.*?LOG: {2}(statement|execute [^:]*): /, '').replace(/\s+/g, ' ').trim()}`;
      list.set(text, (list.get(text) ?? 0) + 1);
    }
    return { statements: lines.length, transactions: lines.filter((line) => /: BEGIN\s*$/.test(line)).length, byApplication, list };
  } finally {
    await admin.end();
  }
}

/**
 * Answers per second between the 10th and the 90th percent answered (`answeredAt[i]`: ms after the
 * start when i + 1 were answered): the rate while every slot has work, without the ramp-up and drain.
 */
export function steadyRate(answeredAt: readonly number[]): number {
  const from = Math.floor(answeredAt.length * 0.1);
  const to = Math.ceil(answeredAt.length * 0.9) - 1;
  const ms = answeredAt[to]! - answeredAt[from]!;
  return ms > 0 ? ((to - from) / ms) * 1000 : Number.NaN;
}

/** PostgreSQL's processes now: the postmaster's children (backends, WAL writer…). */
function postgresChildren(postmaster: number): number[] {
  const children: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === postmaster) children.push(Number(entry));
    } catch {
      // ended meanwhile
    }
  }
  return children;
}

/** System calls by name → count, from `strace -c` output. */
function straceCounts(text: string): Map<string, number> {
  const counts = new Map<string, number>();
  for (const line of text.split('\n')) {
    // "% time     seconds  usecs/call     calls    errors syscall"
    const fields = line.trim().split(/\s+/);
    if (fields.length < 5 || !/^\d+(\.\d+)?$/.test(fields[0]!)) continue;
    const name = fields.at(-1)!;
    const calls = Number(fields[3]);
    if (Number.isFinite(calls)) counts.set(name, calls);
  }
  return counts;
}

/**
 * Counts the system calls the node `pid` and PostgreSQL's processes make while `step` runs
 * (`strace -c`, which slows them: read the counts, not the time): each write to a socket is a
 * packet the other side wakes up for. Undefined when strace is not installed.
 */
export async function countSyscalls(pid: number, postmaster: number, step: () => Promise<void>): Promise<{ node: Map<string, number>; postgres: Map<string, number> } | undefined> {
  const { spawn } = await import('node:child_process');
  const { mkdtempSync, rmSync } = await import('node:fs');
  const { tmpdir } = await import('node:os');
  const dir = mkdtempSync(join(tmpdir(), 'sb-strace-'));
  const trace = (pids: number[], file: string) => {
    const child = spawn('strace', ['-f', '-c', '-o', file, ...pids.flatMap((p) => ['-p', String(p)])], { stdio: 'ignore' });
    const exited = new Promise<boolean>((resolve) => {
      child.on('error', () => resolve(false));
      child.on('exit', () => resolve(true));
    });
    return { child, exited };
  };
  try {
    const node = trace([pid], join(dir, 'node'));
    const postgres = trace(postgresChildren(postmaster), join(dir, 'postgres'));
    await new Promise((resolve) => setTimeout(resolve, 1000)); // strace attaches
    if (node.child.exitCode !== null || node.child.pid === undefined) return undefined;
    await step();
    node.child.kill('SIGINT');
    postgres.child.kill('SIGINT');
    if (!(await node.exited) || !(await postgres.exited)) return undefined;
    return { node: straceCounts(readFileSync(join(dir, 'node'), 'utf8')), postgres: straceCounts(readFileSync(join(dir, 'postgres'), 'utf8')) };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
