/**
 * Search tools: `glob` (file names) and `grep` (file contents), both confined to the workspace.
 * grep matches in a worker thread with a time limit, so a catastrophic regular expression
 * such as `(a+)+$` costs one worker, not the daemon's event loop.
 */
import { glob as fsGlob, lstat, readdir } from 'node:fs/promises';
import { basename, join, matchesGlob, relative } from 'node:path';
import { Worker } from 'node:worker_threads';
import { resolveInWorkspace, resolveInside, workspaceRoot } from '../security/paths.ts';
import type { SecurityPolicy } from '../security/policy.ts';
import { ok, toolError, type Tool, type ToolResult } from '../tool.ts';

/** Most names glob returns. */
export const MAX_GLOB_RESULTS = 500;
/** Most matching lines grep returns. */
export const MAX_GREP_MATCHES = 200;
/** Files larger than this are skipped by grep. */
export const MAX_GREP_FILE_BYTES = 1024 * 1024;
/** Most files grep looks at in one call. */
const MAX_GREP_FILES = 20_000;
/** Folders skipped unless the search names them. */
const SKIPPED_DIRS = new Set(['.git', 'node_modules']);

export interface GlobArgs {
  readonly pattern: string;
}

export interface GrepArgs {
  readonly pattern: string;
  readonly path?: string;
  readonly glob?: string;
  readonly ignore_case?: boolean;
}

/** `glob`: workspace files whose path matches a pattern such as `src/**\/*.ts`. */
export function createGlobTool(policy: SecurityPolicy): Tool<GlobArgs> {
  return {
    name: 'glob',
    description: `Lists files in the workspace whose relative path matches a glob pattern, e.g. "**/*.md" or "src/*.ts" (at most ${MAX_GLOB_RESULTS}). .git and node_modules are skipped unless named.`,
    parameters: {
      type: 'object',
      properties: { pattern: { type: 'string', description: 'Glob relative to the workspace, e.g. "**/*.ts"' } },
      required: ['pattern'],
      additionalProperties: false,
    },
    assess: (args) => ({ risk: 'low', mutates: false, summary: `glob: ${String(args.pattern)}` }),
    async execute(args) {
      const pattern = String(args.pattern);
      const problem = patternProblem(pattern);
      if (problem !== undefined) return toolError(problem);
      const root = await workspaceRoot(policy.workspace);
      if (!root.ok) return toolError(root.error);
      const skip = skippedDirs(pattern);
      const found: string[] = [];
      let outside = 0;
      let capped = false;
      for await (const match of fsGlob(pattern, { cwd: root.path, exclude: (name: string) => skip.has(basename(name)) })) {
        const inside = await resolveInside(root.path, join(root.path, match));
        if (!inside.ok) {
          outside++;
          continue;
        }
        if (found.length === MAX_GLOB_RESULTS) {
          capped = true;
          break;
        }
        found.push(match);
      }
      found.sort();
      const notes: string[] = [];
      if (capped) notes.push(`[stopped at ${MAX_GLOB_RESULTS} names; use a narrower pattern]`);
      if (outside > 0) notes.push(`[${outside} names left out: they lead outside the workspace through symbolic links]`);
      if (found.length === 0) return ok([`No files match ${pattern}.`, ...notes].join('\n'));
      return ok(capBytes([...found, ...notes].join('\n'), policy.maxOutputBytes));
    },
  };
}

