/**
 * The built daemon (dist/) for tests that run what users run: `ensureDist()` bundles it with
 * `node scripts/build.ts` (npm run build's bundle step, without its type check and the console)
 * when it is missing or older than any source it is built from,
 * and does nothing (a few ms of `stat`) when it is fresh — as after `npm test`'s build step.
 * Test files running at once share one build through a lock directory.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, readdirSync, rmdirSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const repoRoot = fileURLToPath(new URL('../../', import.meta.url));
export const launcherPath = join(repoRoot, 'bin', 'switchboard');
const distEntry = join(repoRoot, 'dist', 'app', 'cli.js');
const buildScript = join(repoRoot, 'scripts', 'build.ts');

/** Newest modification time (ms) of the files the bundle is built from, and of the build script. */
function newestSource(): number {
  let newest = Math.max(statSync(join(repoRoot, 'tsconfig.json')).mtimeMs, statSync(buildScript).mtimeMs);
  const walk = (dir: string): void => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.test.ts') && entry.name !== 'testing.ts') newest = Math.max(newest, statSync(path).mtimeMs);
    }
  };
  for (const dir of ['src', 'channels', 'app']) walk(join(repoRoot, dir));
  return newest;
}

function distTime(): number | undefined {
  try {
    return statSync(distEntry).mtimeMs;
  } catch {
    return undefined;
  }
}

/** Whether dist/ is missing or older than its sources, and so needs a build. */
export function distStale(): boolean {
  const built = distTime();
  return built === undefined || built < newestSource();
}

function build(): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [buildScript], { cwd: repoRoot, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve() : reject(new Error(`building dist/ (node scripts/build.ts) failed with exit code ${code}:\n${output}`))));
  });
}

/** Builds dist/ if it is stale; returns whether it built. */
export async function ensureDist(timeoutMs = 180_000): Promise<boolean> {
  if (!distStale()) return false;
  const lock = join(tmpdir(), `switchboard-dist-build-${Buffer.from(repoRoot).toString('base64url').slice(-40)}`);
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      mkdirSync(lock);
      break;
    } catch {
      // Another test file builds: wait for it, then look again. A lock older than the timeout is left over from a killed run.
      try {
        if (Date.now() - statSync(lock).mtimeMs > timeoutMs) rmdirSync(lock);
      } catch {
        // gone meanwhile
      }
      if (Date.now() > deadline) throw new Error(`waited ${timeoutMs} ms for another build of dist/ (lock ${lock}); remove the lock if no test runs`);
      await new Promise((resolve) => setTimeout(resolve, 200));
      if (!distStale()) return false;
    }
  }
  try {
    if (!distStale()) return false;
    await build();
    return true;
  } finally {
    rmdirSync(lock);
  }
}
