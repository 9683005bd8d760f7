/**
 * Builds a Dockerfile's image without Docker: every stage gets a directory that stands for its
 * root file system, and its instructions run there in order, as the Dockerfile says —
 * WORKDIR, ENV, COPY (from the build context or, with --from, from an earlier stage's root)
 * and RUN (with `sh -c` in the stage's working directory, absolute paths mapped under that
 * stage's root). The build context is what `docker build` would send from a fresh clone: the
 * files git knows (tracked and not ignored), less what .dockerignore excludes.
 *
 * What cannot be done here without a Docker engine or root, and what stands in for it:
 * * the base image (node:24-bookworm-slim) is this machine with this test's Node 24 first in
 *   PATH — the image's Node major version;
 * * `npm ci` (no network in tests) copies the dependencies `npm ci` would install from
 *   package-lock.json out of the checkout's node_modules (exactly the lock's packages, at its
 *   versions; anything else is removed), leaving out what its --omit flags omit, and runs the root `prepare` script unless
 *   --ignore-scripts is given, as npm ci does. Every other npm command (`npm run build`,
 *   `npm prune`) is the real npm, offline;
 * * `chown` (needs root) is recorded, not done; USER, VOLUME, EXPOSE and HEALTHCHECK are
 *   recorded for the test to check.
 * Docker's COPY semantics used here: a directory source copies its contents into the
 * destination; a destination ending in "/" (or several sources) is a directory; wildcards and
 * URLs are refused (the Dockerfile has none).
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, cpSync, existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, realpathSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, posix, resolve } from 'node:path';

export interface Instruction {
  /** Upper-case keyword: FROM, RUN, COPY, … */
  readonly keyword: string;
  /** Everything after the keyword, continuation lines joined. */
  readonly args: string;
}

export interface Stage {
  readonly image: string;
  readonly name: string | undefined;
  readonly instructions: readonly Instruction[];
}

/** Splits a Dockerfile into stages; comments dropped, `\` continuation lines joined. */
export function parseDockerfile(text: string): Stage[] {
  const lines = text
    .split('\n')
    .filter((line) => !line.trimStart().startsWith('#'))
    .join('\n')
    .replace(/\\\n/g, ' ')
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '');
  const stages: Array<{ image: string; name: string | undefined; instructions: Instruction[] }> = [];
  for (const line of lines) {
    const keyword = line.split(/\s+/)[0]!;
    const instruction = { keyword: keyword.toUpperCase(), args: line.slice(keyword.length).trim() };
    if (instruction.keyword === 'FROM') {
      const [image, as, name] = instruction.args.split(/\s+/);
      stages.push({ image: image!, name: as?.toUpperCase() === 'AS' ? name : undefined, instructions: [] });
      continue;
    }
    if (stages.length === 0) throw new Error(`Dockerfile: ${keyword} before the first FROM`);
    stages.at(-1)!.instructions.push(instruction);
  }
  return stages;
}

/** A JSON-array (exec form) argument list, or undefined for the shell form. */
export function execForm(args: string): string[] | undefined {
  if (!args.startsWith('[')) return undefined;
  return JSON.parse(args) as string[];
}

/** Files of a fresh clone of `repo` (tracked + untracked-but-not-ignored), as repository paths. */
export function cloneFiles(repo: string): string[] {
  return execFileSync('git', ['-C', repo, 'ls-files', '-z', '--cached', '--others', '--exclude-standard'], { encoding: 'utf8' })
    .split('\0')
    .filter((path) => path !== '' && existsSync(join(repo, path)));
}

/**
 * Docker's .dockerignore rules: each pattern (Go filepath.Match, plus `**`) is matched against
 * the path relative to the context root and against each of its parent directories; a later
 * `!pattern` re-includes. Returns a predicate "is this path sent".
 */
export function dockerignore(text: string): (path: string) => boolean {
  const rules = text
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('#'))
    .map((line) => {
      const negate = line.startsWith('!');
      const pattern = posix.normalize((negate ? line.slice(1) : line).trim()).replace(/^\/+/, '');
      let source = '';
      for (let i = 0; i < pattern.length; i++) {
        const char = pattern[i]!;
        if (char === '*' && pattern[i + 1] === '*') {
          source += '.*';
          i++;
          if (pattern[i + 1] === '/') i++;
        } else if (char === '*') source += '[^/]*';
        else if (char === '?') source += '[^/]';
        else source += char.replace(/[.+^${}()|[\]\\]/g, '\\$&');
      }
      return { negate, regex: new RegExp(`^${source}$`) };
    });
  return (path) => {
    const parts = path.split('/');
    const candidates = parts.map((_, index) => parts.slice(0, index + 1).join('/'));
    let sent = true;
    for (const rule of rules) {
      if (candidates.some((candidate) => rule.regex.test(candidate))) sent = rule.negate;
    }
    return sent;
  };
}

