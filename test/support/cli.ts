/** Runs the real `switchboard` CLI (from source, on this Node) in a child process. */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { logKeyWatcher } from './log-keys.ts';

export const cliPath = fileURLToPath(new URL('../../app/cli.ts', import.meta.url));

export interface CliResult {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
}

export interface CliOptions {
  readonly cwd?: string;
  readonly input?: string;
  readonly env?: NodeJS.ProcessEnv;
  readonly timeoutMs?: number;
  /** The program (and its first arguments) to run instead of this Node on app/cli.ts, e.g. `['bin/switchboard']` for the built daemon. */
  readonly command?: readonly [string, ...string[]];
}

const baseEnv = (): NodeJS.ProcessEnv => {
  const env = { ...process.env };
  delete env.SWITCHBOARD_CONFIG;
  delete env.SWITCHBOARD_LOG_LEVEL;
  return env;
};

/** Runs the CLI to completion with `input` on stdin. */
export function runCli(args: readonly string[], options: CliOptions = {}): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [cliPath, ...args], { cwd: options.cwd ?? tmpdir(), env: { ...baseEnv(), ...options.env } });
    let stdout = '';
    let stderr = '';
    const problems: string[] = [];
    const watchers = { stdout: logKeyWatcher((problem) => problems.push(problem)), stderr: logKeyWatcher((problem) => problems.push(problem)) };
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString('utf8');
      watchers.stdout.feed(chunk.toString('utf8'));
    });
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString('utf8');
      watchers.stderr.feed(chunk.toString('utf8'));
    });
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`switchboard ${args.join(' ')} did not exit within ${options.timeoutMs ?? 20_000} ms\nstdout: ${stdout}\nstderr: ${stderr}`));
    }, options.timeoutMs ?? 20_000);
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      watchers.stdout.feed('\n');
      watchers.stderr.feed('\n');
      if (problems.length > 0) reject(new Error(`switchboard ${args.join(' ')} logged a line with a repeated key:\n${problems.join('\n')}`));
      else resolve({ code, signal, stdout, stderr });
    });
    child.stdin.end(options.input ?? '');
  });
}

/** A daemon child whose output is collected as it arrives. */
export interface Daemon {
  readonly child: ChildProcessWithoutNullStreams;
  stdout(): string;
  stderr(): string;
  /** Resolves when `pattern` appears on the stream (default stderr, where logs go with the terminal channel). */
  waitFor(pattern: RegExp, stream?: 'stdout' | 'stderr', timeoutMs?: number): Promise<void>;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

export function startDaemon(args: readonly string[], options: CliOptions = {}): Daemon {
  // Debug level, so the repeated-key check below sees every line a channel can log.
  const env = { ...baseEnv(), SWITCHBOARD_LOG_LEVEL: 'debug', ...options.env };
  const [program, ...first] = options.command ?? [process.execPath, cliPath];
  const child = spawn(program, [...first, ...args], { cwd: options.cwd ?? tmpdir(), env });
  const out = { stdout: '', stderr: '' };
  const listeners: Array<() => void> = [];
  // A log line with a repeated key fails the running test (as an uncaught error) at once.
  const keyProblem = (problem: string): never => {
    throw new Error(`the daemon logged a line with a repeated key:\n${problem}`);
  };
  const watchers = { stdout: logKeyWatcher(keyProblem), stderr: logKeyWatcher(keyProblem) };
  const onData = (stream: 'stdout' | 'stderr') => (chunk: Buffer) => {
    out[stream] += chunk.toString('utf8');
    watchers[stream].feed(chunk.toString('utf8'));
    for (const listener of [...listeners]) listener();
  };
  child.stdout.on('data', onData('stdout'));
  child.stderr.on('data', onData('stderr'));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.on('close', (code, signal) => resolve({ code, signal })));
  return {
    child,
    stdout: () => out.stdout,
    stderr: () => out.stderr,
    exited,
    waitFor(pattern, stream = 'stderr', timeoutMs = 15_000) {
      return new Promise((resolve, reject) => {
        const check = (): void => {
          if (pattern.test(out[stream])) {
            listeners.splice(listeners.indexOf(check), 1);
            clearTimeout(timer);
            resolve();
          }
        };
        const timer = setTimeout(() => {
          listeners.splice(listeners.indexOf(check), 1);
          reject(new Error(`timed out waiting for ${pattern} on ${stream}\nstdout: ${out.stdout}\nstderr: ${out.stderr}`));
        }, timeoutMs);
        listeners.push(check);
        check();
      });
    },
  };
}

/** A temp dir with a switchboard.toml talking to `baseUrl`; `extra` is appended. */
export function tempConfig(baseUrl: string, extra = '[channels.terminal]\nuser = "tester"\n'): { dir: string; file: string; cleanup: () => void } {
  const dir = mkdtempSync(join(tmpdir(), 'sb-e2e-'));
  const file = join(dir, 'switchboard.toml');
  writeFileSync(
    file,
    `data_dir = "./data"\n[agent]\nname = "Testbot"\n[provider]\nkind = "openai"\nbase_url = "${baseUrl}"\nmodel = "test-model"\napi_key = "\${TEST_MODEL_KEY}"\n${extra}`,
  );
  return { dir, file, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}
