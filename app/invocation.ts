/**
 * How to write `switchboard …` for the person reading a message, so a "Next:" line can be
 * pasted as it is: `switchboard` when that name in PATH is this install (npm install -g),
 * `npx switchboard` inside a checkout or a project that depends on it (npm puts the command in
 * node_modules/.bin there, not in PATH), else the launcher's own path.
 */
import { existsSync, realpathSync } from 'node:fs';
import { delimiter, dirname, basename, join, relative, resolve, isAbsolute } from 'node:path';
import { fileURLToPath } from 'node:url';

export interface InvocationOptions {
  readonly env: NodeJS.ProcessEnv;
  /** Where the reader is (the command's working directory). */
  readonly cwd: string;
  /** The package root of this install. @default the one this file is in */
  readonly installRoot?: string;
}

/** The package root: app/invocation.ts and dist/app/invocation.js both sit below it. */
export function thisInstall(): string {
  const here = dirname(fileURLToPath(import.meta.url));
  return basename(dirname(here)) === 'dist' ? resolve(here, '../..') : resolve(here, '..');
}

/** `switchboard`, `npx switchboard` or the launcher's path, whichever works where the reader is. */
export function switchboardCommand(options: InvocationOptions): string {
  const root = real(options.installRoot ?? thisInstall());
  const launcher = join(root, 'bin', 'switchboard');
  for (const dir of (options.env.PATH ?? '').split(delimiter)) {
    if (dir === '') continue;
    const candidate = join(dir, 'switchboard');
    if (existsSync(candidate) && real(candidate) === real(launcher)) return 'switchboard';
  }
  const cwd = real(options.cwd);
  // npx finds the command of the package whose folder you are in, or of its dependencies.
  const project = basename(dirname(root)) === 'node_modules' ? dirname(dirname(root)) : root;
  if (inside(cwd, project)) return 'npx switchboard';
  return /\s/.test(launcher) ? `"${launcher}"` : launcher;
}

function inside(path: string, dir: string): boolean {
  const rel = relative(dir, path);
  return rel === '' || (!rel.startsWith('..') && !isAbsolute(rel));
}

function real(path: string): string {
  try {
    return realpathSync(path);
  } catch {
    return resolve(path);
  }
}
