/**
 * The security policy handed to every tool factory that touches the machine. Built once by
 * the composition root from `[security]` in the config; tools never read global state.
 */
import { isAbsolute, resolve } from 'node:path';
import { AUTONOMY_LEVELS, type Autonomy } from './autonomy.ts';
import { createCommandPolicy, type CommandPolicy } from './commands.ts';
import { passthroughProblem } from './env.ts';
import { isInside } from './paths.ts';

export interface SecurityPolicy {
  /** Absolute path of the workspace: file tools stay inside it, commands run in it, HOME points to it. */
  readonly workspace: string;
  /** How much runs without asking; see `decide`. */
  readonly autonomy: Autonomy;
  /** Programs the shell tool may run, with their risk. */
  readonly commands: CommandPolicy;
  /** Extra environment variable names passed to commands (secret-looking names never are). */
  readonly envPassthrough: readonly string[];
  /** Default and longest time a command may run, in milliseconds. */
  readonly commandTimeoutMs: number;
  /** Most bytes of output a tool returns to the model (command output, file reads, search results). */
  readonly maxOutputBytes: number;
  /** Largest file a command may write (RLIMIT_FSIZE of every process it runs), in bytes. */
  readonly maxWriteBytes: number;
}

export interface SecurityPolicyOptions {
  /** Absolute path of the workspace (`[security] workspace`); required. */
  readonly workspace: string;
  /** `[security] autonomy`. @default 'supervised' */
  readonly autonomy?: Autonomy;
  /** `[security] allowed_commands`: replaces the default allowlist. @default DEFAULT_COMMANDS */
  readonly allowedCommands?: readonly string[];
  /** `[security] extra_allowed_commands`: added to the allowlist as medium risk. @default [] */
  readonly extraAllowedCommands?: readonly string[];
  /** `[security] env_passthrough`: environment variables commands may see besides PATH, HOME, LANG, LC_ALL, TZ, TERM. @default [] */
  readonly envPassthrough?: readonly string[];
  /** `[security] command_timeout_ms`. @default 60000 */
  readonly commandTimeoutMs?: number;
  /** `[security] max_output_bytes`. @default 65536 */
  readonly maxOutputBytes?: number;
  /** `[security] max_write_mb`, in bytes. @default 268435456 (256 MiB) */
  readonly maxWriteBytes?: number;
}

export const DEFAULT_COMMAND_TIMEOUT_MS = 60_000;
export const DEFAULT_MAX_OUTPUT_BYTES = 64 * 1024;
export const DEFAULT_MAX_WRITE_BYTES = 256 * 1024 * 1024;

/**
 * Validates the options eagerly and fills in defaults. Throws a TypeError that names the
 * config key and quotes the bad value.
 *
 * @example createSecurityPolicy({ workspace: '/var/lib/switchboard/workspace', autonomy: 'supervised' })
 */
export function createSecurityPolicy(options: SecurityPolicyOptions): SecurityPolicy {
  const { workspace } = options;
  if (typeof workspace !== 'string' || !isAbsolute(workspace)) {
    throw new TypeError(`[security] workspace must be an absolute path, got ${JSON.stringify(workspace)}`);
  }
  const root = resolve(workspace);
  if (root === '/' || ['/proc', '/sys', '/dev'].some((prefix) => isInside(prefix, root))) {
    throw new TypeError(`[security] workspace ${JSON.stringify(workspace)} is a system location; use a dedicated folder such as /var/lib/switchboard/workspace`);
  }
  const autonomy = options.autonomy ?? 'supervised';
  if (!AUTONOMY_LEVELS.includes(autonomy)) {
    throw new TypeError(`[security] autonomy must be one of ${AUTONOMY_LEVELS.map((a) => `"${a}"`).join(', ')}, got ${JSON.stringify(autonomy)}`);
  }
  const envPassthrough = options.envPassthrough ?? [];
  if (!Array.isArray(envPassthrough)) throw new TypeError(`[security] env_passthrough must be a list of names, got ${JSON.stringify(envPassthrough)}`);
  for (const name of envPassthrough) {
    const problem = passthroughProblem(String(name));
    if (problem !== undefined) throw new TypeError(`[security] env_passthrough: ${problem}; remove it`);
  }
  return {
    workspace: root,
    autonomy,
    commands: createCommandPolicy({ allowedCommands: options.allowedCommands, extraAllowedCommands: options.extraAllowedCommands }),
    envPassthrough: [...envPassthrough],
    commandTimeoutMs: positiveInteger('command_timeout_ms', options.commandTimeoutMs ?? DEFAULT_COMMAND_TIMEOUT_MS),
    maxOutputBytes: positiveInteger('max_output_bytes', options.maxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES),
    maxWriteBytes: positiveInteger('max_write_mb', options.maxWriteBytes ?? DEFAULT_MAX_WRITE_BYTES),
  };
}

function positiveInteger(key: string, value: number): number {
  if (!Number.isInteger(value) || value <= 0) throw new TypeError(`[security] ${key} must be a positive whole number, got ${JSON.stringify(value)}`);
  return value;
}