export interface BuildOptions {
  /** The repository (the build context's source). */
  readonly repo: string;
  readonly dockerfile: string;
  /** Where the context and the stages' roots are laid out. @default a new temp dir */
  readonly dir?: string;
  /** Node 24 (the base image's Node): its directory goes first in PATH. */
  readonly nodePath: string;
  /** The checkout's node_modules, holding at least the lock's packages at its versions (stands in for `npm ci`). */
  readonly nodeModules: string;
  /** Called with each RUN before it runs. */
  readonly onRun?: (stage: string, command: string) => void;
}

export interface StageResult {
  readonly name: string;
  /** The directory that stands for this stage's `/`. */
  readonly root: string;
  /** Its last WORKDIR, as a path in the image (e.g. /app). */
  readonly workdir: string;
  /** ENV of the stage, values as in the Dockerfile. */
  readonly env: Readonly<Record<string, string>>;
  readonly user: string | undefined;
  readonly volumes: readonly string[];
  /** CMD / ENTRYPOINT / HEALTHCHECK as written. */
  readonly cmd: readonly string[] | undefined;
  readonly entrypoint: readonly string[] | undefined;
  readonly healthcheck: string | undefined;
  /** What `chown` would have done (needs root). */
  readonly chowns: readonly string[];
  /** Maps a path in the image to this machine. */
  at(imagePath: string): string;
}

export interface BuildResult {
  readonly dir: string;
  readonly context: string;
  /** Repository paths sent in the context. */
  readonly sent: readonly string[];
  readonly stages: readonly StageResult[];
  readonly final: StageResult;
}

