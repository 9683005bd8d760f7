/**
 * Runs parsed command lists without a shell: each simple command is spawned from its argv
 * (`shell: false`), pipelines are wired stdout → stdin here, `&&`, `||` and `;` are sequenced
 * here, and the few redirections the parser accepts (to /dev/null, between stdout and stderr)
 * are applied here. `cd` is the one builtin. Every process gets its own process group, killed
 * whole when it exits, on abort, or on timeout.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import type { Readable, Writable } from 'node:stream';
import type { Pipeline, Redirection, Segment } from '../security/commands.ts';

/** How a command ended: its exit code, or the signal that killed it. */
export type ExitStatus = { readonly code: number } | { readonly signal: NodeJS.Signals };

/** A command ready to spawn: the exact argv that was checked, and its redirections. */
export interface PreparedCommand {
  readonly argv: readonly string[];
  readonly redirections: readonly Redirection[];
}

export type ListOutcome = { readonly kind: 'done'; readonly status: ExitStatus } | { readonly kind: 'refused'; readonly reason: string };

export interface RunListOptions {
  /** Directory the list starts in (and where a bare `cd` goes). */
  readonly root: string;
  readonly env: Readonly<Record<string, string>>;
  /** Receives stdout of each pipeline's last command and every stderr, unless redirected. */
  readonly output: (chunk: Buffer) => void;
  /** Aborting kills every running process and runs nothing more. */
  readonly signal: AbortSignal;
  /** Largest file any process may write (RLIMIT_FSIZE, rounded down to 512-byte blocks). @default no limit */
  readonly maxFileBytes?: number;
  /** Expands and checks a command right before it runs; a refusal stops the list. */
  prepare(segment: Segment, cwd: string): Promise<PreparedCommand | { readonly refused: string }>;
  /** The `cd` builtin: the new directory, or a message for stderr. */
  changeDirectory(args: readonly string[], cwd: string): Promise<{ readonly cwd: string } | { readonly error: string }>;
}

/** After a process exits, how long stray holders of its pipes get before they are closed. */
const CLOSE_GRACE_MS = 1000;

/** Runs `pipelines` in order, honouring `&&`/`||`; the status is the last pipeline's that ran. */
export async function runList(pipelines: readonly Pipeline[], options: RunListOptions): Promise<ListOutcome> {
  let cwd = options.root;
  let status: ExitStatus = { code: 0 };
  for (const pipeline of pipelines) {
    if (options.signal.aborted) break;
    const succeeded = 'code' in status && status.code === 0;
    if ((pipeline.connector === '&&' && !succeeded) || (pipeline.connector === '||' && succeeded)) continue;
    const [first] = pipeline.commands;
    if (pipeline.commands.length === 1 && first?.words[0]?.text === 'cd') {
      const moved = await options.changeDirectory(first.words.slice(1).map((w) => w.text), cwd);
      if ('cwd' in moved) cwd = moved.cwd;
      else if (streamTargets(first.redirections, true).err !== 'null') options.output(Buffer.from(`${moved.error}\n`));
      status = { code: 'cwd' in moved ? 0 : 1 };
      continue;
    }
    const prepared: PreparedCommand[] = [];
    for (const command of pipeline.commands) {
      const ready = await options.prepare(command, cwd);
      if ('refused' in ready) return { kind: 'refused', reason: ready.refused };
      prepared.push(ready);
    }
    if (options.signal.aborted) break;
    status = await runPipeline(prepared, cwd, options);
  }
  return { kind: 'done', status };
}

/** Where a command's stdout and stderr go: the next command's stdin, the collected output, or nowhere. */
type Target = 'next' | 'output' | 'null';

/** Applies redirections in order, as sh does: `2>&1 >/dev/null` keeps stderr, `>/dev/null 2>&1` drops both. */
export function streamTargets(redirections: readonly Redirection[], last: boolean): { out: Target; err: Target } {
  const fds: Record<1 | 2, Target> = { 1: last ? 'output' : 'next', 2: 'output' };
  for (const { fd, to } of redirections) fds[fd] = to === 'null' ? 'null' : fds[to];
  return { out: fds[1], err: fds[2] };
}

