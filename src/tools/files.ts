/**
 * File tools: `file_read`, `file_write`, `file_edit`. Every path goes through
 * `resolveInWorkspace`, and the file is opened at the resolved real path with O_NOFOLLOW,
 * so a symlink swapped in after the check is not followed either.
 */
import { constants } from 'node:fs';
import { mkdir, open } from 'node:fs/promises';
import { dirname, relative } from 'node:path';
import { deniedReason } from '../security/autonomy.ts';
import { resolveInWorkspace } from '../security/paths.ts';
import type { SecurityPolicy } from '../security/policy.ts';
import { ok, toolError, type Tool, type ToolAssessment, type ToolResult } from '../tool.ts';

/** Largest file file_read and file_edit load (the output is capped separately by maxOutputBytes). */
export const MAX_FILE_BYTES = 10 * 1024 * 1024;
/** Lines longer than this are cut in file_read output. */
const MAX_LINE_CHARS = 2000;
const DEFAULT_LINE_LIMIT = 2000;

export interface FileReadArgs {
  readonly path: string;
  /** First line to show, 1-based. */
  readonly offset?: number;
  /** Most lines to show. */
  readonly limit?: number;
}

export interface FileWriteArgs {
  readonly path: string;
  readonly content: string;
}

export interface FileEditArgs {
  readonly path: string;
  readonly old_string: string;
  readonly new_string: string;
  readonly replace_all?: boolean;
}

const pathProperty = { type: 'string', description: 'Path relative to the workspace, e.g. "notes/todo.md"' };

/** `file_read`: a text file with line numbers, from `offset` for `limit` lines, capped at maxOutputBytes. */
export function createFileReadTool(policy: SecurityPolicy): Tool<FileReadArgs> {
  return {
    name: 'file_read',
    description: 'Reads a text file in the workspace and returns it with line numbers. For long files pass offset (first line, 1-based) and limit (number of lines).',
    parameters: {
      type: 'object',
      properties: {
        path: pathProperty,
        offset: { type: 'integer', minimum: 1, description: 'First line to return (1-based); default 1' },
        limit: { type: 'integer', minimum: 1, description: `Most lines to return; default ${DEFAULT_LINE_LIMIT}` },
      },
      required: ['path'],
      additionalProperties: false,
    },
    assess: (args) => ({ risk: 'low', mutates: false, summary: `file_read: ${String(args.path)}` }),
    async execute(args) {
      const target = await resolveInWorkspace(policy.workspace, String(args.path));
      if (!target.ok) return toolError(`Cannot read ${quote(args.path)}: ${target.error}`);
      const shown = display(policy.workspace, target.path, args.path);
      const loaded = await loadText(target.path, shown);
      if (typeof loaded !== 'string') return loaded;
      if (loaded === '') return ok(`${shown} is empty.`);
      const lines = loaded.split('\n');
      if (lines.at(-1) === '') lines.pop();
      const offset = Math.max(1, Math.floor(args.offset ?? 1));
      const limit = Math.max(1, Math.floor(args.limit ?? DEFAULT_LINE_LIMIT));
      if (offset > lines.length) return toolError(`${shown} has ${lines.length} lines; pass an offset between 1 and ${lines.length}.`);
      const width = String(Math.min(lines.length, offset + limit - 1)).length;
      const out: string[] = [];
      let bytes = 0;
      let last = offset - 1;
      for (let n = offset; n <= lines.length && n < offset + limit; n++) {
        const raw = lines[n - 1]!;
        const line = `${String(n).padStart(width)}\t${raw.length > MAX_LINE_CHARS ? `${raw.slice(0, MAX_LINE_CHARS)}… [line cut]` : raw}`;
        bytes += Buffer.byteLength(line) + 1;
        if (bytes > policy.maxOutputBytes && out.length > 0) break;
        out.push(line);
        last = n;
      }
      if (last < lines.length) out.push(`[showing lines ${offset}–${last} of ${lines.length}; call file_read with offset=${last + 1} to read on]`);
      return ok(out.join('\n'));
    },
  };
}

/** `file_write`: creates or replaces a file (and its parent folders) in the workspace. */
export function createFileWriteTool(policy: SecurityPolicy): Tool<FileWriteArgs> {
  const assess = (args: FileWriteArgs): ToolAssessment => ({
    risk: 'low',
    mutates: true,
    summary: `file_write: ${String(args.path)}`,
  });
  return {
    name: 'file_write',
    description: 'Creates or overwrites a file in the workspace with the given content, creating parent folders as needed.',
    parameters: {
      type: 'object',
      properties: { path: pathProperty, content: { type: 'string', description: 'The complete new content of the file' } },
      required: ['path', 'content'],
      additionalProperties: false,
    },
    assess,
    async execute(args) {
      const denied = deniedReason(policy.autonomy, assess(args));
      if (denied !== undefined) return toolError(denied);
      if (typeof args.content !== 'string') return toolError('content must be a string (the whole new file).');
      if (Buffer.byteLength(args.content) > MAX_FILE_BYTES) return toolError(`content is larger than ${MAX_FILE_BYTES} bytes; write the file in smaller parts.`);
      const target = await resolveInWorkspace(policy.workspace, String(args.path));
      if (!target.ok) return toolError(`Cannot write ${quote(args.path)}: ${target.error}`);
      const shown = display(policy.workspace, target.path, args.path);
      try {
        await mkdir(dirname(target.path), { recursive: true });
        await writeNoFollow(target.path, args.content, true);
      } catch (error) {
        return toolError(`Cannot write ${shown}: ${describe(error)}`);
      }
      const lines = args.content === '' ? 0 : args.content.split('\n').length;
      return ok(`Wrote ${Buffer.byteLength(args.content)} bytes (${lines} lines) to ${shown}.`);
    },
  };
}