/** `grep`: lines matching a JavaScript regular expression, as `path:line: text`. */
export function createGrepTool(policy: SecurityPolicy): Tool<GrepArgs> {
  return {
    name: 'grep',
    description:
      `Searches file contents in the workspace for a JavaScript regular expression and returns "path:line: text" for each match (at most ${MAX_GREP_MATCHES}). ` +
      'Binary files, files over 1 MiB, .git and node_modules are skipped.',
    parameters: {
      type: 'object',
      properties: {
        pattern: { type: 'string', description: 'JavaScript regular expression, e.g. "TODO|FIXME"' },
        path: { type: 'string', description: 'File or folder to search, relative to the workspace; default the whole workspace' },
        glob: { type: 'string', description: 'Only files whose name (or relative path, if it has a /) matches, e.g. "*.ts"' },
        ignore_case: { type: 'boolean', description: 'Match regardless of case; default false' },
      },
      required: ['pattern'],
      additionalProperties: false,
    },
    assess: (args) => ({ risk: 'low', mutates: false, summary: `grep: ${String(args.pattern)}${args.path === undefined ? '' : ` in ${String(args.path)}`}` }),
    async execute(args, ctx) {
      const pattern = String(args.pattern);
      const flags = args.ignore_case === true ? 'i' : '';
      try {
        new RegExp(pattern, flags);
      } catch (error) {
        return toolError(`The pattern is not a valid JavaScript regular expression (${(error as Error).message}); escape special characters such as ( [ . with a backslash.`);
      }
      if (args.glob !== undefined) {
        const problem = patternProblem(String(args.glob));
        if (problem !== undefined) return toolError(problem.replace('The pattern', 'The glob'));
      }
      const root = await workspaceRoot(policy.workspace);
      if (!root.ok) return toolError(root.error);
      const start = await resolveInWorkspace(root.path, args.path === undefined ? '.' : String(args.path));
      if (!start.ok) return toolError(`Cannot search ${JSON.stringify(String(args.path))}: ${start.error}`);
      const files = await collectFiles(root.path, start.path, args.glob === undefined ? undefined : String(args.glob));
      if (typeof files === 'string') return toolError(files);
      if (files.list.length === 0) return ok('No files to search there.');
      const outcome = await matchInWorker({ root: root.path, files: files.list, pattern, flags, maxMatches: MAX_GREP_MATCHES, maxBytes: policy.maxOutputBytes, maxFileBytes: MAX_GREP_FILE_BYTES }, policy.commandTimeoutMs, ctx.signal);
      if ('error' in outcome) return outcome.error;
      const notes: string[] = [];
      if (outcome.capped) notes.push(`[stopped at ${outcome.lines.length} matches; narrow the pattern, path or glob]`);
      if (files.capped) notes.push(`[only the first ${MAX_GREP_FILES} files were searched; pass a path or glob]`);
      if (outcome.lines.length === 0) return ok([`No matches for /${pattern}/${flags} in ${files.list.length} files.`, ...notes].join('\n'));
      return ok([...outcome.lines, ...notes].join('\n'));
    },
  };
}

/** Why a glob pattern is refused, or undefined: absolute, `~`, `..`, NUL, percent-encoding. */
function patternProblem(pattern: string): string | undefined {
  if (pattern.trim() === '') return 'The pattern is empty; use e.g. "**/*.md".';
  if (pattern.includes('\0')) return 'The pattern contains a NUL byte; use e.g. "**/*.md".';
  if (pattern.startsWith('/') || /^[A-Za-z]:[\\/]/.test(pattern)) return 'The pattern must be relative to the workspace, not absolute; use e.g. "src/**/*.ts".';
  if (pattern.startsWith('~')) return 'The pattern must be relative to the workspace ("~" is outside it); use e.g. "notes/*.md".';
  if (pattern.split(/[\\/]/).includes('..')) return 'The pattern may not contain ".." (it would leave the workspace); use e.g. "**/*.md".';
  if (/%(2e|2f|5c|00)/i.test(pattern)) return 'The pattern contains percent-encoded characters; write them literally.';
  return undefined;
}

function skippedDirs(searchText: string): Set<string> {
  return new Set([...SKIPPED_DIRS].filter((name) => !searchText.split(/[\\/]/).includes(name)));
}

