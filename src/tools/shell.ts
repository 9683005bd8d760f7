/**
 * `shell`: runs one command line in the workspace, after the command policy accepted it and
 * every argument that names a path was checked against the workspace (symlinks and wildcards
 * resolved). There is no shell in between: the parsed argv are spawned directly and wired by
 * `pipeline.ts`, so what was checked is what runs. Each process gets a clean environment, its
 * own process group (killed whole on timeout or abort) and a capped output.
 */
import { deniedReason } from '../security/autonomy.ts';
import { assessCommand, summarize, type Pipeline } from '../security/commands.ts';
import { cleanEnv, redactSecrets, secretValues } from '../security/env.ts';
import { workspaceRoot } from '../security/paths.ts';
import type { SecurityPolicy } from '../security/policy.ts';
import { ok, toolError, type Tool, type ToolAssessment, type ToolResult } from '../tool.ts';
import { runList } from './pipeline.ts';
import { watchWrites, type WriteWatch } from './write-budget.ts';
import { changeDirectory, checkLine, prepareCommand, type ArgumentContext } from './shell-args.ts';

export interface ShellArgs {
  readonly command: string;
  readonly timeout_seconds?: number;
}

/** The `shell` tool, confined by `policy` (allowlist, workspace, autonomy, timeout, output cap, env). */
export function createShellTool(policy: SecurityPolicy): Tool<ShellArgs> {
  const maxSeconds = Math.ceil(policy.commandTimeoutMs / 1000);
  return {
    name: 'shell',
    description:
      `Runs a command line in the workspace and returns its exit code and output (stdout and stderr together). ` +
      `There is no shell: programs are started directly, with sh-style quoting ('…', "…", \\) and wildcards (*, ?, […], expanded by the tool). ` +
      `Only allowlisted programs run; use relative paths; cd is built in; echo is /usr/bin/echo (no escapes without -e). ` +
      `No $VAR, $(…), backticks, subshells or redirections except 2>&1, >&2 and >/dev/null. ` +
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
      const context: ArgumentContext = { root: root.path, commands: policy.commands, approved: judged };
      const problem = await checkLine(judged.segments, context);
      if (problem !== undefined) return toolError(`Command refused: ${problem}`);
      const requested = typeof args.timeout_seconds === 'number' && args.timeout_seconds > 0 ? args.timeout_seconds * 1000 : Infinity;
      const timeoutMs = Math.min(policy.commandTimeoutMs, requested);
      ctx.log.debug({ command: judged.summary, timeoutMs }, 'shell command');
      return run(judged.pipelines, root.path, timeoutMs, policy, ctx.signal, context);
    },
  };
}

/** Runs the parsed list without a shell and turns the outcome into a result; only a failure to start is an error. */
async function run(pipelines: readonly Pipeline[], root: string, timeoutMs: number, policy: SecurityPolicy, signal: AbortSignal, context: ArgumentContext): Promise<ToolResult> {
  if (signal.aborted) return toolError('The command was cancelled before it started.');
  const secrets = secretValues(process.env);
  const output = new CappedOutput(policy.maxOutputBytes);
  const stop = new AbortController();
  let stopped: 'timeout' | 'abort' | 'writes' | undefined;
  const halt = (why: 'timeout' | 'abort' | 'writes'): void => {
    stopped ??= why;
    stop.abort();
  };
  const timer = setTimeout(() => halt('timeout'), timeoutMs);
  const onAbort = (): void => halt('abort');
  signal.addEventListener('abort', onAbort, { once: true });
  let watch: WriteWatch | undefined;
  try {
    watch = await watchWrites(root, policy.maxWriteBytes, () => halt('writes'));
    const outcome = await runList(pipelines, {
      root,
      env: cleanEnv(policy.envPassthrough, process.env, root),
      output: (chunk) => output.push(chunk),
      signal: stop.signal,
      prepare: (segment, cwd) => prepareCommand(segment, cwd, context),
      changeDirectory: (args, cwd) => changeDirectory(args, cwd, root),
      maxFileBytes: policy.maxWriteBytes,
    });
    const written = await watch.stop();
    const text = redactSecrets(output.text(), secrets);
    const seconds = Math.round(timeoutMs / 100) / 10;
    const limit = formatBytes(policy.maxWriteBytes);
    const tooMuch = (how: string): ToolResult =>
      toolError(
        `The command ${how} more than ${limit} in the workspace (${formatBytes(written)} counted), the most one command may write ([security] max_write_mb). ` +
          `Delete what it left that you do not need, and write less at a time. Output so far:\n${text || '(no output)'}`,
      );
    if (stopped === 'writes') return tooMuch('was stopped: it wrote');
    if (stopped === 'timeout') return toolError(`The command was stopped after ${seconds} s (time limit). Output so far:\n${text || '(no output)'}`);
    if (stopped === 'abort') return toolError(`The command was cancelled. Output so far:\n${text || '(no output)'}`);
    if (outcome.kind === 'refused') return toolError(`Command refused: ${outcome.reason} (nothing after this point ran). Output so far:\n${text || '(no output)'}`);
    // SIGXFSZ kills a program at the limit; one that handles it sees EFBIG ("File too large") instead.
    if (('signal' in outcome.status && outcome.status.signal === 'SIGXFSZ') || /File too large/i.test(text)) {
      return toolError(
        `The command was stopped: it tried to write a file larger than ${limit}, the most one command may write ([security] max_write_mb). ` +
          `The file it was writing is cut short; delete it, and write less (e.g. archive a smaller folder). Output so far:\n${text || '(no output)'}`,
      );
    }
    // Finished between two looks, but over the limit all the same.
    if (written > policy.maxWriteBytes) return tooMuch('wrote');
    const status = 'code' in outcome.status ? `exit code ${outcome.status.code}` : `killed by ${outcome.status.signal}`;
    return ok(`${status}\n${text || '(no output)'}`);
  } catch (error) {
    return toolError(`The command could not be started: ${(error as Error).message}`);
  } finally {
    clearTimeout(timer);
    signal.removeEventListener('abort', onAbort);
    void watch?.stop();
  }
}

/** 256 KB, 100 MB, 12.5 MB. */
function formatBytes(bytes: number): string {
  if (bytes < 1024 * 1024) return `${Math.floor(bytes / 1024)} KB`;
  return `${Math.round((bytes / (1024 * 1024)) * 10) / 10} MB`;
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
