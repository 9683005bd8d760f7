/**
 * `switchboard service install|uninstall [--user]`: renders systemd/switchboard.service with
 * the paths of this install (node binary, dist/app/cli.js, config file, data dir), writes it
 * where systemd looks, and runs `systemctl daemon-reload` + `enable --now` (or the reverse).
 * The systemctl runner, the file-system root and the home directory are injectable, so tests
 * run it in a temp dir without systemd.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, realpathSync, renameSync, rmSync, writeFileSync, copyFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadConfig, locateConfig } from './config.ts';
import { FileSystemError, makeDirectory } from '../src/store/files.ts';

/** Runs `systemctl <args>`; resolves with the exit code and combined output. */
export type SystemctlRunner = (args: readonly string[]) => Promise<{ readonly code: number; readonly output: string }>;

export interface ServiceIo {
  readonly stdout: NodeJS.WritableStream;
  readonly stderr: NodeJS.WritableStream;
  readonly env: NodeJS.ProcessEnv;
  /** `--config` given before the command. */
  readonly configFlag?: string;
  /** Prefix for /etc/systemd/system (tests use a temp dir). @default "/" */
  readonly root?: string;
  /** For the user unit (~/.config/systemd/user). @default os.homedir() */
  readonly home?: string;
  /** @default runs the real systemctl */
  readonly systemctl?: SystemctlRunner;
  /** @default process.execPath */
  readonly nodePath?: string;
  /** @default dist/app/cli.js of this install */
  readonly cliPath?: string;
  /** @default process.cwd() */
  readonly cwd?: string;
}

/** What a unit is rendered from. */
export interface UnitParams {
  readonly nodePath: string;
  readonly cliPath: string;
  readonly configPath: string;
  readonly dataDir: string;
  /** User unit (systemctl --user): no User=/DynamicUser=, WantedBy=default.target. */
  readonly user: boolean;
  /** `[gateway] listen` (host:port) for the /readyz probe; undefined = no probe. */
  readonly readyAddress?: string | undefined;
  /** Where the code lives, for Documentation=. */
  readonly installDir: string;
}

const UNIT_NAME = 'switchboard.service';
const STATE_DIR = '/var/lib/switchboard';
const usage = 'usage: switchboard service install|uninstall [--user] [--dry-run]';

export const serviceUsage = `Usage: switchboard service install|uninstall [--user] [--dry-run] [--config FILE]

  install     render systemd/switchboard.service with this install's paths (node binary,
              dist/app/cli.js, the config, data_dir), write it (a changed unit is kept as
              .bak), then systemctl daemon-reload and enable --now
  uninstall   disable and remove the unit; data and config stay

Options:
  --user              a user unit (~/.config/systemd/user; no root needed)
  --dry-run           print the unit instead of installing it
  -c, --config FILE   the config the service runs with (default: as for start)
  -h, --help          show this help
`;

