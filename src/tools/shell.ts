/**
 * `shell`: runs one command line with /bin/sh in the workspace, after the command policy
 * accepted it and every argument that names a path was checked against the workspace
 * (symlinks and wildcards resolved). The child gets a clean environment, its own process
 * group (killed whole on timeout or abort) and a capped output.
 */
import { spawn } from 'node:child_process';
import { readdir } from 'node:fs/promises';
import { join, matchesGlob, resolve } from 'node:path';
import { deniedReason } from '../security/autonomy.ts';
import { assessCommand, pathCandidates, summarize, type Segment } from '../security/commands.ts';
import { cleanEnv, redactSecrets, secretValues } from '../security/env.ts';
import { resolveInside, workspaceRoot } from '../security/paths.ts';
import type { SecurityPolicy } from '../security/policy.ts';
import { ok, toolError, type Tool, type ToolAssessment, type ToolResult } from '../tool.ts';

export interface ShellArgs {
  readonly command: string;
  readonly timeout_seconds?: number;
}

/** How many names a wildcard argument may expand to before the command is refused as unverifiable. */
const MAX_GLOB_CHECKS = 2000;
/** After the shell exits, how long stray pipe holders get before the output is taken as is. */
const CLOSE_GRACE_MS = 1000;

/** The `shell` tool, confined by `policy` (allowlist, workspace, autonomy, timeout, output cap, env). */
export function createShellTool(policy: SecurityPolicy): Tool<ShellArgs> {
  const maxSeconds = Math.ceil(policy.commandTimeoutMs / 1000);
  return {
    name: 'shell',
    description:
      `Runs a command with /bin/sh in the workspace and returns its exit code and output (stdout and stderr together). ` +
      `Only allowlisted programs run; use relative paths; no $VAR, $(…), backticks, redirections (except 2>&1, >/dev/null) or subshells. ` +
      `Combine commands with &&, ||, ; or |. Stops after ${maxSeconds} s.`,
    parameters: {
      type: 'object',
      properties: {
        command: { type: 'string', description: 'The command line, e.g. "git status && ls src"' },
        timeout_seconds: { type: 'number', description: `Stop the command after this many seconds (at most ${maxSeconds}).`, minimum: 1 },
      },
      required: ['command'],
      additionalProperties: false,
    },
    assess(args): ToolAssessment {
      const judged = assessCommand(String(args.command), policy.commands);
      if ('refused' in judged) return { risk: 'high', mutates: true, summary: `${summarize(String(args.command))} (refused: ${judged.refused})` };
      return { risk: judged.risk, mutates: judged.mutates, summary: judged.summary };
    },
    async execute(args, ctx) {
      if (typeof args.command !== 'string') return toolError('command must be a string, e.g. "ls -la".');
      const judged = assessCommand(args.command, policy.commands);
      if ('refused' in judged) return toolError(`Command refused: ${judged.refused}`);
      const denied = deniedReason(policy.autonomy, judged);
      if (denied !== undefined) return toolError(`Command refused: ${denied}`);
      const root = await workspaceRoot(policy.workspace);
      if (!root.ok) return toolError(root.error);
      const problem = await checkArguments(judged.segments, root.path);
      if (problem !== undefined) return toolError(`Command refused: ${problem}`);
      const requested = typeof args.timeout_seconds === 'number' && args.timeout_seconds > 0 ? args.timeout_seconds * 1000 : Infinity;
      const timeoutMs = Math.min(policy.commandTimeoutMs, requested);
      ctx.log.debug({ command: judged.summary, timeoutMs }, 'shell command');
      return run(args.command, root.path, timeoutMs, policy, ctx.signal);
    },
  };
}

/**
 * Checks every value that a program could take as a path against the real filesystem:
 * relative to the workspace and to every directory an earlier `cd` may have moved to,
 * with wildcards expanded the way sh would (following symlinks).
 */
async function checkArguments(segments: readonly Segment[], root: string): Promise<string | undefined> {
  let cwds = new Set([root]);
  for (const { words } of segments) {
    const [program, ...args] = words;
    for (const word of args) {
      for (const value of pathCandidates(word)) {
        if (value === '' || value === '/dev/null') continue;
        for (const cwd of cwds) {
          const problem = word.glob ? await checkWildcard(root, cwd, value) : await checkPath(root, resolve(cwd, value), value);
          if (problem !== undefined) return problem;
        }
      }
    }
    if (program?.text === 'cd') {
      const target = args.find((word) => !word.text.startsWith('-'));
      if (target?.glob === true) return `cd needs an exact directory name, not a wildcard (${target.text}).`;
      const next = new Set(cwds);
      for (const cwd of cwds) {
        const resolved = target === undefined || target.text === '-' ? undefined : await resolveInside(root, resolve(cwd, target.text));
        if (resolved?.ok === true) next.add(resolved.path);
      }
      cwds = next;
    }
  }
  return undefined;
}

async function checkPath(root: string, absolute: string, shown: string): Promise<string | undefined> {
  const resolved = await resolveInside(root, absolute);
  return resolved.ok ? undefined : `the argument ${shown}: ${resolved.error}`;
}

