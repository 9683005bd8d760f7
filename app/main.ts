/**
 * The CLI: `start`, `chat`, `--help`, `--version`. Usage errors exit 2, config errors 78,
 * a data_dir that cannot be created or written 73, a damaged database 65.
 */
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
    case 'reload':
      return (await import('./reload-cli.ts')).reloadUsage;
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
      process.stderr.write(`switchboard${command === 'chat' ? ' chat' : ''}: ${command === 'chat' ? (await import('./reload-cli.ts')).chatBeside(error.dir) : error.message}\n`);
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
    const [{ runMemoryCommand }, { openOperatorMemory }] = await Promise.all([import('./memory-cli.ts'), import('./operator.ts')]);
    return runMemoryCommand(args, () => openOperatorMemory(configFlag), process.stdout, process.stderr);
  },
  pairing: async (args, configFlag) => {
    const [{ runPairingCommand }, { openOperatorPairing }] = await Promise.all([import('./pairing-cli.ts'), import('./operator.ts')]);
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
    const [{ runBackup }, { loadConfig, locateConfig }, { dirname, join, resolve }] = await Promise.all([import('./backup-cli.ts'), import('./config.ts'), import('node:path')]);
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
    const [{ runStoreCommand }, { loadConfig, locateConfig }, { createLogger }, { dirname, join, resolve }] = await Promise.all([import('./store-cli.ts'), import('./config.ts'), import('../src/log.ts'), import('node:path')]);
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
    return (await import('./reload-cli.ts')).runReload(configFlag);
  },
  status: async (args, configFlag) => {
    const [{ runStatus }, { loadConfig, locateConfig }] = await Promise.all([import('./status-cli.ts'), import('./config.ts')]);
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

function usageError(message: string): number {
  process.stderr.write(`switchboard: ${message}\nRun "switchboard --help" for the commands and options.\n`);
  return EXIT_USAGE;
}