/** Runs the `service` command; returns the exit code. */
export async function runServiceCommand(args: readonly string[], io: ServiceIo): Promise<number> {
  const flags = new Set(args.filter((arg) => arg.startsWith('-')));
  const positional = args.filter((arg) => !arg.startsWith('-'));
  const unknown = [...flags].filter((flag) => flag !== '--user' && flag !== '--dry-run');
  const action = positional[0];
  if ((action !== 'install' && action !== 'uninstall') || positional.length > 1 || unknown.length > 0) {
    io.stderr.write(`switchboard: ${unknown.length > 0 ? `unknown option ${unknown[0]}; ` : ''}${usage}\n`);
    return 2;
  }
  const user = flags.has('--user');
  const systemctl = io.systemctl ?? realSystemctl;
  const scope = user ? ['--user'] : [];
  const unitPath = user ? join(io.home ?? homedir(), '.config/systemd/user', UNIT_NAME) : join(io.root ?? '/', 'etc/systemd/system', UNIT_NAME);
  const journal = `journalctl${user ? ' --user' : ''} -u switchboard -f`;

  if (action === 'uninstall') {
    const disabled = await systemctl([...scope, 'disable', '--now', UNIT_NAME]);
    if (disabled.code !== 0) io.stderr.write(`systemctl ${[...scope, 'disable', '--now'].join(' ')} switchboard: ${disabled.output.trim() || `exit ${disabled.code}`} (continuing)\n`);
    if (existsSync(unitPath)) {
      try {
        rmSync(unitPath);
      } catch (error) {
        return fail(io, `cannot remove ${unitPath}: ${errorText(error)}${user ? '' : ' (run it with sudo)'}`);
      }
      io.stdout.write(`removed ${unitPath}\n`);
    } else {
      io.stdout.write(`${unitPath} was not installed\n`);
    }
    const reloaded = await systemctl([...scope, 'daemon-reload']);
    if (reloaded.code !== 0) return fail(io, `systemctl ${scope.join(' ')} daemon-reload failed: ${reloaded.output.trim()}`);
    io.stdout.write('switchboard service uninstalled (its data and config are left in place)\n');
    return 0;
  }

  const cwd = io.cwd ?? process.cwd();
  // Secrets are not needed to write a unit; the service reads them when it starts.
  const configPath = locateConfig({ ...(io.configFlag === undefined ? {} : { flag: io.configFlag }), env: io.env, cwd });
  const { config } = loadConfig(configPath, io.env, { requireSecrets: false });
  const dataDir = resolve(dirname(configPath), config.data_dir);
  const gateway = (config as { gateway?: { listen?: string } }).gateway;
  const params: UnitParams = {
    nodePath: io.nodePath ?? process.execPath,
    cliPath: io.cliPath ?? defaultCliPath(),
    configPath,
    dataDir,
    user,
    readyAddress: gateway === undefined ? undefined : (gateway.listen ?? '127.0.0.1:8787'),
    installDir: installRoot(),
  };
  const unit = renderUnit(readTemplate(), params);
  const hidden = hiddenByUnit(unit, params);
  if (hidden.length > 0) return fail(io, hidden.join('\n'));
  if (flags.has('--dry-run')) {
    io.stdout.write(unit);
    return 0;
  }
  try {
    mkdirSync(dirname(unitPath), { recursive: true });
    const backup = backupIfChanged(unitPath, unit);
    if (backup) io.stdout.write(`saved the previous unit as ${backup}\n`);
    // Written next to the target and renamed over it: systemd never reads half a file.
    writeFileSync(`${unitPath}.tmp`, unit, { mode: 0o644 });
    renameSync(`${unitPath}.tmp`, unitPath);
    // A user unit runs as us: create the data_dir now (private), or ReadWritePaths has nothing to open.
    if (user) makeDirectory(dataDir);
  } catch (error) {
    if (error instanceof FileSystemError) return fail(io, error.in({ dataDir, configFile: configPath }).message);
    return fail(io, `cannot write ${unitPath}: ${errorText(error)}${user ? '' : ' (run it with sudo, or use --user)'}`);
  }
  io.stdout.write(`wrote ${unitPath}\n`);
  for (const step of [['daemon-reload'], ['enable', '--now', UNIT_NAME]]) {
    const result = await systemctl([...scope, ...step]);
    if (result.code !== 0) {
      return fail(io, `systemctl ${[...scope, ...step].join(' ')} failed (exit ${result.code}): ${result.output.trim()}\nThe unit is written; see \`systemctl${user ? ' --user' : ''} status switchboard\` and \`${journal}\`.`);
    }
  }
  if (!user && dataDir !== STATE_DIR) {
    io.stdout.write(`note: data_dir is ${dataDir}; the unit lets the service write there, but it must be writable by the service user. data_dir = "${STATE_DIR}" needs no setup.\n`);
  }
  if (params.readyAddress === undefined) io.stdout.write('note: no [gateway] in the config, so the unit has no /readyz readiness probe.\n');
  io.stdout.write(`switchboard service installed and started.\nFollow the logs:  ${journal}\nStatus:           systemctl${user ? ' --user' : ''} status switchboard\n`);
  return 0;
}

/**
 * The unit for this install: the template with ExecStart / ExecStartPost / Documentation
 * pointing at real paths, ReadWritePaths for a data_dir outside the StateDirectory,
 * ProtectHome=read-only when anything lives under /home or /root, and for a user unit no
 * User= / DynamicUser= and WantedBy=default.target.
 */