/** Files under `start` (a file or folder), symlinks allowed only to files inside the workspace. */
async function collectFiles(root: string, start: string, glob: string | undefined): Promise<{ list: string[]; capped: boolean } | string> {
  const stats = await lstat(start).catch(() => undefined);
  const shown = relative(root, start) || '.';
  if (stats === undefined) return `${shown} does not exist; use glob to find files.`;
  if (!stats.isDirectory()) return { list: [start], capped: false };
  const skip = skippedDirs(relative(root, start));
  const list: string[] = [];
  const wanted = (file: string): boolean =>
    glob === undefined || (glob.includes('/') ? matchesGlob(relative(root, file), glob) : matchesGlob(basename(file), glob));
  const walk = async (dir: string): Promise<boolean> => {
    const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
    entries.sort((a, b) => (a.name < b.name ? -1 : 1));
    for (const entry of entries) {
      const full = join(dir, entry.name);
      if (entry.isDirectory()) {
        if (skip.has(entry.name)) continue;
        if (!(await walk(full))) return false;
      } else if (entry.isFile() || entry.isSymbolicLink()) {
        if (!wanted(full)) continue;
        if (entry.isSymbolicLink()) {
          const target = await resolveInside(root, full);
          const targetStats = target.ok ? await lstat(target.path).catch(() => undefined) : undefined;
          if (targetStats?.isFile() !== true) continue; // outside, dangling, or a folder (no loops)
        }
        if (list.length === MAX_GREP_FILES) return false;
        list.push(full);
      }
    }
    return true;
  };
  const complete = await walk(start);
  return { list, capped: !complete };
}

interface MatchJob {
  readonly root: string;
  readonly files: readonly string[];
  readonly pattern: string;
  readonly flags: string;
  readonly maxMatches: number;
  readonly maxBytes: number;
  readonly maxFileBytes: number;
}

/** Plain JavaScript run with `eval` so it works from .ts sources and from the build alike. */
const WORKER_SOURCE = `
const { parentPort, workerData: job } = require('node:worker_threads');
const fs = require('node:fs');
const path = require('node:path');
const re = new RegExp(job.pattern, job.flags);
const lines = [];
let bytes = 0;
let capped = false;
outer: for (const file of job.files) {
  let buffer;
  try {
    if (fs.statSync(file).size > job.maxFileBytes) continue;
    buffer = fs.readFileSync(file);
  } catch { continue; }
  if (buffer.subarray(0, 8000).includes(0)) continue;
  const rel = path.relative(job.root, file) || path.basename(file);
  const text = buffer.toString('utf8').split('\\n');
  for (let i = 0; i < text.length; i++) {
    if (!re.test(text[i])) continue;
    const shown = text[i].length > 300 ? text[i].slice(0, 300) + '…' : text[i];
    const line = rel + ':' + (i + 1) + ': ' + shown.replace(/\\r$/, '');
    bytes += Buffer.byteLength(line) + 1;
    if (lines.length === job.maxMatches || bytes > job.maxBytes) { capped = true; break outer; }
    lines.push(line);
  }
}
parentPort.postMessage({ lines, capped });
`;

function matchInWorker(job: MatchJob, timeoutMs: number, signal: AbortSignal): Promise<{ lines: string[]; capped: boolean } | { error: ToolResult }> {
  return new Promise((resolve) => {
    const worker = new Worker(WORKER_SOURCE, { eval: true, workerData: job, resourceLimits: { maxOldGenerationSizeMb: 256 } });
    let done = false;
    const finish = (value: { lines: string[]; capped: boolean } | { error: ToolResult }): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
      void worker.terminate();
      resolve(value);
    };
    const timer = setTimeout(
      () => finish({ error: toolError(`The search took longer than ${Math.round(timeoutMs / 100) / 10} s and was stopped; narrow path or glob, and avoid nested quantifiers such as (a+)+ that make a pattern slow.`) }),
      timeoutMs,
    );
    const onAbort = (): void => finish({ error: toolError('The search was cancelled.') });
    signal.addEventListener('abort', onAbort, { once: true });
    worker.once('message', (value: { lines: string[]; capped: boolean }) => finish(value));
    worker.once('error', (error) => finish({ error: toolError(`The search failed: ${error.message}`) }));
    worker.once('exit', () => finish({ error: toolError('The search stopped unexpectedly.') }));
  });
}

/** Cuts text to `max` bytes at a line boundary, saying so. */
function capBytes(text: string, max: number): string {
  if (Buffer.byteLength(text) <= max) return text;
  const lines = text.split('\n');
  const out: string[] = [];
  let bytes = 0;
  for (const line of lines) {
    bytes += Buffer.byteLength(line) + 1;
    if (bytes > max) break;
    out.push(line);
  }
  return `${out.join('\n')}\n[output cut at ${max} bytes; use a narrower pattern]`;
}
