/**
 * The data_dir and the files in it: created private (directories 0700, files 0600), with a
 * `mkdir -p` that cannot loop, and every file-system problem turned into one paragraph that
 * names the path, the user the process runs as and the fix — the same bar as config errors.
 *
 * Why not `mkdirSync(path, { recursive: true })`: Node's recursive mkdir treats ENOENT as "a
 * parent is missing", creates the parent (EEXIST: fine) and tries the child again. Under
 * /proc, mkdir answers ENOENT although the parent exists, so that retry never ends: a
 * `data_dir` under /proc spun one core forever. Here each missing component is created once,
 * without `recursive`, and any error ends the walk.
 */
import { accessSync, closeSync, constants, lstatSync, mkdirSync, openSync, readFileSync, statSync, type Stats } from 'node:fs';
import { userInfo } from 'node:os';
import { dirname, resolve } from 'node:path';

/**
 * Exit code when a file or directory cannot be created, opened or written at start
 * (EX_CANTCREAT from sysexits.h). Restarting does not help: systemd's unit does not retry it.
 */
export const EXIT_CANTCREAT = 73;

/** Where the path lives, so the fix can name the data_dir (never its parents) and the config file. */
export interface FileContext {
  /** The data_dir: `chown -R` targets it, and a missing one is created for the user. */
  readonly dataDir?: string;
  /** The config file that sets data_dir. */
  readonly configFile?: string;
}

/** A file or directory Switchboard needs cannot be created, opened or written. `message` is the whole explanation. */
export class FileSystemError extends Error {
  /** The path the operation was about. */
  readonly path: string;
  /** The errno code (EACCES, ENOTDIR, EROFS, ENOSPC…), or the SQLite code when there is none. */
  readonly code: string;
  readonly #problem: FileProblem;

  constructor(problem: FileProblem, context: FileContext = {}) {
    super(explain(problem, context));
    this.name = 'FileSystemError';
    this.path = problem.path;
    this.code = problem.code;
    this.#problem = problem;
  }