/** Expands `pattern` component by component like sh (symlinked directories followed) and checks each name. */
async function checkWildcard(root: string, cwd: string, pattern: string): Promise<string | undefined> {
  const literal = await checkPath(root, resolve(cwd, pattern), pattern);
  if (literal !== undefined) return literal;
  let current = [pattern.startsWith('/') ? '/' : cwd];
  let checked = 0;
  for (const part of pattern.split('/').filter((p) => p !== '' && p !== '.')) {
    const next: string[] = [];
    for (const dir of current) {
      if (!/[*?[]/.test(part)) {
        next.push(join(dir, part));
        continue;
      }
      const names = await readdir(dir).catch(() => [] as string[]);
      for (const name of names) {
        if (name.startsWith('.') || !matchesGlob(name, part)) continue;
        if (++checked > MAX_GLOB_CHECKS) return `the wildcard ${pattern} matches too many names to check; narrow it.`;
        const problem = await checkPath(root, join(dir, name), `${pattern} (matching ${name})`);
        if (problem !== undefined) return problem;
        next.push(join(dir, name));
      }
    }
    current = next;
  }
  return undefined;
}

/** Runs the command and turns the outcome into a result; only a failure to start is an error. */
function run(command: string, cwd: string, timeoutMs: number, policy: SecurityPolicy, signal: AbortSignal): Promise<ToolResult> {
  if (signal.aborted) return Promise.resolve(toolError('The command was cancelled before it started.'));
  const secrets = secretValues(process.env);
  const output = new CappedOutput(policy.maxOutputBytes);
  return new Promise((resolvePromise) => {
    const child = spawn('/bin/sh', ['-c', command], {
      cwd,
      env: cleanEnv(policy.envPassthrough, process.env, cwd),
      detached: true, // own process group, so a timeout kills pipelines and grandchildren too
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stopped: 'timeout' | 'abort' | undefined;
    let settled = false;
    let exit: { code: number | null; signal: NodeJS.Signals | null } | undefined;
    let graceTimer: NodeJS.Timeout | undefined;
    const killGroup = (sig: NodeJS.Signals): void => {
      if (child.pid === undefined) return;
      try {
        process.kill(-child.pid, sig);
      } catch {
        // the group is already gone
      }
    };
    const stop = (why: 'timeout' | 'abort'): void => {
      stopped ??= why;
      killGroup('SIGKILL');
    };
    const timer = setTimeout(() => stop('timeout'), timeoutMs);
    const onAbort = (): void => stop('abort');
    signal.addEventListener('abort', onAbort, { once: true });
    const finish = (): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      clearTimeout(graceTimer);
      signal.removeEventListener('abort', onAbort);
      child.stdout.destroy();
      child.stderr.destroy();
      const text = redactSecrets(output.text(), secrets);
      const seconds = Math.round(timeoutMs / 100) / 10;
      if (stopped === 'timeout') resolvePromise(toolError(`The command was stopped after ${seconds} s (time limit). Output so far:\n${text || '(no output)'}`));
      else if (stopped === 'abort') resolvePromise(toolError(`The command was cancelled. Output so far:\n${text || '(no output)'}`));
      else {
        const status = exit?.code !== null && exit?.code !== undefined ? `exit code ${exit.code}` : `killed by ${exit?.signal ?? 'a signal'}`;
        resolvePromise(ok(`${status}\n${text || '(no output)'}`));
      }
    };
    child.stdout.on('data', (chunk: Buffer) => output.push(chunk));
    child.stderr.on('data', (chunk: Buffer) => output.push(chunk));
    child.on('error', (error) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
      resolvePromise(toolError(`The command could not be started: ${error.message}`));
    });
    child.on('exit', (code, sig) => {
      exit = { code, signal: sig };
      killGroup('SIGKILL'); // nothing the command started outlives it
      graceTimer = setTimeout(finish, CLOSE_GRACE_MS);
    });
    child.on('close', finish);
  });
}

/** Keeps the first and last halves of at most `max` bytes, noting how much was dropped. */
class CappedOutput {
  private readonly half: number;
  private readonly head: Buffer[] = [];
  private headBytes = 0;
  private tail: Buffer[] = [];
  private tailBytes = 0;
  private dropped = 0;
  private readonly max: number;

  constructor(max: number) {
    this.max = max;
    this.half = Math.floor(max / 2);
  }

  push(chunk: Buffer): void {
    if (this.headBytes < this.half) {
      const take = chunk.subarray(0, this.half - this.headBytes);
      this.head.push(take);
      this.headBytes += take.length;
      chunk = chunk.subarray(take.length);
      if (chunk.length === 0) return;
    }
    this.tail.push(chunk);
    this.tailBytes += chunk.length;
    const room = this.max - this.half;
    while (this.tailBytes > room) {
      const first = this.tail[0]!;
      const excess = this.tailBytes - room;
      if (first.length <= excess) {
        this.tail.shift();
        this.tailBytes -= first.length;
        this.dropped += first.length;
      } else {
        this.tail[0] = first.subarray(excess);
        this.tailBytes -= excess;
        this.dropped += excess;
      }
    }
  }

  text(): string {
    // eslint-disable-next-line no-control-regex
    const clean = (s: string): string => s.replace(/\x1b\[[0-9;?]*[A-Za-z]/g, '');
    if (this.dropped === 0) return clean(Buffer.concat([...this.head, ...this.tail]).toString('utf8')).trimEnd();
    const head = Buffer.concat(this.head).toString('utf8');
    const tail = Buffer.concat(this.tail).toString('utf8');
    return `${clean(head)}\n[… output truncated: ${this.dropped} bytes omitted (limit ${this.max} bytes) …]\n${clean(tail)}`.trimEnd();
  }
}
