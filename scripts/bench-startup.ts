/**
 * One daemon start, measured: what the start-up parts of the benches share. The daemon runs
 * with only the terminal channel and an unreachable model (nothing is asked of it), its
 * spawn→ready time is taken from the "ready" log line, and its RSS 2 s after ready.
 */
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { children, readRssMb, sleep, stopChild, within } from './bench-support.ts';

/** A config file in `dir`: [channels.terminal] and a model that is never called. */
export function terminalConfig(dir: string): string {
  const file = join(dir, 'switchboard.toml');
  writeFileSync(file, ['data_dir = "./data"', '', '[log]', 'level = "info"', 'format = "json"', '', '[provider]', 'kind = "openai"', 'base_url = "http://127.0.0.1:9/v1"', 'model = "bench"', '', '[channels.terminal]', 'user = "bench"', ''].join('\n'));
  return file;
}

/**
 * Spawns Node with `args` in `root`, waits for ready (at most `readyWithinMs`), waits 2 s, reads
 * the RSS and whatever `inspect` reads of the running process, then stops it with SIGTERM.
 */
export async function startOnce<T>(root: string, args: readonly string[], readyWithinMs: number, inspect: (pid: number) => T): Promise<{ wallMs: number; rssMb: number; seen: T }> {
  const env: NodeJS.ProcessEnv = { ...process.env, MALLOC_ARENA_MAX: '2' };
  delete env.SWITCHBOARD_LOG_LEVEL;
  delete env.SWITCHBOARD_CONFIG;
  const t0 = performance.now();
  const child = spawn(process.execPath, args, { cwd: root, env, stdio: ['pipe', 'pipe', 'pipe'] });
  children.add(child);
  child.stdout!.resume();
  const lines = createInterface({ input: child.stderr! });
  const wallMs = await within(
    new Promise<number>((resolve, reject) => {
      lines.on('line', (line) => {
        if (line.includes('"msg":"ready"')) resolve(performance.now() - t0);
      });
      child.once('exit', (code) => reject(new Error(`daemon exited before ready (code ${code})`)));
    }),
    readyWithinMs,
    'daemon ready',
  );
  await sleep(2000);
  const rssMb = readRssMb(child.pid!).rss;
  const seen = inspect(child.pid!);
  await stopChild(child, 'SIGTERM');
  return { wallMs, rssMb, seen };
}
