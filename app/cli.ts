#!/usr/bin/env node
/**
 * `switchboard` entry point. Checks the Node version before anything native is loaded
 * (better-sqlite3 on an old Node crashes instead of failing cleanly), then runs the CLI.
 */
const major = Number(process.versions.node.split('.')[0]);
if (major < 22) {
  process.stderr.write(
    `switchboard needs Node.js 22 or newer; this is ${process.version}.\n` +
      'Run it through npm (npm start, npm run chat, npx switchboard …), which uses the Node that npm install brought,\n' +
      'or use bin/switchboard, or install Node 22+.\n',
  );
  process.exit(1);
}
const { main } = await import('./main.ts');
process.exitCode = await main(process.argv.slice(2));
