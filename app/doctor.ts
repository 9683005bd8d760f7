/**
 * `switchboard doctor [--json]`: checks what a self-hoster gets wrong in the first hour — the
 * config, the model key, each channel's credentials, the data directory, free disk, the
 * systemd unit — and prints one line per check (`✓ name — detail` or
 * `✗ name — problem; fix: …`). Exit code 1 when any check failed, 2 on a usage error.
 * Nothing is started and the data_dir lock is not taken, so it runs beside the daemon.
 */
import { accessSync, constants, existsSync, mkdtempSync, readFileSync, rmSync, statSync, statfsSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import pino from 'pino';
import { channelModules, ConfigError, loadConfig, locateConfig } from './config.ts';
import type { Config } from '../src/config/schema.ts';
import { checkChannels, checkEndpoint, type CheckResult } from './doctor-remote.ts';

export type { CheckResult } from './doctor-remote.ts';

export interface DoctorIo {
  readonly stdout: NodeJS.WritableStream;
  readonly stderr: NodeJS.WritableStream;
  readonly env: NodeJS.ProcessEnv;
  /** `--config` given before the command. */
  readonly configFlag?: string;
  /** @default process.cwd() */
  readonly cwd?: string;
  /** For `~/.config/…` lookups. @default os.homedir() */
  readonly home?: string;
  /** Deadline of each network check. @default 8000 */
  readonly timeoutMs?: number;
  /** Where an installed unit may be. @default /etc/systemd/system/switchboard.service, ~/.config/systemd/user/switchboard.service */
  readonly unitPaths?: readonly string[];
}

export const doctorUsage = `Usage: switchboard doctor [--json] [--config FILE]

Checks, without starting anything (it runs beside the daemon): the config; the model
endpoint, with one authenticated call; each channel's credentials; that data_dir is
writable and private; free disk; that the database is whole (PRAGMA quick_check) — or,
with [store] kind = "postgres", that the server answers, the schema version, its
synchronous_commit, the cluster's nodes and who holds which channel; an installed
systemd unit. One line per check:
"✓ check — detail" or "✗ check — problem; fix: …".

Options:
  --json              print [{check, ok, detail, fix}] instead
  -c, --config FILE   the config to check (default: $SWITCHBOARD_CONFIG, ./switchboard.toml,
                      ~/.config/switchboard/config.toml)
  -h, --help          show this help

Exit codes: 0 every check passed (warnings allowed), 1 a check failed, 2 usage error.
`;

/** Under this much free space (bytes, or share of the file system) the disk check warns. */
const LOW_DISK_BYTES = 1024 ** 3;
const LOW_DISK_SHARE = 0.05;

/** Runs every check, prints the report, returns the exit code. */
export async function runDoctor(args: readonly string[], io: DoctorIo): Promise<number> {
  const unknown = args.find((arg) => arg !== '--json');
  if (unknown !== undefined) {
    io.stderr.write(`switchboard: unexpected argument "${unknown}" for "switchboard doctor"\nusage: switchboard doctor [--json] [--config FILE]\n`);
    return 2;
  }
  const results = await collectChecks(io);
  if (args.includes('--json')) io.stdout.write(`${JSON.stringify(results, null, 2)}\n`);
  else io.stdout.write(formatReport(results));
  return results.every((result) => result.ok) ? 0 : 1;
}

/** Every check, in report order. Never throws. */
export async function collectChecks(io: DoctorIo): Promise<CheckResult[]> {
  const timeoutMs = io.timeoutMs ?? 8000;
  const home = io.home ?? homedir();
  const loaded = checkConfig(io, home);
  const results: CheckResult[] = [loaded.result];
  if (loaded.config !== undefined && loaded.file !== undefined) {
    const { config, file } = loaded;
    const pending: Array<Promise<CheckResult>> = [
      checkEndpoint('provider', config.provider, timeoutMs, () => chatProbe(config, timeoutMs)),
      ...config.provider.fallbacks.map((fallback, index) =>
        checkEndpoint(`provider fallback ${index + 1}`, fallback, timeoutMs, () => chatProbe({ ...config, provider: { ...config.provider, ...fallback, fallbacks: [] } }, timeoutMs)),
      ),
    ];
    // Started with the endpoints' (all run at once), reported after them, in the registry's order.
    const channelChecks = checkChannels(channelModules, config.channels, timeoutMs);
    results.push(...(await Promise.all(pending)), ...(await Promise.all(channelChecks)).flat());
    const dataDir = resolve(dirname(file), config.data_dir);
    results.push(checkDataDir(dataDir), checkDisk(dataDir));
    // In a cluster the store is PostgreSQL: the SQLite file in data_dir holds no conversation, so it is not the one checked.
    if (config.store.kind === 'postgres') results.push(...(await (await import('./doctor-store.ts')).checkPostgresStore(config, timeoutMs)));
    else results.push(await checkDatabase(join(dataDir, 'switchboard.db')));
  }
  results.push(checkServiceUnit(io.unitPaths ?? ['/etc/systemd/system/switchboard.service', join(home, '.config/systemd/user/switchboard.service')]));
  return results;
}

/** `✓ name — detail` / `✗ name — problem; fix: …` / `! name — …` (a warning), one per line, and a summary. */
export function formatReport(results: readonly CheckResult[]): string {
  const lines = results.map((result) => {
    const mark = !result.ok ? '✗' : result.warning ? '!' : '✓';
    return `${mark} ${result.check} — ${result.detail}${result.fix && (!result.ok || result.warning) ? `; fix: ${result.fix}` : ''}`;
  });
  const failures = results.filter((result) => !result.ok).length;
  lines.push(failures === 0 ? 'All checks passed.' : `${failures} check${failures === 1 ? '' : 's'} failed.`);
  return `${lines.join('\n')}\n`;
}

function checkConfig(io: DoctorIo, home: string): { result: CheckResult; config?: Config; file?: string } {
  try {
    const file = locateConfig({ ...(io.configFlag === undefined ? {} : { flag: io.configFlag }), env: io.env, cwd: io.cwd ?? process.cwd(), home });
    const { config } = loadConfig(file, io.env);
    const channels = Object.keys(config.channels);
    return { result: { check: 'config', ok: true, detail: `${file} is valid (channels: ${channels.join(', ') || 'none'})` }, config, file };
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    const problems = error.problems.map((problem) => `${problem.path === '' ? (error.file ?? 'config') : problem.path}: ${problem.problem}`);
    const examples = error.problems.flatMap((problem) => (problem.example ? [problem.example] : []));
    return {
      result: {
        check: 'config',
        ok: false,
        detail: `${error.file ?? 'no config file'}: ${problems.join('; ')}`,
        fix: examples.length > 0 ? `e.g. ${examples.join('; ')} (see switchboard.example.toml)` : 'edit the file as the message says (see switchboard.example.toml)',
      },
    };
  }
}

/** The same endpoint the daemon builds, without retries or fallbacks, asked for one tiny answer. */
export async function chatProbe(config: Config, timeoutMs: number): Promise<void> {
  const { buildProvider } = await import('./compose/provider.ts');
  const provider = await buildProvider(
    { ...config, routes: [], provider: { ...config.provider, max_retries: 0, fallbacks: [], fallback_models: [], timeout_seconds: timeoutMs / 1000, max_tokens: 1 } },
    pino({ level: 'silent' }),
  );
  await provider.chat({ system: '', messages: [{ role: 'user', content: 'ping' }], tools: [] }, AbortSignal.timeout(timeoutMs));
}

/** Exists (or can be created), writable, not readable by other users. */
export function checkDataDir(dataDir: string): CheckResult {
  const name = 'data_dir';
  let existing = dataDir;
  while (!existsSync(existing) && dirname(existing) !== existing) existing = dirname(existing);
  let stat;
  try {
    stat = statSync(existing);
  } catch (error) {
    return { check: name, ok: false, detail: `${dataDir}: ${(error as NodeJS.ErrnoException).code ?? String(error)}`, fix: 'set data_dir to a directory Switchboard may create and write' };
  }
  if (!stat.isDirectory()) {
    return { check: name, ok: false, detail: `${existing} is not a directory${existing === dataDir ? '' : `, so ${dataDir} cannot be created`}`, fix: `set data_dir to a directory path, or move ${existing} away` };
  }
  const creatable = existing !== dataDir;
  // A real write, not access(2): root passes access() on read-only mounts, and ACLs lie less to a write.
  try {
    accessSync(existing, constants.W_OK | constants.X_OK);
    rmSync(mkdtempSync(join(existing, '.doctor-')), { recursive: true });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? String(error);
    if (code === 'ENOENT') {
      // mkdir answers ENOENT in a directory that exists: /proc and the like (start would say the same).
      return { check: name, ok: false, detail: `${existing} does not take new directories (a virtual file system such as /proc), so ${dataDir} cannot be created`, fix: 'set data_dir to a directory on an ordinary disk (e.g. /var/lib/switchboard or ./data)' };
    }
    return {
      check: name,
      ok: false,
      detail: creatable ? `${dataDir} does not exist and ${existing} is not writable (${code})` : `${dataDir} is not writable (${code})`,
      fix: creatable ? `mkdir -p ${dataDir} and give it to the user Switchboard runs as` : `chown it to the user Switchboard runs as (or set data_dir elsewhere)`,
    };
  }
  if (creatable) return { check: name, ok: true, detail: `${dataDir} does not exist yet; it will be created under ${existing}` };
  const others = stat.mode & 0o007;
  if (others !== 0) {
    return { check: name, ok: false, detail: `${dataDir} is open to other users (mode ${(stat.mode & 0o777).toString(8)}): conversations and memories are in it`, fix: `chmod 700 ${dataDir}` };
  }
  return { check: name, ok: true, detail: `${dataDir} is writable and private (mode ${(stat.mode & 0o777).toString(8)})` };
}

/** Free space where the database lives; little left is a warning, not a failure. */
export function checkDisk(dataDir: string, limits: { bytes?: number; share?: number } = {}): CheckResult {
  let existing = dataDir;
  while (!existsSync(existing) && dirname(existing) !== existing) existing = dirname(existing);
  try {
    const fs = statfsSync(existing);
    const free = fs.bavail * fs.bsize;
    const share = fs.blocks > 0 ? fs.bavail / fs.blocks : 1;
    const detail = `${formatBytes(free)} free (${Math.round(share * 100)} %) on the file system of ${existing}`;
    if (free < (limits.bytes ?? LOW_DISK_BYTES) || share < (limits.share ?? LOW_DISK_SHARE)) {
      return { check: 'disk', ok: true, warning: true, detail: `only ${detail}`, fix: 'free some space: SQLite needs room for its WAL and checkpoints' };
    }
    return { check: 'disk', ok: true, detail };
  } catch (error) {
    return { check: 'disk', ok: false, detail: `cannot stat the file system of ${existing}: ${(error as NodeJS.ErrnoException).code ?? String(error)}`, fix: 'check data_dir' };
  }
}

/**
 * The database's header and every page (`PRAGMA quick_check`, which start skips on a big
 * database after a clean stop). It only reads, so it runs beside the daemon.
 */
export async function checkDatabase(path: string): Promise<CheckResult> {
  const check = 'database';
  if (!existsSync(path)) return { check, ok: true, detail: `no database yet at ${path} (start creates it)` };
  const [{ default: Database }, { checkDatabaseHeader, damagedDatabaseError, quickCheck }] = await Promise.all([import('better-sqlite3'), import('../src/store/integrity.ts')]);
  const started = performance.now();
  let db: InstanceType<typeof Database> | undefined;
  try {
    checkDatabaseHeader(path);
    // Not readonly: a read-only connection cannot remove the -wal and -shm it makes, and files
    // left by root in the data_dir can keep the service's user out. Nothing is written.
    db = new Database(path, { fileMustExist: true });
    quickCheck(db, path);
  } catch (error) {
    const damaged = damagedDatabaseError(error, path);
    return damaged
      ? { check, ok: false, detail: `${path} is damaged: ${damaged.problem} (${damaged.code})`, fix: 'stop Switchboard, move the file aside and restore the last backup (docs/operating.md, "Backup and restore")' }
      : { check, ok: false, detail: `cannot read ${path}: ${error instanceof Error ? error.message : String(error)}`, fix: 'check the data_dir check above (owner, mode)' };
  } finally {
    db?.close();
  }
  return { check, ok: true, detail: `${path}: ${(statSync(path).size / 1024 ** 2).toFixed(1)} MB, every page read back (quick_check ok, ${Math.round(performance.now() - started)} ms)` };
}

function formatBytes(bytes: number): string {
  if (bytes >= 1024 ** 3) return `${(bytes / 1024 ** 3).toFixed(1)} GB`;
  return `${Math.round(bytes / 1024 ** 2)} MB`;
}

/** An installed unit must point at a node binary and CLI (and config) that exist. */
export function checkServiceUnit(paths: readonly string[]): CheckResult {
  const found = paths.filter((path) => existsSync(path));
  if (found.length === 0) return { check: 'service', ok: true, detail: 'no systemd unit installed (optional: switchboard service install)' };
  const problems: string[] = [];
  for (const path of found) {
    let text: string;
    try {
      text = readFileSync(path, 'utf8');
    } catch (error) {
      problems.push(`${path} cannot be read (${(error as NodeJS.ErrnoException).code ?? String(error)})`);
      continue;
    }
    const execStart = /^ExecStart=(.*)$/m.exec(text)?.[1];
    if (execStart === undefined) {
      problems.push(`${path} has no ExecStart=`);
      continue;
    }
    const words = splitCommandLine(execStart);
    const binary = words[0]?.replace(/^[-@:+!]+/, '');
    if (!binary || !isExecutable(binary)) problems.push(`${path}: ExecStart binary ${binary ?? '(none)'} does not exist or is not executable`);
    const script = words.find((word) => /\.(js|ts)$/.test(word));
    if (script && !existsSync(script)) problems.push(`${path}: ${script} does not exist (was dist/ built?)`);
    const configIndex = words.findIndex((word) => word === '--config' || word === '-c');
    const configPath = configIndex >= 0 ? words[configIndex + 1] : undefined;
    if (configPath && !configPath.includes('$') && !existsSync(configPath)) problems.push(`${path}: config ${configPath} does not exist`);
  }
  if (problems.length > 0) return { check: 'service', ok: false, detail: problems.join('; '), fix: 'run `switchboard service install` again from this install (it keeps a .bak of the old unit)' };
  return { check: 'service', ok: true, detail: `${found.join(', ')}: ExecStart points at an existing install` };
}

function isExecutable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return statSync(path).isFile();
  } catch {
    return false;
  }
}

/** systemd's word splitting, enough for ExecStart: double or single quotes, backslash escapes. */
function splitCommandLine(line: string): string[] {
  const words: string[] = [];
  const pattern = /"((?:[^"\\]|\\.)*)"|'([^']*)'|(\S+)/g;
  for (const match of line.matchAll(pattern)) words.push((match[1] ?? match[2] ?? match[3] ?? '').replace(/\\(.)/g, '$1'));
  return words;
}
