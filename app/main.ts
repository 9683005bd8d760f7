/**
 * The CLI: `start`, `chat`, `--help`, `--version`. Usage errors exit 2, config errors 78,
 * a data_dir that cannot be created or written 73, a damaged database 65.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { ConfigError, EXIT_CONFIG } from '../src/config/load.ts';
import { DataDirInUseError } from '../src/store/lock.ts';
import { EXIT_CANTCREAT, FileSystemError } from '../src/store/files.ts';
import { DatabaseDamagedError, EXIT_DATAERR } from '../src/store/integrity.ts';
import { StoreUnavailableError } from '../src/store/postgres/unavailable.ts';
import { packageVersion } from '../src/version.ts';

const EXIT_USAGE = 2;

const usage = `Usage: switchboard <command> [options]

Commands:
  start          run the daemon on the configured channels, in the foreground until SIGINT/SIGTERM
  chat           talk to the agent from this terminal (stdin lines are messages); needs no channel
  memory         list | search <query> | forget <id-or-key> | export  [--person CHANNEL:ID]
                 [--conversation KEY] [--scope S] [--category C] [--limit N] [--json]
  pairing        list | approve <channel> <code>   (let a new person talk to the agent)
  reload         make the running daemon re-read its config (changed channels restart alone)
  status         ask the running daemon how it is (channels, queue, in flight, totals) [--json]
  onboard        answer a few questions, check the model key, write a commented config
  doctor         check config, model key, channel credentials, data_dir, disk, service unit [--json]
  backup FILE    copy the database to FILE, safely while the daemon runs [--force]
  store copy     copy the whole store to another: --to postgres://… (moving to a cluster)
                 [--from URL|FILE] [--force]
  service        install | uninstall [--user] [--dry-run]   (systemd unit, enabled and started)
  help [COMMAND] show this help, or a command's (as does COMMAND --help)

Options:
  -c, --config FILE   config file (default: $SWITCHBOARD_CONFIG, ./switchboard.toml,
                      ~/.config/switchboard/config.toml)
  -v, --verbose       log more: chat shows warnings and progress (info), start adds debug
  -h, --help          show this help
  -V, --version       print the version

Examples:
  switchboard start --config /etc/switchboard/config.toml
  printf 'hi\\nand you?\\n' | switchboard chat
`;

/** `switchboard <command> --help` for the commands main.ts runs itself. */
const ownUsage: Readonly<Record<string, string>> = {
  start: `Usage: switchboard start [--config FILE]

Runs the daemon in the foreground until SIGINT/SIGTERM: every channel that has a
[channels.…] table, and the HTTP gateway when [gateway] is configured. Logs go to stdout
(to stderr when [channels.terminal] is configured). SIGHUP re-reads the config.

Options:
  -c, --config FILE   config file (default: $SWITCHBOARD_CONFIG, ./switchboard.toml,
                      ~/.config/switchboard/config.toml)
  -h, --help          show this help

Exit codes: 0 stopped cleanly, 78 config error (or a PostgreSQL store that refuses this
config: wrong password, no such database), 75 the PostgreSQL store is unreachable for now
(try again later; the systemd unit does, with a back-off), 73 data_dir cannot be created or
written, 65 the database is damaged (restore a backup: see the README), 1 data_dir in use by
another Switchboard process.
`,
  chat: `Usage: switchboard chat [--config FILE]

Talks to the agent from this terminal, through the terminal channel (whatever channels the
config has). At a terminal, a pasted block of lines is one message (Enter sends it), and a
line ending in \\ goes on on the next one. Lines piped in are messages: chat exits once the
input has ended and every reply is out. Warnings and errors go to stderr. It needs only the
secrets it uses: a [gateway] token or a channel's token may be unset.

Options:
  -c, --config FILE   config file (default: as for start)
  -h, --help          show this help

Exit codes: as for start.
`,
  reload: `Usage: switchboard reload [--config FILE]

Makes the running daemon re-read its config: through the gateway (POST /api/reload) when
[gateway] is configured, else SIGHUP to the pid in <data_dir>/switchboard.pid. Changed
channels restart alone; keys that need a restart are named. A config the daemon rejects
changes nothing: it keeps running with the config it had.

Options:
  -c, --config FILE   the daemon's config file (default: as for start)
  -h, --help          show this help

Exit codes: 0 reloaded (or signalled), 1 no running daemon found or the daemon rejected the
new config, 78 the file is invalid here (the daemon was not asked).
`,
};

/** The usage of any command; the operator commands' live in their modules, loaded only for this. */
async function usageOf(command: string): Promise<string | undefined> {
  if (ownUsage[command] !== undefined) return ownUsage[command];
  switch (command) {
    case 'memory':
      return (await import('./memory-cli.ts')).memoryUsage;
    case 'pairing':
      return (await import('./pairing-cli.ts')).pairingUsage;
    case 'status':
      return (await import('./status-cli.ts')).statusUsage;
    case 'doctor':
      return (await import('./doctor.ts')).doctorUsage;
    case 'service':
      return (await import('./service.ts')).serviceUsage;
    case 'onboard':
      return (await import('./onboard.ts')).onboardUsage;
    case 'backup':
      return (await import('./backup-cli.ts')).backupUsage;
    case 'store':
      return (await import('./store-cli.ts')).storeUsage;
    case 'help':
      return usage;
    default:
      return undefined;
  }
}