export function renderUnit(template: string, params: UnitParams): string {
  const underHome = [params.nodePath, params.cliPath, params.configPath, params.dataDir].some((path) => /^\/(home|root|run\/user)(\/|$)/.test(path));
  const execStart = `ExecStart=${[params.nodePath, params.cliPath, 'start', '--config', params.configPath].map(quoteArg).join(' ')}`;
  const lines: string[] = [];
  for (const line of template.split('\n')) {
    const key = /^([A-Za-z]+)=/.exec(line)?.[1];
    switch (key) {
      case 'Documentation':
        lines.push(`Documentation=file://${escapeSpecifiers(join(params.installDir, 'README.md'))}`);
        break;
      case 'ExecStart':
        lines.push(execStart);
        // "-": a data_dir that does not exist yet must not fail the namespace set-up.
        if (params.dataDir !== STATE_DIR || params.user) lines.push(`ReadWritePaths=${quoteArg(`-${params.dataDir}`)}`);
        break;
      case 'ExecStartPost':
        if (params.readyAddress !== undefined) lines.push(`ExecStartPost=${quoteArg(params.nodePath)} -e "${readyProbe(params.readyAddress)}"`);
        break;
      case 'ProtectHome':
        lines.push(underHome || params.user ? 'ProtectHome=read-only' : line);
        break;
      case 'DynamicUser':
      case 'User':
      case 'Group':
      case 'WorkingDirectory':
      case 'StateDirectory':
      case 'StateDirectoryMode':
      case 'CapabilityBoundingSet':
      case 'AmbientCapabilities':
        // A user manager cannot switch users or drop capabilities it does not have.
        if (!params.user) lines.push(line);
        break;
      case 'EnvironmentFile':
        // %h: the user's home; /etc/switchboard/env is root's.
        lines.push(params.user ? 'EnvironmentFile=-%h/.config/switchboard/env' : line);
        break;
      case 'WantedBy':
        lines.push(params.user ? 'WantedBy=default.target' : line);
        break;
      default:
        lines.push(line);
    }
  }
  return lines.join('\n');
}

/**
 * What the unit's sandbox would hide from the service among the paths it needs, one paragraph
 * each (empty when nothing): PrivateTmp=true gives the service an empty /tmp and /var/tmp of its
 * own, ProtectHome=true (or tmpfs) empties /home, /root and /run/user, InaccessiblePaths= hides
 * what it lists (systemd.exec(5), "Sandboxing"). A checkout under /tmp would be a program the
 * service cannot find; a data_dir there would be thrown away at every stop.
 */
export function hiddenByUnit(unit: string, params: UnitParams): string[] {
  const option = (name: string): string[] => [...unit.matchAll(new RegExp(`^${name}=(.*)$`, 'gm'))].map((match) => match[1]!.trim());
  const yes = (value: string | undefined): boolean => value !== undefined && /^(1|yes|true|on)$/i.test(value);
  const rules: Array<{ option: string; dirs: readonly string[]; effect: string }> = [];
  if (yes(option('PrivateTmp').at(-1))) rules.push({ option: 'PrivateTmp=true', dirs: ['/tmp', '/var/tmp'], effect: 'gives the service an empty /tmp and /var/tmp of its own' });
  const home = option('ProtectHome').at(-1);
  if (yes(home) || home === 'tmpfs') rules.push({ option: `ProtectHome=${home}`, dirs: ['/home', '/root', '/run/user'], effect: 'hides /home, /root and /run/user from the service' });
  for (const value of option('InaccessiblePaths')) {
    const dirs = value.split(/\s+/).map((dir) => dir.replace(/^[-+]+/, '')).filter((dir) => dir.startsWith('/'));
    if (dirs.length > 0) rules.push({ option: `InaccessiblePaths=${value}`, dirs, effect: `hides ${dirs.join(', ')} from the service` });
  }
  const needed = [
    { what: 'the program', path: params.cliPath, fix: `put the checkout (or the npm install) elsewhere — e.g. sudo git clone <this repository> /opt/switchboard (or sudo mv ${installRootOf(params.cliPath)} /opt/switchboard) — and run service install from there` },
    { what: 'the Node it runs on', path: params.nodePath, fix: 'install Node (or the checkout that brings it) elsewhere, e.g. under /opt or /usr/local, and run service install from there' },
    { what: 'the config', path: params.configPath, fix: 'put the config in /etc/switchboard (sudo install -d -m 0750 -g switchboard /etc/switchboard; sudo install -m 0640 -g switchboard <your config> /etc/switchboard/config.toml) and pass --config /etc/switchboard/config.toml' },
    { what: 'the data_dir', path: params.dataDir, fix: 'set data_dir = "/var/lib/switchboard" in the config (what the service writes under /tmp would also be thrown away at every stop)' },
  ];
  const problems: string[] = [];
  for (const { what, path, fix } of needed) {
    const real = realOrSelf(path);
    const rule = rules.find((candidate) => candidate.dirs.some((dir) => real === dir || real.startsWith(`${dir}/`)));
    if (rule) {
      problems.push(`the service could not see ${what} (${real}): the unit has ${rule.option}, which ${rule.effect}. Fix: ${fix}.`);
    }
  }
  return problems;
}

