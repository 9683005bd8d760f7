/**
 * Workspace sandbox for paths. Every path a tool touches goes through `resolveInWorkspace`,
 * which answers with the real (symlink-free) absolute path to use, or a sentence the model
 * can act on. Tools then operate on the returned path, never on the path they were given,
 * so a symlink inside the workspace cannot redirect the operation after the check.
 */
import { lstat, readlink, realpath } from 'node:fs/promises';
import { basename, dirname, isAbsolute, join, relative, resolve, sep } from 'node:path';

export type PathResolution = { readonly ok: true; readonly path: string } | { readonly ok: false; readonly error: string };

const HINT = 'use a path relative to the workspace, e.g. notes/todo.md';

/**
 * Locations no tool may touch even when the workspace contains them (a workspace of `/`).
 * A prefix that contains the workspace itself (say `/root` for `/root/ws`) is not refused:
 * the workspace check already keeps everything outside the workspace out.
 */
const SYSTEM_PREFIXES = ['/proc', '/sys', '/dev', '/etc', '/boot', '/root', '/run', '/var/run', '/bin', '/sbin', '/lib', '/lib64', '/usr/bin', '/usr/sbin', '/usr/lib'];
/** Never acceptable as a workspace or inside one, whatever the layout. */
const ALWAYS_REFUSED = ['/proc', '/sys', '/dev'];

const MAX_SYMLINK_HOPS = 40;

/**
 * Resolves `userPath` (relative to the workspace, or absolute but inside it) to a real path
 * inside the workspace. Refuses NUL bytes, percent-encoded dots and separators, `~`,
 * `..` escapes, absolute paths outside the workspace, symlinks that lead outside (also for a
 * file that does not exist yet under a symlinked directory, or a dangling symlink) and system
 * locations such as /proc and /etc.
 *
 * @example await resolveInWorkspace('/srv/ws', 'notes/todo.md') // { ok: true, path: '/srv/ws/notes/todo.md' }
 */
export async function resolveInWorkspace(workspace: string, userPath: string): Promise<PathResolution> {
  if (typeof userPath !== 'string' || userPath.trim() === '') return refuse(`the path is empty; ${HINT}.`);
  if (userPath.includes('\0')) return refuse(`the path contains a NUL byte; ${HINT}.`);
  if (/%(2e|2f|5c|00)/i.test(userPath)) {
    return refuse(`the path contains percent-encoded characters (%2e, %2f, %5c); write it literally and ${HINT}.`);
  }
  if (userPath.startsWith('~')) return refuse(`"~" (a home directory) is outside the workspace; ${HINT}.`);
  const root = await workspaceRoot(workspace);
  if (!root.ok) return root;
  if (isAbsolute(userPath)) {
    const absolute = resolve(userPath);
    if (!isInside(resolve(workspace), absolute) && !isInside(root.path, absolute)) {
      return refuse(`the absolute path ${userPath} is outside the workspace; ${HINT}.`);
    }
    const system = systemLocation(absolute, root.path);
    if (system !== undefined) return refuse(systemMessage(system));
    return resolveInside(root.path, isInside(root.path, absolute) ? absolute : join(root.path, relative(resolve(workspace), absolute)));
  }
  const lexical = resolve(root.path, userPath);
  if (!isInside(root.path, lexical)) return refuse(`the path escapes the workspace; ${HINT}.`);
  return resolveInside(root.path, lexical);
}

/**
 * The symlink and system-location check alone, for an absolute path already known to be
 * lexically inside `root` (a real path). Used by the shell tool for command arguments, where
 * percent signs and the like are ordinary text.
 */
export async function resolveInside(root: string, absolute: string): Promise<PathResolution> {
  if (!isInside(root, absolute)) return refuse(`the path escapes the workspace; ${HINT}.`);
  let real: string;
  try {
    real = await realpathLoose(absolute, 0);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ELOOP') return refuse('the path is a loop of symbolic links; use a different path inside the workspace.');
    return refuse(`the path cannot be resolved (${(error as Error).message}); ${HINT}.`);
  }
  if (!isInside(root, real)) {
    return refuse('the path leads outside the workspace through a symbolic link; use a path inside the workspace that does not go through that link.');
  }
  const system = systemLocation(real, root);
  if (system !== undefined) return refuse(systemMessage(system));
  return { ok: true, path: real };
}

/** The workspace's real path (so a workspace under a symlink, like macOS /tmp, still works). */
export async function workspaceRoot(workspace: string): Promise<PathResolution> {
  if (!isAbsolute(workspace)) return refuse(`the workspace ${workspace} is not an absolute path; fix [security] workspace in the config.`);
  try {
    return { ok: true, path: await realpath(workspace) };
  } catch {
    return refuse(`the workspace ${workspace} does not exist; create it or fix [security] workspace in the config.`);
  }
}

/** True when `child` is `parent` or below it (both absolute and normalized). */
export function isInside(parent: string, child: string): boolean {
  const rel = relative(parent, child);
  return rel === '' || (!rel.startsWith('..' + sep) && rel !== '..' && !isAbsolute(rel));
}

/** The system prefix `path` falls under, unless that prefix holds the workspace itself. */
export function systemLocation(path: string, workspace: string): string | undefined {
  for (const prefix of SYSTEM_PREFIXES) {
    if (!isInside(prefix, path)) continue;
    if (!ALWAYS_REFUSED.includes(prefix) && isInside(prefix, workspace)) continue;
    return prefix;
  }
  return undefined;
}

/**
 * realpath that also works for paths that do not exist yet: the longest existing prefix is
 * resolved and the rest appended. A dangling symlink is followed to where it points (a write
 * through it would create its target), so `link -> /etc/new` is caught too.
 */
async function realpathLoose(path: string, hops: number): Promise<string> {
  if (hops > MAX_SYMLINK_HOPS) throw Object.assign(new Error('too many symbolic links'), { code: 'ELOOP' });
  try {
    return await realpath(path);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code !== 'ENOENT' && code !== 'ENOTDIR') throw error;
  }
  const stats = await lstat(path).catch(() => undefined);
  if (stats?.isSymbolicLink() === true) {
    return realpathLoose(resolve(dirname(path), await readlink(path)), hops + 1);
  }
  const parent = dirname(path);
  if (parent === path) return path;
  return join(await realpathLoose(parent, hops), basename(path));
}

function systemMessage(prefix: string): string {
  return `${prefix} is a system location that tools may not touch; ${HINT}.`;
}

function refuse(error: string): PathResolution {
  return { ok: false, error };
}