const commands = new Set(['start', 'chat', 'help']);

/** Runs the CLI and returns the exit code. */
export async function main(argv: readonly string[]): Promise<number> {
  const operator = operatorCommand(argv);
  // Every command answers --help here, the one place (before its config is read: help needs none).
  if (operator && operator.rest.some((arg) => arg === '--help' || arg === '-h')) {
    process.stdout.write((await usageOf(operator.name)) ?? usage);
    return 0;
  }
  if (operator) return runOperator(operator.run, operator.rest, operator.config);
  let parsed;
  try {
    parsed = parseArgs({
      args: [...argv],
      allowPositionals: true,
      strict: true,
      options: {
        config: { type: 'string', short: 'c' },
        help: { type: 'boolean', short: 'h' },
        version: { type: 'boolean', short: 'V' },
        verbose: { type: 'boolean', short: 'v' },
      },
    });
  } catch (error) {
    return usageError(error instanceof Error ? error.message : String(error));
  }
  const { values, positionals } = parsed;
  if (values.version) {
    process.stdout.write(`switchboard ${packageVersion() ?? 'unknown'}\n`);
    return 0;
  }
  const [command, ...extra] = positionals;
  // `switchboard help doctor` = `switchboard doctor --help`.
  if (command === 'help' && extra.length === 1) {
    const text = await usageOf(extra[0]!);
    if (text === undefined) return usageError(`unknown command "${extra[0]}"`);
    process.stdout.write(text);
    return 0;
  }
  if (values.help && command !== undefined && ownUsage[command] !== undefined) {
    process.stdout.write(ownUsage[command]);
    return 0;
  }
  if (values.help || command === undefined || command === 'help') {
    process.stdout.write(usage);
    return command === undefined && !values.help ? EXIT_USAGE : 0;
  }
  if (!commands.has(command)) return usageError(`unknown command "${command}"`);
  if (extra.length > 0) return usageError(`unexpected argument "${extra[0]}" for "switchboard ${command}"`);

  try {
    // Loaded only for commands that run the daemon: --help and usage errors stay instant.
    const { runDaemon } = await import('./daemon.ts');
    return await runDaemon({ mode: command === 'chat' ? 'chat' : 'start', verbose: values.verbose === true, ...(values.config === undefined ? {} : { configFlag: values.config }) });
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`${error.message}\n`);
      return EXIT_CONFIG;
    }
    if (error instanceof DataDirInUseError) {
      process.stderr.write(`switchboard${command === 'chat' ? ' chat' : ''}: ${command === 'chat' ? chatBeside(error.dir) : error.message}\n`);
      return 1;
    }
    if (error instanceof FileSystemError) {
      process.stderr.write(`switchboard: ${error.message} Nothing was started.\n`);
      return EXIT_CANTCREAT;
    }
    if (error instanceof DatabaseDamagedError) {
      process.stderr.write(`switchboard: Nothing was started. ${error.message}\n`);
      return EXIT_DATAERR;
    }
    if (error instanceof StoreUnavailableError) {
      // One paragraph, no stack: 75 (the server may come back: retried) or 78 (fix it first).
      process.stderr.write(`switchboard: Nothing was started. ${error.message}\n`);
      return error.exitCode;
    }
    throw error;
  }
}

type OperatorRun = (args: readonly string[], configFlag: string | undefined) => Promise<number>;

