/**
 * Runs `script` as an ES module in a child Node process and parses what it wrote to stdout as
 * JSON: for tests of what changes the process itself (V8 flags, collections, module loading).
 */
import { execFileSync } from 'node:child_process';

export function runModuleScript<T = Record<string, unknown>>(script: string, options: { readonly cwd?: string } = {}): T {
  return JSON.parse(execFileSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', ...options })) as T;
}