  /** The same problem, explained with the data_dir and config file in view. */
  in(context: FileContext): FileSystemError {
    return new FileSystemError(this.#problem, context);
  }
}

/** What went wrong, before it is put into words. */
export interface FileProblem {
  /** e.g. "create the directory /srv/data" */
  readonly action: string;
  readonly path: string;
  readonly code: string;
  /** The existing path that stands in the way: the parent that may not be written, the file in place of a directory. */
  readonly blocker?: string;
  /** The operating system's own words, for codes without an explanation here. */
  readonly detail?: string;
}

/**
 * `mkdir -p path`, the last component created with `mode` (intermediate ones as `mkdir -p`
 * makes them), then checked to be a directory this process may write. Never loops; throws
 * {@link FileSystemError}.
 */
export function makeDirectory(path: string, mode = 0o700): void {
  const target = resolve(path);
  const missing: string[] = [];
  let existing = target;
  let stat: Stats | undefined;
  for (;;) {
    try {
      stat = statSync(existing);
      break;
    } catch (error) {
      const code = errnoOf(error);
      // ENOTDIR: a component above is a file; the walk up finds it.
      // EACCES here: a directory above may not be entered.
      if ((code !== 'ENOENT' && code !== 'ENOTDIR') || dirname(existing) === existing) throw problem(error, `create the directory ${target}`, existing, dirname(existing));
      missing.unshift(existing);
      existing = dirname(existing);
    }
  }
  if (!stat.isDirectory()) {
    throw new FileSystemError({ action: `create the directory ${target}`, path: missing[0] ?? target, code: 'ENOTDIR', blocker: existing });
  }
  for (const [index, dir] of missing.entries()) {
    try {
      mkdirSync(dir, index === missing.length - 1 ? { mode } : {});
    } catch (error) {
      const code = errnoOf(error);
      if (code === 'EEXIST' && isDirectory(dir)) continue; // made by someone else meanwhile
      if (code === 'EEXIST') throw new FileSystemError({ action: `create the directory ${target}`, path: dir, code: 'ENOTDIR', blocker: dir });
      // ENOENT although the parent exists: a file system that does not take new directories (/proc).
      if (code === 'ENOENT') throw new FileSystemError({ action: `create the directory ${target}`, path: dir, code: 'EVIRTUAL', blocker: dirname(dir) });
      throw problem(error, `create the directory ${target}`, dir, dirname(dir));
    }
  }
  try {
    accessSync(target, constants.W_OK | constants.X_OK);
  } catch (error) {
    throw problem(error, `write in ${target}`, target, target);
  }
}

/**
 * Creates `path` as an empty file readable and writable by this user only (0600), unless it
 * exists. SQLite gives a database's -wal and -shm files the mode of the database file, so
 * calling this before opening one keeps all three private.
 */
export function createPrivateFile(path: string): void {
  try {
    closeSync(openSync(path, 'wx', 0o600));
  } catch (error) {
    if (errnoOf(error) !== 'EEXIST') throw problem(error, `create ${path}`, path, dirname(path));
  }
}

/**
 * Turns an error from opening `path` (an errno error from node:fs, or better-sqlite3's
 * SQLITE_CANTOPEN / SQLITE_READONLY / SQLITE_FULL…) into a {@link FileSystemError}; any
 * other error is returned as it is.
 * @example try { db = new Database(file) } catch (error) { throw fileSystemError(error, `open the database ${file}`, file) }
 */
export function fileSystemError(error: unknown, action: string, path: string): unknown {
  if (error instanceof FileSystemError) return error;
  const errno = errnoOf(error);
  if (errno !== undefined && errno !== 'ENOENT' && knownErrno.has(errno)) {
    const at = typeof (error as { path?: unknown }).path === 'string' ? (error as { path: string }).path : path;
    return problem(error, action, at, existsQuietly(at) ? at : dirname(at));
  }
  const sqlite = (error as { code?: unknown } | null)?.code;
  if (typeof sqlite !== 'string' || !/^SQLITE_(CANTOPEN|READONLY|PERM|FULL|IOERR)/.test(sqlite)) return error;
  if (sqlite.startsWith('SQLITE_FULL')) return new FileSystemError({ action, path, code: 'ENOSPC' });
  // SQLite does not say why; ask the file system what this process may not do.
  const cause = accessProblem(path);
  if (cause) return new FileSystemError({ action, path: cause.path, code: cause.code, blocker: cause.path });
  return new FileSystemError({ action, path, code: sqlite, detail: error instanceof Error ? error.message : String(error) });
}

/**
 * Runs `work` (which creates or opens files of the data_dir) and explains any file-system
 * problem it throws with `context` in view; other errors pass through unchanged.
 */
export function withFileContext<T>(context: FileContext, work: () => T): T {
  try {
    return work();
  } catch (error) {
    throw explainIn(error, context);
  }
}

/** {@link fileSystemError} for an error about something in the data_dir, explained with `context` in view. */
export function explainIn(error: unknown, context: FileContext, action = `use ${context.dataDir ?? 'the data_dir'}`): unknown {
  const converted = fileSystemError(error, action, context.dataDir ?? '.');
  return converted instanceof FileSystemError ? converted.in(context) : converted;
}

/** Codes explained below; others keep the operating system's words. */
const knownErrno = new Set(['EACCES', 'EPERM', 'ENOTDIR', 'EEXIST', 'EROFS', 'ENOSPC', 'EDQUOT', 'ELOOP', 'ENAMETOOLONG', 'EISDIR', 'EMFILE', 'ENFILE', 'EIO']);

function problem(error: unknown, action: string, path: string, blocker?: string): FileSystemError {
  const code = errnoOf(error) ?? 'EUNKNOWN';
  return new FileSystemError({ action, path, code, ...(blocker === undefined ? {} : { blocker }), detail: error instanceof Error ? error.message : String(error) });
}

/** The first of the file, its -wal / -shm companions and its directory that this process may not write. */
function accessProblem(file: string): { path: string; code: string } | undefined {
  for (const path of [file, `${file}-wal`, `${file}-shm`]) {
    if (!existsQuietly(path)) continue;
    try {
      accessSync(path, constants.R_OK | constants.W_OK);
    } catch (error) {
      return { path, code: errnoOf(error) ?? 'EACCES' };
    }
  }
  try {
    accessSync(dirname(file), constants.W_OK | constants.X_OK);
  } catch (error) {
    return { path: dirname(file), code: errnoOf(error) ?? 'EACCES' };
  }
  return undefined;
}

function errnoOf(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^E[A-Z]+$/.test(code) ? code : undefined;
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

function existsQuietly(path: string): boolean {
  try {
    lstatSync(path);
    return true;
  } catch {
    return false;
  }
}

/** "nobody (uid 65534)"; a uid without a passwd entry (a container) is just "uid 1000". */
function whoAmI(): { name: string; text: string } {
  const uid = process.getuid?.() ?? -1;
  try {
    const name = userInfo().username;
    return { name, text: `${name} (uid ${uid})` };
  } catch {
    return { name: String(uid), text: `uid ${uid}` };
  }
}

/** "root, mode 755" for the path's owner and permissions, from /etc/passwd when it names the owner. */
function ownerAndMode(path: string): string {
  let stat: Stats;
  try {
    stat = statSync(path);
  } catch {
    return '';
  }
  let owner = `uid ${stat.uid}`;
  try {
    const line = readFileSync('/etc/passwd', 'utf8')
      .split('\n')
      .find((entry) => entry.split(':')[2] === String(stat.uid));
    if (line) owner = line.split(':')[0]!;
  } catch {
    // no /etc/passwd: the uid it is
  }
  return ` (owned by ${owner}, mode ${(stat.mode & 0o777).toString(8)})`;
}

/** The paragraph: what failed and why, who we are, and what to do. */
function explain(problem: FileProblem, context: FileContext): string {
  const { action, path, code } = problem;
  const blocker = problem.blocker ?? path;
  const me = whoAmI();
  const moveTo = (where: string): string => (context.configFile ? `set data_dir in ${context.configFile} to ${where}` : `set data_dir to ${where}`);
  const dataDir = context.dataDir;
  const inDataDir = dataDir !== undefined && (blocker === dataDir || blocker.startsWith(`${dataDir}/`));
  switch (code) {
    case 'EACCES':
    case 'EPERM': {
      if (code === 'EPERM' && me.name === 'root') {
        return `Cannot ${action}: ${blocker} does not allow it even for root (EPERM: a virtual file system such as /sys, or an immutable file). Fix: ${moveTo('a directory on an ordinary disk (e.g. /var/lib/switchboard or ./data)')}.`;
      }
      const fix =
        inDataDir || (dataDir === undefined && existsQuietly(blocker))
          ? `sudo chown -R ${me.name} ${inDataDir ? dataDir : blocker} (everything in the data_dir must belong to the user Switchboard runs as)`
          : dataDir !== undefined
            ? `sudo install -d -o ${me.name} -m 700 ${dataDir} (creates the data_dir for that user)`
            : `give ${me.name} write access to ${blocker}`;
      return `Cannot ${action}: permission denied (${code}). Switchboard runs as ${me.text}, who may not write ${blocker}${ownerAndMode(blocker)}. Fix: ${fix}, or ${moveTo(`a directory ${me.name} may write`)}.`;
    }
    case 'ENOTDIR':
    case 'EEXIST':
      return `Cannot ${action}: ${blocker} is a file, not a directory${blocker === path ? '' : `, so ${path} cannot be made in it`} (${code}). Fix: move ${blocker} out of the way, or ${moveTo('another path')}.`;
    case 'EVIRTUAL':
      return `Cannot ${action}: ${blocker} does not take new directories (mkdir answers ENOENT there: a virtual file system such as /proc). Fix: ${moveTo('a directory on an ordinary disk (e.g. /var/lib/switchboard or ./data)')}.`;
    case 'EROFS':
      return `Cannot ${action}: ${blocker} is on a read-only file system (EROFS). Fix: ${moveTo('a writable directory')} — under systemd /var/lib/switchboard (the unit's StateDirectory) or a path in ReadWritePaths= (switchboard service install adds data_dir there); in Docker a volume mounted at /data.`;
    case 'ENOSPC':
    case 'EDQUOT':
      return `Cannot ${action}: no space left on the file system of ${blocker} (${code === 'EDQUOT' ? `EDQUOT: the disk quota of ${me.text}` : code}). Fix: free some space (df -h ${blocker}), or ${moveTo('a directory on another disk')}.`;
    case 'ELOOP':
      return `Cannot ${action}: ${blocker} is a loop of symbolic links (ELOOP). Fix: repair the link (ls -l ${blocker}), or ${moveTo('another path')}.`;
    default:
      return `Cannot ${action}: ${problem.detail ?? code} (${code}). Switchboard runs as ${me.text}. Fix: check ${blocker}, or ${moveTo('another path')}.`;
  }
}
