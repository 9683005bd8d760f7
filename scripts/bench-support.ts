/**
 * What the benchmark scripts share: temp dirs and child processes cleaned up at the end,
 * bounded waits, percentiles and number formats, the fake model endpoint in a process of its
 * own, and RSS read from /proc. Scripts only — nothing here is product code.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { startFakeOpenAI } from '../test/fixtures/fake-openai.ts';

export const ROOT = join(import.meta.dirname, '..');
/** The compiled daemon, as users run it. */
export const CLI = join(ROOT, 'dist', 'app', 'cli.js');
/** Argument that makes a bench script run the fake model endpoint instead (see runFakeServer). */
export const FAKE_SERVER_FLAG = '--fake-openai-server';

const READY_TIMEOUT_MS = 20_000;
const EXIT_TIMEOUT_MS = 15_000;

const tempDirs: string[] = [];
/** Every child a bench started; killed by cleanUp(). */
export const children = new Set<ChildProcess>();

export function tempDir(label: string): string {
  const dir = mkdtempSync(join(tmpdir(), `switchboard-bench-${label}-`));
  tempDirs.push(dir);
  return dir;
}

export function removeTempDirs(): void {
  for (const dir of tempDirs.splice(0)) rmSync(dir, { recursive: true, force: true });
}

/** Kills every child still running and removes the temp dirs (for exit paths). */
export function cleanUp(): void {
  for (const child of children) child.kill('SIGKILL');
  removeTempDirs();
}

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Rejects after `ms` with `what` unless `promise` settles first. */
export async function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`${what}: no result within ${ms} ms`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** Nearest-rank percentile of an ascending array. */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))]!;
}

export const median = (values: readonly number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
};
export const mean = (values: readonly number[]): number => values.reduce((sum, value) => sum + value, 0) / values.length;
export const fmt = (value: number, digits = 1): string => (Number.isFinite(value) ? value.toFixed(digits) : 'n/a');
export const fmtInt = (value: number): string => (Number.isFinite(value) ? Math.round(value).toLocaleString('en-US') : 'n/a');

export function say(line = ''): void {
  process.stdout.write(`${line}\n`);
}

/** Runs the fake model endpoint in this process (a bench started with FAKE_SERVER_FLAG). */
export async function runFakeServer(): Promise<void> {
  const fake = await startFakeOpenAI();
  // Zero-latency answers; forget requests so a long run does not grow memory.
  fake.fallback = () => {
    fake.requests.length = 0;
    return { text: 'ok' };
  };
  process.stdout.write(`${fake.baseUrl}\n`);
  const shutdown = (): void => void fake.close().then(() => process.exit(0));
  process.stdin.on('end', shutdown); // the bench went away
  process.stdin.on('error', shutdown);
  process.stdin.resume();
  process.on('SIGTERM', shutdown);
}

/**
 * A bench script's entry: the fake model's process when spawned with {@link FAKE_SERVER_FLAG},
 * else `main()`, printing a failure as `<name> failed: …` (exit code 1); children are killed and
 * temp dirs removed either way.
 */
export async function runBench(name: string, main: () => Promise<void>): Promise<void> {
  if (process.argv.includes(FAKE_SERVER_FLAG)) {
    await runFakeServer();
    return;
  }
  try {
    await main();
  } catch (error) {
    process.stderr.write(`${name} failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exitCode = 1;
  } finally {
    cleanUp();
  }
}

export interface FakeServer {
  readonly baseUrl: string;
  readonly pid: number;
  close(): Promise<void>;
}

/** Starts `script FAKE_SERVER_FLAG` (a bench that calls runFakeServer for that flag). */
export async function startFakeServerProcess(script: string): Promise<FakeServer> {
  const child = spawn(process.execPath, [script, FAKE_SERVER_FLAG], { cwd: ROOT, stdio: ['pipe', 'pipe', 'inherit'] });
  children.add(child);
  const lines = createInterface({ input: child.stdout! });
  const baseUrl = await within(
    new Promise<string>((resolve, reject) => {
      lines.once('line', resolve);
      child.once('exit', (code) => reject(new Error(`fake OpenAI server exited early (code ${code})`)));
    }),
    READY_TIMEOUT_MS,
    'fake OpenAI server start',
  );
  return {
    baseUrl,
    pid: child.pid!,
    close: async () => {
      lines.close();
      await stopChild(child, 'SIGTERM');
    },
  };
}

/** Signals a child and waits for it to exit (SIGKILL after a bound). Returns its exit code. */
export async function stopChild(child: ChildProcess, signal: NodeJS.Signals): Promise<number | null> {
  const exited = new Promise<number | null>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve(child.exitCode);
    else child.once('exit', (code) => resolve(code));
  });
  if (child.exitCode === null && child.signalCode === null) child.kill(signal);
  let code: number | null;
  try {
    code = await within(exited, EXIT_TIMEOUT_MS, `pid ${child.pid} exit after ${signal}`);
  } catch (error) {
    say(`  ! ${(error as Error).message}; sending SIGKILL`);
    child.kill('SIGKILL');
    code = await exited;
  }
  child.stdin?.destroy();
  child.stdout?.destroy();
  child.stderr?.destroy();
  children.delete(child);
  return code;
}

/** VmRSS, VmHWM (peak) and the anonymous and file-backed parts of RSS of a process, in MB. */
export function readRssMb(pid: number): { rss: number; hwm: number; anon: number; file: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const field = (name: string): number => {
    const match = new RegExp(`^${name}:\\s+(\\d+)\\s+kB`, 'm').exec(status);
    return match ? Number(match[1]) / 1024 : Number.NaN;
  };
  return { rss: field('VmRSS'), hwm: field('VmHWM'), anon: field('RssAnon'), file: field('RssFile') };
}

/** `pid` and every process below it (from /proc/<pid>/task/<tid>/children). */
export function processTree(pid: number): number[] {
  const all = [pid];
  for (let i = 0; i < all.length; i++) {
    let tasks: string[];
    try {
      tasks = readdirSync(`/proc/${all[i]}/task`);
    } catch {
      continue;
    }
    for (const task of tasks) {
      try {
        const text = readFileSync(`/proc/${all[i]}/task/${task}/children`, 'utf8').trim();
        if (text !== '') all.push(...text.split(/\s+/).map(Number));
      } catch {
        // the task ended meanwhile
      }
    }
  }
  return all;
}