/** Lays out the context and runs every stage. Throws with the command's output when a RUN fails. */
export function buildImage(options: BuildOptions): BuildResult {
  const dir = options.dir ?? mkdtempSync(join(tmpdir(), 'sb-docker-'));
  const context = join(dir, 'context');
  const ignored = existsSync(join(options.repo, '.dockerignore')) ? dockerignore(readFileSync(join(options.repo, '.dockerignore'), 'utf8')) : () => true;
  const sent = cloneFiles(options.repo).filter(ignored);
  for (const path of sent) {
    mkdirSync(dirname(join(context, path)), { recursive: true });
    cpSync(join(options.repo, path), join(context, path), { verbatimSymlinks: true });
  }
  const shims = join(dir, 'shims');
  mkdirSync(shims, { recursive: true });
  const chownLog = join(dir, 'chown.log');
  const realNpm = execFileSync('sh', ['-c', 'command -v npm'], { encoding: 'utf8' }).trim();
  const npmCi = join(dir, 'npm-ci.cjs');
  writeFileSync(npmCi, npmCiSource);
  writeFileSync(
    join(shims, 'npm'),
    `#!/bin/sh\nif [ "$1" = ci ]; then shift; exec node ${quote(npmCi)} ${quote(realpathSync(options.nodeModules))} "$@"; fi\nexec ${quote(realNpm)} "$@"\n`,
  );
  writeFileSync(join(shims, 'chown'), `#!/bin/sh\necho "$*" >> ${quote(chownLog)}\n`);
  for (const shim of ['npm', 'chown']) chmodSync(join(shims, shim), 0o755);

  const stages: StageResult[] = [];
  parseDockerfile(readFileSync(options.dockerfile, 'utf8')).forEach((stage, index) => {
    const name = stage.name ?? String(index);
    const root = join(dir, 'stages', name);
    mkdirSync(root, { recursive: true });
    const at = (imagePath: string): string => join(root, imagePath);
    let workdir = '/';
    const env: Record<string, string> = {};
    let user: string | undefined;
    const volumes: string[] = [];
    let cmd: string[] | undefined;
    let entrypoint: string[] | undefined;
    let healthcheck: string | undefined;
    const chowns: string[] = [];
    // An absolute path in a RUN line or an ENV value is one in the image: under this root.
    const mapPaths = (text: string): string => text.replace(/(^|[\s=:])\/(?=[A-Za-z])/g, `$1${root}/`);
    for (const { keyword, args } of stage.instructions) {
      switch (keyword) {
        case 'WORKDIR':
          workdir = posix.resolve(workdir, args);
          mkdirSync(at(workdir), { recursive: true });
          break;
        case 'ENV':
          for (const match of args.matchAll(/([A-Za-z_][A-Za-z0-9_]*)=("[^"]*"|\S+)/g)) env[match[1]!] = match[2]!.replace(/^"|"$/g, '');
          break;
        case 'COPY': {
          const words = args.split(/\s+/);
          const from = words.find((word) => word.startsWith('--from='))?.slice('--from='.length);
          const unknown = words.filter((word) => word.startsWith('--') && !word.startsWith('--from='));
          if (unknown.length > 0) throw new Error(`COPY ${args}: option ${unknown[0]} is not supported here`);
          const paths = words.filter((word) => !word.startsWith('--'));
          const destination = paths.pop()!;
          const base = from === undefined ? context : stages.find((s) => s.name === from)?.root;
          if (base === undefined) throw new Error(`COPY --from=${from}: no earlier stage named ${from}`);
          const target = at(posix.resolve(workdir, destination));
          const intoDirectory = destination.endsWith('/') || paths.length > 1;
          for (const source of paths) {
            if (/[*?[]/.test(source) || /^https?:/.test(source)) throw new Error(`COPY ${source}: wildcards and URLs are not supported here`);
            const sourcePath = join(base, from === undefined ? posix.normalize(source) : posix.resolve(workdir, source));
            if (!existsSync(sourcePath)) throw new Error(`COPY ${args}: "${source}" is not in the ${from === undefined ? 'build context (is it in .dockerignore, or not in git?)' : `stage ${from}`}`);
            const directory = lstatSync(sourcePath).isDirectory();
            const to = directory || !intoDirectory ? target : join(target, posix.basename(source));
            mkdirSync(directory ? to : dirname(to), { recursive: true });
            cpSync(sourcePath, to, { recursive: true, verbatimSymlinks: true });
          }
          break;
        }
        case 'RUN': {
          const command = execForm(args)?.join(' ') ?? args;
          options.onRun?.(name, command);
          const result = spawnSync('sh', ['-c', mapPaths(command)], {
            cwd: at(workdir),
            encoding: 'utf8',
            env: {
              ...process.env,
              ...Object.fromEntries(Object.entries(env).map(([key, value]) => [key, mapPaths(value)])),
              PATH: `${shims}:${dirname(options.nodePath)}:${process.env.PATH ?? '/usr/bin:/bin'}`,
              npm_config_offline: 'true',
              npm_config_audit: 'false',
              npm_config_fund: 'false',
              npm_config_update_notifier: 'false',
              npm_config_cache: join(dir, 'npm-cache'),
            },
            timeout: 600_000,
          });
          if (result.status !== 0) throw new Error(`stage ${name}: RUN ${command} failed (exit ${result.status ?? result.signal})\n${result.stdout}\n${result.stderr}`);
          if (existsSync(chownLog)) {
            chowns.push(...readFileSync(chownLog, 'utf8').trim().split('\n'));
            rmSync(chownLog);
          }
          break;
        }
        case 'USER':
          user = args;
          break;
        case 'VOLUME':
          volumes.push(...(execForm(args) ?? args.split(/\s+/)));
          break;
        case 'CMD':
          cmd = execForm(args) ?? ['/bin/sh', '-c', args];
          break;
        case 'ENTRYPOINT':
          entrypoint = execForm(args) ?? ['/bin/sh', '-c', args];
          break;
        case 'HEALTHCHECK':
          healthcheck = args;
          break;
        case 'EXPOSE':
        case 'LABEL':
        case 'ARG':
        case 'STOPSIGNAL':
          break;
        default:
          throw new Error(`Dockerfile: ${keyword} is not supported by this test`);
      }
    }
    stages.push({ name, root, workdir, env, user, volumes, cmd, entrypoint, healthcheck, chowns, at });
  });
  return { dir, context, sent, stages, final: stages.at(-1)! };
}

/** Bytes of the regular files under `path` (symlinks counted as links, not followed). */
export function sizeOf(path: string): number {
  const stat = lstatSync(path);
  if (!stat.isDirectory()) return stat.isSymbolicLink() ? readlinkSync(path).length : stat.size;
  return readdirSync(path).reduce((sum, entry) => sum + sizeOf(join(path, entry)), 0);
}

/** Whether `path` is a directory (following symlinks). */
export const isDirectory = (path: string): boolean => existsSync(path) && statSync(path).isDirectory();

const quote = (text: string): string => `'${text.replace(/'/g, `'\\''`)}'`;

/**
 * The stand-in for `npm ci` (written to a file and run with node): refuses without
 * package.json and package-lock.json in the working directory (as npm ci does); copies the
 * checkout's node_modules (`cp -a`, a real copy: `npm prune` later deletes and rewrites in it),
 * refuses when a package of the lock is missing there or at another version, removes packages
 * the lock does not name and those it marks dev / optional when --omit says so, and runs the
 * root `prepare` script unless --ignore-scripts.
 */
const npmCiSource = `
const { existsSync, readFileSync, rmSync, readdirSync, statSync } = require('node:fs');
const { join } = require('node:path');
const { execFileSync } = require('node:child_process');
const [source, ...flags] = process.argv.slice(2);
const omit = new Set(flags.filter((f) => f.startsWith('--omit=')).map((f) => f.slice(7)));
for (const flag of flags) if (!/^--omit=(dev|optional|peer)$|^--ignore-scripts$/.test(flag)) { console.error('npm ci stand-in: unsupported option ' + flag); process.exit(1); }
if (!existsSync('package.json') || !existsSync('package-lock.json')) { console.error('npm error The \`npm ci\` command can only install with an existing package-lock.json'); process.exit(1); }
const packages = JSON.parse(readFileSync('package-lock.json', 'utf8')).packages;
execFileSync('cp', ['-a', source, 'node_modules']);
// What npm ci installs is exactly the lock: a package of the lock missing from the checkout's
// node_modules (or at another version) is an error; one the lock does not name is removed.
const problems = [];
for (const [path, entry] of Object.entries(packages)) {
  if (path === '' || entry.link) continue;
  const manifest = join(path, 'package.json');
  if (!existsSync(manifest)) {
    // npm skips optional packages for other platforms.
    if (!entry.optional && !entry.devOptional) problems.push(path + ' is missing');
    continue;
  }
  const version = JSON.parse(readFileSync(manifest, 'utf8')).version;
  if (entry.version !== undefined && version !== entry.version) problems.push(path + ' is ' + version + ', the lock says ' + entry.version);
}
if (problems.length > 0) { console.error('npm ci stand-in: the node_modules of the checkout was not installed from this package-lock.json (run npm install):\\n' + problems.join('\\n')); process.exit(1); }
const prune = (dir) => {
  for (const name of readdirSync(dir)) {
    if (name.startsWith('.')) continue;
    const names = name.startsWith('@') ? readdirSync(join(dir, name)).map((inner) => name + '/' + inner) : [name];
    for (const pkgName of names) {
      const path = join(dir, pkgName);
      if (!(path in packages)) rmSync(path, { recursive: true, force: true });
      else if (existsSync(join(path, 'node_modules'))) prune(join(path, 'node_modules'));
    }
  }
};
prune('node_modules');
for (const [path, entry] of Object.entries(packages)) {
  if (path === '') continue;
  const gone = (omit.has('dev') && entry.dev) || (omit.has('optional') && entry.optional) || (omit.has('peer') && entry.peer) || (omit.has('dev') && omit.has('optional') && entry.devOptional);
  if (gone) rmSync(path, { recursive: true, force: true });
}
// Links in node_modules/.bin to packages that are not there any more.
for (const bin of ['node_modules/.bin']) {
  if (!existsSync(bin)) continue;
  for (const name of readdirSync(bin)) { try { statSync(join(bin, name)); } catch { rmSync(join(bin, name), { force: true }); } }
}
const pkg = JSON.parse(readFileSync('package.json', 'utf8'));
if (!flags.includes('--ignore-scripts') && pkg.scripts && pkg.scripts.prepare) execFileSync('npm', ['run', 'prepare'], { stdio: 'inherit' });
`;

/** The repository root of this checkout. */
export const repoRoot = resolve(import.meta.dirname, '../..');
