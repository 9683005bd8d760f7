/**
 * `switchboard reload`, and how the CLI tells a running daemon by its pid file (`chat` will
 * not start beside one). Loaded only for these.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ConfigError, EXIT_CONFIG } from '../src/config/load.ts';

export const reloadUsage = `Usage: switchboard reload [--config FILE]

Makes the running daemon re-read its config: through the gateway (POST /api/reload) when
[gateway] is configured, else SIGHUP to the pid in <data_dir>/switchboard.pid. Changed
channels restart alone; keys that need a restart are named. A config the daemon rejects
changes nothing: it keeps running with the config it had.

Options:
  -c, --config FILE   the daemon's config file (default: as for start)
  -h, --help          show this help

Exit codes: 0 reloaded (or signalled), 1 no running daemon found or the daemon rejected the
new config, 78 the file is invalid here (the daemon was not asked).
`;

/**
 * `switchboard reload`: through the gateway when it is configured (`POST /api/reload`, which
 * answers what the reload did), else SIGHUP to the pid in `<data_dir>/switchboard.pid`.
 * Exit 0 = reloaded (or signalled), 1 = no daemon found or the new config was rejected.
 */
export async function runReload(configFlag: string | undefined): Promise<number> {
  const [{ loadConfig, locateConfig, formatProblems }, { statusUrl }, { dirname, join, resolve }] = await Promise.all([import('./config.ts'), import('./status-cli.ts'), import('node:path')]);
  const file = locateConfig(configFlag === undefined ? {} : { flag: configFlag });
  let config;
  try {
    ({ config } = loadConfig(file, process.env, { requireSecrets: false }));
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    // Not "nothing was started": a daemon may well be running, and it is left as it is.
    process.stderr.write(`${formatProblems(error.file, error.problems, 'The running daemon was not asked and keeps the config it had. Fix the file, then run `switchboard reload` again.')}\n`);
    return EXIT_CONFIG;
  }
  const gateway = config.gateway;
  if (gateway && !/^\$\{/.test(gateway.token ?? '')) {
    const url = statusUrl(gateway.listen).replace(/\/api\/status$/, '/api/reload');
    try {
      // JSON, as every POST to the gateway must be (a browser cannot send it cross-site without asking first).
      const response = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...(gateway.token ? { authorization: `Bearer ${gateway.token}` } : {}) }, body: '{}', signal: AbortSignal.timeout(60_000) });
      const body = (await response.json().catch(() => ({}))) as { ok?: boolean; error?: string; restarted?: string[]; added?: string[]; removed?: string[]; agentRebuilt?: boolean; needsRestart?: string[] };
      if (response.status === 401) {
        process.stderr.write('switchboard reload: the daemon refused the token (401); gateway.token here must be the one the daemon runs with\n');
        return 1;
      }
      if (body.ok === true) {
        const list = (items: string[] | undefined): string => (items?.length ? items.join(', ') : 'none');
        process.stdout.write(`config reloaded: restarted ${list(body.restarted)}; added ${list(body.added)}; removed ${list(body.removed)}; agent ${body.agentRebuilt ? 'rebuilt for the next turn' : 'unchanged'}\n`);
        if (body.needsRestart?.length) process.stdout.write(`needs a restart to apply (old values kept): ${body.needsRestart.join(', ')}\n`);
        return 0;
      }
      process.stderr.write(`switchboard reload: the daemon rejected the new config.\n${body.error ?? `HTTP ${response.status}; it keeps the config it had`}\n`);
      return 1;
    } catch (error) {
      process.stderr.write(`switchboard reload: cannot reach the daemon at ${url} (${error instanceof Error ? error.message : String(error)}); trying its pid file\n`);
    }
  }
  const pidFile = join(resolve(dirname(file), config.data_dir), 'switchboard.pid');
  let pid: number;
  try {
    pid = Number.parseInt(readFileSync(pidFile, 'utf8'), 10);
    if (!isSwitchboard(pid)) throw Object.assign(new Error('stale'), { code: `pid ${pid} is not a running switchboard (a file left by a crash?)` });
    process.kill(pid, 'SIGHUP');
  } catch (error) {
    process.stderr.write(`switchboard reload: no running daemon found for ${file} (${pidFile}: ${(error as { code?: string }).code ?? String(error)}). Is it running?\n`);
    return 1;
  }
  process.stdout.write(`sent SIGHUP to the daemon (pid ${pid}); its log says "config reloaded" or why the new config was rejected\n`);
  return 0;
}

/**
 * What `chat` says when the data_dir is held: by the daemon (its pid file names a running
 * switchboard) or by another chat. `chat` runs the agent itself, so it never starts beside them.
 */
export function chatBeside(dir: string): string {
  let pid = Number.NaN;
  try {
    pid = Number.parseInt(readFileSync(join(dir, 'switchboard.pid'), 'utf8'), 10);
  } catch {
    // no pid file: not a daemon
  }
  if (isSwitchboard(pid)) {
    return (
      `the Switchboard daemon (pid ${pid}) is running on this data_dir (${dir}). chat runs the agent itself, and two processes on one data_dir could answer a message twice, so it does not start beside the daemon.\n` +
      'Talk to the agent on one of the daemon\'s channels, or stop the daemon (Ctrl-C in its terminal, or systemctl stop switchboard when it runs as a service) and run chat again: the conversation carries on where it was.'
    );
  }
  return `another switchboard chat is using this data_dir (${dir}); only one chat or daemon may use it at a time. Finish that chat first (Ctrl-D in its terminal), or run this one with a config whose data_dir is its own.`;
}

/** A pid left by a crash may since belong to another program: never signal that one. */
function isSwitchboard(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  let cmdline: string;
  try {
    cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
  } catch (error) {
    // No /proc (not Linux): trust the file as long as the process exists.
    if ((error as { code?: string }).code !== 'ENOENT' || existsSync('/proc/self')) return false;
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  }
  return /switchboard|[/\\]cli\.[jt]s/.test(cmdline);
}