/** Commands that work beside a running daemon; each loads its module only when called. */
const operatorCommands: Readonly<Record<string, OperatorRun>> = {
  memory: async (args, configFlag) => {
    const [{ runMemoryCommand }, { openOperatorMemory }] = await Promise.all([import('./memory-cli.ts'), import('./daemon.ts')]);
    return runMemoryCommand(args, () => openOperatorMemory(configFlag), process.stdout, process.stderr);
  },
  pairing: async (args, configFlag) => {
    const [{ runPairingCommand }, { openOperatorPairing }] = await Promise.all([import('./pairing-cli.ts'), import('./daemon.ts')]);
    return runPairingCommand(args, () => openOperatorPairing(configFlag), process.stdout, process.stderr);
  },
  doctor: async (args, configFlag) => {
    const { runDoctor } = await import('./doctor.ts');
    return runDoctor(args, { stdout: process.stdout, stderr: process.stderr, env: process.env, configFlag });
  },
  service: async (args, configFlag) => {
    const { runServiceCommand } = await import('./service.ts');
    return runServiceCommand(args, { stdout: process.stdout, stderr: process.stderr, env: process.env, configFlag });
  },
  onboard: async (args, configFlag) => {
    const { runOnboard } = await import('./onboard.ts');
    return runOnboard(args, { stdin: process.stdin, stdout: process.stdout, stderr: process.stderr, env: process.env, configFlag });
  },
  backup: async (args, configFlag) => {
    const [{ runBackup }, { loadConfig, locateConfig }, { dirname, join, resolve }] = await Promise.all([import('./backup-cli.ts'), import('../src/config/load.ts'), import('node:path')]);
    return runBackup(args, {
      stdout: process.stdout,
      stderr: process.stderr,
      database: () => {
        const file = locateConfig(configFlag === undefined ? {} : { flag: configFlag });
        const { config } = loadConfig(file, process.env, { requireSecrets: false });
        if (config.store.kind === 'postgres') return { postgres: config.store.url! };
        return join(resolve(dirname(file), config.data_dir), 'switchboard.db');
      },
    });
  },
  store: async (args, configFlag) => {
    const [{ runStoreCommand }, { loadConfig, locateConfig }, { createLogger }, { dirname, join, resolve }] = await Promise.all([import('./store-cli.ts'), import('../src/config/load.ts'), import('../src/log.ts'), import('node:path')]);
    const file = locateConfig(configFlag === undefined ? {} : { flag: configFlag });
    const { config } = loadConfig(file, process.env, { requireSecrets: false });
    return runStoreCommand(args, {
      stdout: process.stdout,
      stderr: process.stderr,
      configured: () => (config.store.kind === 'postgres' ? config.store.url! : join(resolve(dirname(file), config.data_dir), 'switchboard.db')),
      log: () => createLogger({ level: 'warn', format: config.log.format, stream: process.stderr }),
      turnQueue: async (url) =>
        (await import('../src/cluster/pg-boss-queue.ts')).createPgBossQueue({
          url,
          log: createLogger({ level: 'warn', format: config.log.format, stream: process.stderr }),
          concurrency: 1,
          // as a node makes the queue (app/compose/cluster.ts)
          heartbeatSeconds: Math.max(10, config.cluster.failover_seconds),
          turnTimeoutSeconds: config.agent.turn_timeout_seconds,
        }),
    });
  },
  reload: async (args, configFlag) => {
    if (args.length > 0) return usageError(`unexpected argument "${args[0]}" for "switchboard reload"`);
    return runReload(configFlag);
  },
  status: async (args, configFlag) => {
    const [{ runStatus }, { loadConfig, locateConfig }] = await Promise.all([import('./status-cli.ts'), import('../src/config/load.ts')]);
    const { config } = loadConfig(locateConfig(configFlag === undefined ? {} : { flag: configFlag }), process.env, { requireSecrets: false });
    return runStatus(args, { gateway: config.gateway, out: process.stdout, err: process.stderr });
  },
};

/**
 * `switchboard [--config F] memory …`: operator commands have flags of their own, so they
 * are split off before the strict parse. Returns undefined for any other command.
 */
function operatorCommand(argv: readonly string[]): { name: string; run: OperatorRun; rest: string[]; config?: string } | undefined {
  let config: string | undefined;
  const rest: string[] = [];
  let command: string | undefined;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '--config' || arg === '-c') {
      config = argv[++i];
      continue;
    }
    if (arg.startsWith('--config=')) {
      config = arg.slice('--config='.length);
      continue;
    }
    if (command === undefined && !arg.startsWith('-')) {
      command = arg;
      continue;
    }
    rest.push(arg);
  }
  const run = command === undefined ? undefined : operatorCommands[command];
  if (!run) return undefined;
  return config === undefined ? { name: command!, run, rest } : { name: command!, run, rest, config };
}

async function runOperator(run: OperatorRun, args: readonly string[], configFlag: string | undefined): Promise<number> {
  try {
    return await run(args, configFlag);
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`${error.message}\n`);
      return EXIT_CONFIG;
    }
    if (error instanceof FileSystemError) {
      process.stderr.write(`switchboard: ${error.message}\n`);
      return EXIT_CANTCREAT;
    }
    if (error instanceof DatabaseDamagedError) {
      process.stderr.write(`switchboard: ${error.message}\n`);
      return EXIT_DATAERR;
    }
    if (error instanceof StoreUnavailableError) {
      // Without the daemon's note on restarts: nothing retries an operator command.
      process.stderr.write(`switchboard: cannot use the PostgreSQL database ${error.url} ([store] url): ${error.detail}. Fix: ${error.fix}.\n`);
      return error.exitCode;
    }
    throw error;
  }
}

/**
 * `switchboard reload`: through the gateway when it is configured (`POST /api/reload`, which
 * answers what the reload did), else SIGHUP to the pid in `<data_dir>/switchboard.pid`.
 * Exit 0 = reloaded (or signalled), 1 = no daemon found or the new config was rejected.
 */
async function runReload(configFlag: string | undefined): Promise<number> {
  const [{ loadConfig, locateConfig, formatProblems }, { statusUrl }, { dirname, join, resolve }] = await Promise.all([import('../src/config/load.ts'), import('./status-cli.ts'), import('node:path')]);
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
function chatBeside(dir: string): string {
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

function usageError(message: string): number {
  process.stderr.write(`switchboard: ${message}\nRun "switchboard --help" for the commands and options.\n`);
  return EXIT_USAGE;
}
