#!/usr/bin/env node
/**
 * `switchboard` entry point. Turns on V8's compile cache, checks the Node version before
 * anything native is loaded (better-sqlite3 on an old Node crashes instead of failing
 * cleanly), then runs the CLI.
 */
import nodeModule from 'node:module';
import { nodeVersionProblem } from './node-version.ts';

// V8's compile cache: the ~250 modules loaded before `ready` are compiled from cached code
// instead of parsed (measured: spawn → ready −15 to −25 ms with the terminal channel, for
// +1 to +1.7 MB of private memory: the cached code V8 keeps). Where:
// $CACHE_DIRECTORY when systemd gives one (the unit's CacheDirectory=; its PrivateTmp would
// empty the default at every start), else $NODE_COMPILE_CACHE, else Node's default
// (os.tmpdir()/node-compile-cache). A directory that cannot be written (a read-only file
// system) only leaves the cache off: enableCompileCache reports it instead of throwing, and
// the catch is for anything else — a cache must never stop a start. NODE_DISABLE_COMPILE_CACHE=1
// turns it off. Called before main.ts is imported: only modules loaded after it are cached.
// Taken from the module object, not imported by name: a Node older than 22.1 has no such export,
// and a named import of it would fail to link before the version check below can say so.
try {
  nodeModule.enableCompileCache?.(process.env.CACHE_DIRECTORY || undefined);
} catch {
  // start without it
}

const problem = nodeVersionProblem(process.versions.node);
if (problem !== undefined) {
  process.stderr.write(problem);
  process.exit(1);
}
const { main } = await import('./main.ts');
process.exitCode = await main(process.argv.slice(2));