/** `file_edit`: replaces an exact string in a file; it must occur once unless `replace_all`. */
export function createFileEditTool(policy: SecurityPolicy): Tool<FileEditArgs> {
  const assess = (args: FileEditArgs): ToolAssessment => ({ risk: 'low', mutates: true, summary: `file_edit: ${String(args.path)}` });
  return {
    name: 'file_edit',
    description:
      'Edits a file in the workspace by replacing old_string with new_string. old_string must match the file exactly (including whitespace) ' +
      'and occur once; include surrounding lines to make it unique, or pass replace_all to replace every occurrence.',
    parameters: {
      type: 'object',
      properties: {
        path: pathProperty,
        old_string: { type: 'string', description: 'The exact text to replace' },
        new_string: { type: 'string', description: 'The text to put in its place' },
        replace_all: { type: 'boolean', description: 'Replace every occurrence; default false' },
      },
      required: ['path', 'old_string', 'new_string'],
      additionalProperties: false,
    },
    assess,
    async execute(args) {
      const denied = deniedReason(policy.autonomy, assess(args));
      if (denied !== undefined) return toolError(denied);
      if (typeof args.old_string !== 'string' || args.old_string === '') return toolError('old_string must not be empty; to create or replace a whole file use file_write.');
      if (typeof args.new_string !== 'string') return toolError('new_string must be a string.');
      if (args.old_string === args.new_string) return toolError('old_string and new_string are the same; nothing would change.');
      const target = await resolveInWorkspace(policy.workspace, String(args.path));
      if (!target.ok) return toolError(`Cannot edit ${quote(args.path)}: ${target.error}`);
      const shown = display(policy.workspace, target.path, args.path);
      const text = await loadText(target.path, shown);
      if (typeof text !== 'string') return text;
      const count = text.split(args.old_string).length - 1;
      if (count === 0) return toolError(`old_string was not found in ${shown}; read the file with file_read and copy the exact text, including whitespace and indentation.`);
      if (count > 1 && args.replace_all !== true) {
        return toolError(`old_string occurs ${count} times in ${shown}; include more surrounding lines so it is unique, or pass replace_all: true to replace all ${count}.`);
      }
      const index = text.indexOf(args.old_string);
      // split/join and slicing, not String.replace: `$&` and friends in new_string stay literal.
      const updated = args.replace_all === true
        ? text.split(args.old_string).join(args.new_string)
        : text.slice(0, index) + args.new_string + text.slice(index + args.old_string.length);
      try {
        await writeNoFollow(target.path, updated, false);
      } catch (error) {
        return toolError(`Cannot write ${shown}: ${describe(error)}`);
      }
      const line = text.slice(0, index).split('\n').length;
      return ok(`Edited ${shown}: replaced ${count === 1 ? '1 occurrence' : `${count} occurrences`} (first at line ${line}).`);
    },
  };
}

/** The file's text, or an error result (missing, a folder, too large, binary). */
async function loadText(path: string, shown: string): Promise<string | ToolResult> {
  let handle;
  try {
    handle = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return toolError(`${shown} does not exist; use glob to find files (e.g. pattern "**/*.md").`);
    return toolError(`Cannot open ${shown}: ${describe(error)}`);
  }
  try {
    const stats = await handle.stat();
    if (stats.isDirectory()) return toolError(`${shown} is a folder; use glob (e.g. pattern "${shown}/*") to list it.`);
    if (!stats.isFile()) return toolError(`${shown} is not a regular file.`);
    if (stats.size > MAX_FILE_BYTES) return toolError(`${shown} is ${stats.size} bytes, over the ${MAX_FILE_BYTES}-byte limit; use grep to find the part you need.`);
    const buffer = await handle.readFile();
    if (buffer.subarray(0, 8000).includes(0)) return toolError(`${shown} looks like a binary file (${buffer.length} bytes); only text files can be read or edited.`);
    return buffer.toString('utf8');
  } catch (error) {
    return toolError(`Cannot read ${shown}: ${describe(error)}`);
  } finally {
    await handle.close();
  }
}

async function writeNoFollow(path: string, content: string, create: boolean): Promise<void> {
  const flags = constants.O_WRONLY | constants.O_TRUNC | constants.O_NOFOLLOW | (create ? constants.O_CREAT : 0);
  const handle = await open(path, flags, 0o644);
  try {
    await handle.writeFile(content, 'utf8');
  } finally {
    await handle.close();
  }
}

/** The path as the model should see it: relative to the workspace. */
function display(workspace: string, real: string, given: unknown): string {
  const rel = relative(workspace, real);
  return rel === '' ? '.' : rel.startsWith('..') ? String(given) : rel;
}

/** A path the model gave, quoted so odd characters (a NUL byte, newlines) show as escapes. */
function quote(path: unknown): string {
  return JSON.stringify(String(path));
}

function describe(error: unknown): string {
  const code = (error as NodeJS.ErrnoException).code;
  switch (code) {
    case 'EISDIR':
      return 'it is a folder.';
    case 'ELOOP':
      return 'it is a symbolic link, which file tools do not follow at that point; use the real path.';
    case 'EACCES':
    case 'EPERM':
      return 'permission denied.';
    case 'ENOSPC':
      return 'the disk is full.';
    default:
      return (error as Error).message;
  }
}