/** The path with symlinks resolved as far as it exists (a data_dir may not exist yet). */
function realOrSelf(path: string): string {
  let head = resolve(path);
  const tail: string[] = [];
  while (!existsSync(head) && dirname(head) !== head) {
    tail.unshift(basename(head));
    head = dirname(head);
  }
  try {
    return join(realpathSync(head), ...tail);
  } catch {
    return resolve(path);
  }
}

/** .../dist/app/cli.js → ... */
const installRootOf = (cliPath: string): string => resolve(dirname(cliPath), '../..');

/** `node -e` source that polls http://ADDRESS/readyz until 200 (60 s at most). No `"`, `$` or `%`: systemd would expand them. */
export function readyProbe(listen: string): string {
  const match = /^(.*):(\d+)$/.exec(listen);
  let host = match?.[1] ?? '127.0.0.1';
  if (host === '0.0.0.0' || host === '') host = '127.0.0.1';
  if (host === '[::]') host = '[::1]';
  const url = `http://${host}:${match?.[2] ?? '8787'}/readyz`;
  return `const u='${url}',end=performance.now()+60000;(async()=>{for(;;){try{const r=await fetch(u);if(r.ok)return;}catch{}if(performance.now()>end){console.error('switchboard not ready: '+u);process.exit(1);}await new Promise((r)=>setTimeout(r,500));}})();`;
}

/** Copies an existing, different unit to the first free `.bak`, `.bak.1`, …; returns that path. */
function backupIfChanged(unitPath: string, unit: string): string | undefined {
  if (!existsSync(unitPath) || readFileSync(unitPath, 'utf8') === unit) return undefined;
  let backup = `${unitPath}.bak`;
  for (let n = 1; existsSync(backup); n++) backup = `${unitPath}.bak.${n}`;
  copyFileSync(unitPath, backup);
  return backup;
}

/** A systemd command-line word: `%` and `$` escaped, quoted when it has spaces. */
function quoteArg(arg: string): string {
  const escaped = escapeSpecifiers(arg).replace(/\$/g, '$$$$');
  return /[\s"'\\]/.test(escaped) ? `"${escaped.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"` : escaped;
}

const escapeSpecifiers = (text: string): string => text.replace(/%/g, '%%');

/** The repository (or package) root: app/service.ts and dist/app/service.js both live two levels down. */
function installRoot(): string {
  const here = dirname(fileURLToPath(import.meta.url));
  return here.endsWith(join('dist', 'app')) ? resolve(here, '../..') : resolve(here, '..');
}

function defaultCliPath(): string {
  return join(installRoot(), 'dist/app/cli.js');
}

/** The shipped template (systemd/switchboard.service). */
export function readTemplate(): string {
  return readFileSync(join(installRoot(), 'systemd', UNIT_NAME), 'utf8');
}

const realSystemctl: SystemctlRunner = (args) =>
  new Promise((resolvePromise) => {
    execFile('systemctl', [...args], { timeout: 120_000 }, (error, stdout, stderr) => {
      const code = error === null ? 0 : typeof error.code === 'number' ? error.code : 127;
      resolvePromise({ code, output: `${stdout}${stderr}${error && typeof error.code !== 'number' ? error.message : ''}` });
    });
  });

function fail(io: ServiceIo, message: string): number {
  io.stderr.write(`switchboard: ${message}\n`);
  return 1;
}

function errorText(error: unknown): string {
  const code = (error as NodeJS.ErrnoException).code;
  return code ?? (error instanceof Error ? error.message : String(error));
}