/** Spawns every command of a pipeline at once, wires them, and waits for all; the status is the last one's. */
async function runPipeline(commands: readonly PreparedCommand[], cwd: string, options: RunListOptions): Promise<ExitStatus> {
  const targets = commands.map((command, i) => streamTargets(command.redirections, i === commands.length - 1));
  const children = commands.map((command, i) => launch(command.argv, cwd, options.env, i > 0, targets[i]!, options.maxFileBytes));
  const killAll = (): void => children.forEach((child) => killGroup(child));
  options.signal.addEventListener('abort', killAll, { once: true });
  try {
    children.forEach((child, i) => {
      const sources: Readable[] = [];
      for (const [stream, target] of [[child.stdout, targets[i]!.out], [child.stderr, targets[i]!.err]] as const) {
        if (stream === null) continue;
        if (target === 'next') sources.push(stream);
        else stream.on('data', options.output);
      }
      const consumer = children[i + 1]?.stdin;
      if (consumer) feed(sources, consumer, child);
    });
    const statuses = await Promise.all(children.map((child, i) => settle(child, commands[i]!.argv[0]!, options.output)));
    return statuses.at(-1)!;
  } finally {
    options.signal.removeEventListener('abort', killAll);
  }
}

/**
 * Sets RLIMIT_FSIZE (soft and hard, so the program cannot raise it) and then becomes the
 * program: Node cannot set a child's limits, and sh's `ulimit` can. The argv travel as
 * positional parameters ("$@"), never as script text, so nothing is parsed again. A program
 * that is not there is reported as before (exit 127, "<name>: command not found").
 */
const LIMITED = 'ulimit -f "$1" || exit 126; shift; command -v "$1" >/dev/null 2>&1 || { printf "%s: command not found\\n" "$1" >&2; exit 127; }; exec "$@"';

function launch(argv: readonly string[], cwd: string, env: Readonly<Record<string, string>>, piped: boolean, to: { out: Target; err: Target }, maxFileBytes: number | undefined): ChildProcess {
  const [program, args] =
    maxFileBytes === undefined ? [argv[0]!, argv.slice(1)] : ['/bin/sh', ['-c', LIMITED, 'sh', String(Math.max(1, Math.floor(maxFileBytes / 512))), ...argv]];
  return spawn(program, args, {
    cwd,
    env,
    shell: false, // the argv that was checked is the argv that runs
    detached: true, // own process group, so a timeout kills whatever it started too
    stdio: [piped ? 'pipe' : 'ignore', to.out === 'null' ? 'ignore' : 'pipe', to.err === 'null' ? 'ignore' : 'pipe'],
  });
}

/**
 * Pipes `sources` (stdout/stderr of `writer`) into `consumer`, ending it when all have ended.
 * If the consumer goes away first, the writer's group gets SIGPIPE, as a writer into a closed
 * pipe would under sh (our pipes are sockets, which would report "connection reset" instead).
 */
function feed(sources: readonly Readable[], consumer: Writable, writer: ChildProcess): void {
  consumer.on('error', () => undefined); // EPIPE once the reader has exited; handled by 'close' below
  if (sources.length === 0) {
    consumer.end();
    return;
  }
  let open = sources.length;
  for (const source of sources) {
    source.pipe(consumer, { end: false });
    source.once('close', () => {
      if (--open === 0) consumer.end();
    });
  }
  consumer.once('close', () => {
    if (open === 0) return;
    killGroup(writer, 'SIGPIPE');
    for (const source of sources) {
      source.unpipe(consumer);
      source.destroy();
    }
  });
}

/** Waits for a process to end: its exit, then its pipes closing (or a short grace). A failure to start is status 127/126 with a message, as in sh. */
function settle(child: ChildProcess, program: string, output: (chunk: Buffer) => void): Promise<ExitStatus> {
  return new Promise((resolve) => {
    let exit: ExitStatus | undefined;
    let grace: NodeJS.Timeout | undefined;
    const done = (status: ExitStatus): void => {
      clearTimeout(grace);
      resolve(status);
    };
    child.once('error', (error: NodeJS.ErrnoException) => {
      if (exit !== undefined || child.pid !== undefined) return;
      const missing = error.code === 'ENOENT';
      output(Buffer.from(`${program}: ${missing ? 'command not found' : `cannot run (${error.message})`}\n`));
      child.stdin?.destroy();
      child.stdout?.destroy();
      child.stderr?.destroy();
      done({ code: missing ? 127 : 126 });
    });
    child.once('exit', (code, signal) => {
      exit = code !== null ? { code } : { signal: signal ?? 'SIGKILL' };
      killGroup(child); // nothing the command started outlives it
      child.stdin?.destroy(); // its writer learns at once that nobody reads any more
      grace = setTimeout(() => {
        child.stdout?.destroy();
        child.stderr?.destroy();
        done(exit!);
      }, CLOSE_GRACE_MS);
    });
    child.once('close', () => {
      if (exit !== undefined) done(exit);
    });
  });
}

function killGroup(child: ChildProcess, signal: NodeJS.Signals = 'SIGKILL'): void {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, signal);
  } catch {
    // the group is already gone
  }
}
