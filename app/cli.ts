#!/usr/bin/env node
/**
 * `switchboard` entry point. Checks the Node version before anything native is loaded
 * (better-sqlite3 on an old Node crashes instead of failing cleanly), then runs the CLI.
 */
import { nodeVersionProblem } from './node-version.ts';

const problem = nodeVersionProblem(process.versions.node);
if (problem !== undefined) {
  process.stderr.write(problem);
  process.exit(1);
}
const { main } = await import('./main.ts');
process.exitCode = await main(process.argv.slice(2));
