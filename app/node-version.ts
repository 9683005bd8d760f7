/**
 * The oldest Node that runs Switchboard: 22.19, because undici 8 (the HTTP client Slack's
 * Socket Mode needs as a peer) requires it; better-sqlite3 13 and matrix-js-sdk 43 need 22.
 * Kept apart from the CLI so it loads nothing and can be tested on its own.
 */
export const minimumNode = { major: 22, minor: 19 } as const;

/**
 * Why this Node cannot run Switchboard, with the fix, or undefined when it can.
 *
 * @example nodeVersionProblem('20.20.2') // "switchboard needs Node.js 22.19 or newer; this is v20.20.2. …"
 */
export function nodeVersionProblem(version: string): string | undefined {
  const [major = 0, minor = 0] = version.replace(/^v/, '').split('.').map(Number);
  if (major > minimumNode.major || (major === minimumNode.major && minor >= minimumNode.minor)) return undefined;
  const floor = `${minimumNode.major}.${minimumNode.minor}`;
  return (
    `switchboard needs Node.js ${floor} or newer; this is v${version.replace(/^v/, '')}.\n` +
    'Run it through npm (npm start, npm run chat, npx switchboard …) or bin/switchboard, which use the Node 24 that\n' +
    `npm install brings on Linux x64 and arm64 (glibc); elsewhere (macOS, Windows, Alpine) install Node ${floor}+ yourself.\n`
  );
}
