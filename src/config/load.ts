/**
 * Finds, reads and validates the config file. Every problem is reported at once, each with
 * the key's path, what is wrong and an example of a right value.
 *
 * Lookup: `--config`, else `$SWITCHBOARD_CONFIG`, else `./switchboard.toml`, else
 * `~/.config/switchboard/config.toml`. `${NAME}` in a string is read from the environment;
 * `${file:/path}` from a file (trailing newline dropped), for Docker/systemd secrets.
 */
import { existsSync, readFileSync } from 'node:fs';
import { homedir, userInfo } from 'node:os';
import { resolve } from 'node:path';
import { parse, stringify, TomlError } from 'smol-toml';
import * as v from 'valibot';
import { schemaAt, unwrap, type Config, type SchemaNode } from './schema.ts';

/** Exit code for a config problem (EX_CONFIG from sysexits.h). */
export const EXIT_CONFIG = 78;

export interface ConfigProblem {
  /** Dotted key path, e.g. "agent.history_turns" ("" for the file itself). */
  readonly path: string;
  readonly problem: string;
  /** A right value, as a TOML line. */
  readonly example?: string;
}

export class ConfigError extends Error {
  readonly file: string | undefined;
  readonly problems: readonly ConfigProblem[];

  constructor(file: string | undefined, problems: readonly ConfigProblem[]) {
    super(formatProblems(file, problems));
    this.name = 'ConfigError';
    this.file = file;
    this.problems = problems;
  }
}

export interface LoadedConfig<C = Config> {
  readonly file: string;
  readonly config: C;
}

export interface LocateOptions {
  readonly flag?: string;
  readonly env?: NodeJS.ProcessEnv;
  readonly cwd?: string;
  readonly home?: string;
}

/** The config file to use, or a ConfigError listing where we looked. */
export function locateConfig(options: LocateOptions = {}): string {
  const env = options.env ?? process.env;
  const cwd = options.cwd ?? process.cwd();
  if (options.flag !== undefined) return resolve(cwd, options.flag);
  if (env.SWITCHBOARD_CONFIG) return resolve(cwd, env.SWITCHBOARD_CONFIG);
  const candidates = [resolve(cwd, 'switchboard.toml'), resolve(options.home ?? homedir(), '.config/switchboard/config.toml')];
  const found = candidates.find((candidate) => existsSync(candidate));
  if (found) return found;
  throw new ConfigError(undefined, [
    {
      path: '',
      problem: `no config file found (looked for --config, $SWITCHBOARD_CONFIG, ${candidates.join(', ')}). Copy switchboard.example.toml to ./switchboard.toml and edit it`,
    },
  ]);
}

export interface LoadOptions {
  /**
   * Missing `${NAME}` environment variables are errors (the daemon). Operator commands that
   * need no secrets (`switchboard memory …`) turn this off; the reference stays as text. A
   * function decides per key (its path, e.g. ["gateway", "token"]): `chat` needs the model's
   * secrets but not the gateway's or the channels' it never opens.
   * @default true
   */
  readonly requireSecrets?: boolean | ((path: readonly string[]) => boolean);
}

/** Reads and validates config files against one schema (the composition root's, channels included). */
export interface ConfigLoader<C> {
  /** Reads and validates a config file. Throws ConfigError. */
  loadConfig(file: string, env?: NodeJS.ProcessEnv, options?: LoadOptions): LoadedConfig<C>;
  /** Validates config text (TOML). `file` is only used in messages. Throws ConfigError. */
  parseConfig(text: string, file: string | undefined, env?: NodeJS.ProcessEnv, options?: LoadOptions): C;
}

/**
 * The loader for `schema` — configSchema() with the channels' tables, which src/ does not know:
 * app/config.ts makes the one the program uses.
 */
export function createConfigLoader<S extends v.GenericSchema>(schema: S): ConfigLoader<v.InferOutput<S>> {
  const parseConfig = (text: string, file: string | undefined, env: NodeJS.ProcessEnv = process.env, options: LoadOptions = {}): v.InferOutput<S> => parseWith(schema, text, file, env, options);
  return {
    parseConfig,
    loadConfig: (file, env = process.env, options = {}) => {
      let text: string;
      try {
        text = readFileSync(file, 'utf8');
      } catch (error) {
        const code = (error as NodeJS.ErrnoException).code;
        throw new ConfigError(file, [{ path: '', problem: code === 'ENOENT' ? 'the file does not exist' : unreadable(file, code ?? String(error)) }]);
      }
      return { file, config: parseConfig(text, file, env, options) };
    },
  };
}

function parseWith<S extends v.GenericSchema>(schema: S, text: string, file: string | undefined, env: NodeJS.ProcessEnv, options: LoadOptions): v.InferOutput<S> {
  let raw: unknown;
  try {
    raw = parse(text);
  } catch (error) {
    const where = error instanceof TomlError ? ` at line ${error.line}, column ${error.column}` : '';
    const reason = error instanceof Error ? error.message.split('\n')[0] : String(error);
    throw new ConfigError(file, [{ path: '', problem: `is not valid TOML${where}: ${reason}` }]);
  }
  const problems: ConfigProblem[] = [];
  const interpolated = interpolate(raw, [], env, problems, options.requireSecrets ?? true);
  const result = v.safeParse(schema, interpolated, { abortEarly: false });
  for (const issue of result.issues ?? []) {
    const path = (issue.path ?? []).map((item) => String(item.key));
    const unknownKey = issue.type === 'strict_object' && issue.expected === 'never';
    const missing = issue.type === 'strict_object' && !unknownKey && issue.input === undefined;
    const key = path.join('.');
    if (problems.some((problem) => problem.path === key)) continue;
    // A rule across keys (v.check on a table): its message says what is wrong.
    if (issue.type === 'check') {
      problems.push({ path: key, problem: issue.message });
      continue;
    }
    problems.push(describe(schema, unknownKey ? 'unknown' : missing ? 'missing' : 'invalid', path, issue.input));
  }
  if (problems.length > 0 || !result.success) throw new ConfigError(file, problems);
  return result.output;
}

/** Why `file` cannot be read ("cannot be read (…)…"), naming the user Switchboard runs as when it lacks permission. */
function unreadable(file: string, code: string): string {
  if (code === 'EISDIR') return 'is a directory, not a file (EISDIR)';
  if (code !== 'EACCES' && code !== 'EPERM') return `cannot be read (${code})`;
  let user = `uid ${process.getuid?.() ?? '?'}`;
  try {
    user = `${userInfo().username} (${user})`;
  } catch {
    // no passwd entry (a container): the uid it is
  }
  return `cannot be read (${code}): Switchboard runs as ${user}, who may not read it; let that user read it (e.g. sudo chgrp <its group> ${file} && sudo chmod 640 ${file}) or run Switchboard as a user who may`;
}

function interpolate(value: unknown, path: string[], env: NodeJS.ProcessEnv, problems: ConfigProblem[], requireSecrets: boolean | ((path: readonly string[]) => boolean)): unknown {
  if (typeof value === 'string') {
    return value.replace(/\$\{([^}]*)\}/g, (whole, name: string) => {
      if (name.startsWith('file:')) {
        const secretFile = name.slice(5);
        try {
          return readFileSync(secretFile, 'utf8').replace(/\r?\n$/, '');
        } catch (error) {
          const code = (error as NodeJS.ErrnoException).code ?? String(error);
          problems.push({ path: path.join('.'), problem: `secret file ${secretFile} ${unreadable(secretFile, code)}` });
          return whole;
        }
      }
      if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) {
        problems.push({ path: path.join('.'), problem: `"${whole}" is not a valid reference; use \${ENV_NAME} or \${file:/path/to/secret}` });
        return whole;
      }
      const found = env[name];
      const required = typeof requireSecrets === 'function' ? requireSecrets(path) : requireSecrets;
      if ((found === undefined || found === '') && !required) return whole;
      if (found === undefined || found === '') {
        problems.push({
          path: path.join('.'),
          problem: `environment variable ${name} is not set (the config reads it as ${whole}); export ${name}=… before starting, or put it in the service's EnvironmentFile`,
        });
        return whole;
      }
      return found;
    });
  }
  if (Array.isArray(value)) return value.map((item, index) => interpolate(item, [...path, String(index)], env, problems, requireSecrets));
  if (typeof value === 'object' && value !== null && !(value instanceof Date)) {
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, interpolate(item, [...path, key], env, problems, requireSecrets)]));
  }
  return value;
}

function describe(root: unknown, kind: 'unknown' | 'missing' | 'invalid', path: string[], value: unknown): ConfigProblem {
  const key = path.join('.');
  const schema = schemaAt(root, path);
  const example = schema ? exampleLine(path, schema) : undefined;
  const withExample = (problem: string): ConfigProblem => (example ? { path: key, problem, example } : { path: key, problem });
  if (kind === 'unknown' || !schema) {
    const parent = schemaAt(root, path.slice(0, -1));
    const known = Object.keys(parent ? (unwrap(parent).base.entries ?? {}) : {});
    const name = path.at(-1) ?? '';
    const close = known.find((candidate) => editDistance(candidate, name) <= 2);
    const hint = close ? `did you mean "${close}"? ` : '';
    return { path: key, problem: `unknown key; ${hint}known keys here: ${known.join(', ') || '(none)'}` };
  }
  if (kind === 'missing') return withExample('is required but missing');
  return withExample(`${expected(schema)}, got ${render(value)}`);
}

function expected(schema: SchemaNode): string {
  const { base, actions } = unwrap(schema);
  const requirement = (type: string): unknown => actions.find((action) => action.type === type)?.requirement;
  if (base.type === 'picklist') {
    const options = base.options ?? [];
    return options.length === 1 ? `must be ${JSON.stringify(options[0])}` : `must be one of ${options.map((o) => JSON.stringify(o)).join(', ')}`;
  }
  const range = [
    requirement('min_value') === undefined ? '' : `≥ ${String(requirement('min_value'))}`,
    requirement('gt_value') === undefined ? '' : `> ${String(requirement('gt_value'))}`,
    requirement('max_value') === undefined ? '' : `≤ ${String(requirement('max_value'))}`,
  ].filter(Boolean);
  const bounds = range.length > 0 ? ` ${range.join(' and ')}` : '';
  switch (base.type) {
    case 'number':
      return `must be a ${actions.some((action) => action.type === 'integer') ? 'whole number' : 'number'}${bounds}`;
    case 'string':
      {
        // Every pattern in the schema carries its own description (schema.test checks it).
        const pattern = actions.find((action) => action.type === 'regex');
        if (pattern) return `must be ${typeof pattern.message === 'string' ? pattern.message : 'text of the form shown in the example'}`;
      }
      return actions.some((action) => action.type === 'non_empty') ? 'must be a non-empty string' : 'must be a string';
    case 'boolean':
      return 'must be true or false';
    case 'strict_object':
    case 'object':
    case 'record':
      return 'must be a table';
    case 'array':
      return 'must be a list';
    case 'union': {
      // A union of literals and booleans (`vision = "auto" | true | false`).
      const choices = (base.options ?? []).map((option) => {
        const node = option as SchemaNode & { literal?: unknown };
        return node.type === 'literal' ? JSON.stringify(node.literal) : node.type === 'boolean' ? 'true, false' : `a ${node.type}`;
      });
      return `must be one of ${choices.join(', ')}`;
    }
    default:
      return 'has the wrong type';
  }
}

function exampleLine(path: string[], schema: SchemaNode): string | undefined {
  const { base, actions } = unwrap(schema);
  const example = actions.find((action) => action.type === 'examples')?.examples?.[0];
  const key = path.at(-1);
  if (example === undefined || key === undefined) {
    return base.type === 'strict_object' && path.length > 0 ? `[${path.join('.')}]` : undefined;
  }
  const parent = path.slice(0, -1);
  // A list of tables is written [[name]] (mcp.servers.0.name → [[mcp.servers]] name = …).
  const section = parent.length === 0 ? '' : /^\d+$/.test(parent.at(-1)!) ? `[[${parent.slice(0, -1).join('.')}]] ` : `[${parent.join('.')}] `;
  return `${section}${key} = ${inlineToml(example)}`;
}

/** A TOML value on one line: tables inline (`{ A = "b" }`), everything else as TOML writes it. */
function inlineToml(value: unknown): string {
  if (typeof value === 'object' && value !== null && !Array.isArray(value) && !(value instanceof Date)) {
    const entries = Object.entries(value).map(([key, item]) => `${/^[A-Za-z0-9_-]+$/.test(key) ? key : JSON.stringify(key)} = ${inlineToml(item)}`);
    return entries.length === 0 ? '{}' : `{ ${entries.join(', ')} }`;
  }
  return stringify({ v: value }).trim().slice('v = '.length);
}

function render(value: unknown): string {
  if (value === undefined) return 'nothing';
  if (typeof value === 'object' && value !== null) return Array.isArray(value) ? 'a list' : 'a table';
  return JSON.stringify(value);
}

function editDistance(a: string, b: string): number {
  const row = Array.from({ length: b.length + 1 }, (_, index) => index);
  for (let i = 1; i <= a.length; i++) {
    let diagonal = row[0]!;
    row[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const above = row[j]!;
      row[j] = Math.min(row[j]! + 1, row[j - 1]! + 1, diagonal + (a[i - 1] === b[j - 1] ? 0 : 1));
      diagonal = above;
    }
  }
  return row[b.length]!;
}

/** How a report at start ends: nothing runs until the file is fixed. */
const startEnding = 'Nothing was started. Fix the config and start again (see switchboard.example.toml).';

/**
 * The human-readable report printed on stderr before exiting with {@link EXIT_CONFIG}.
 * `ending` says what happens now (a reload ends differently: the daemon keeps running).
 */
export function formatProblems(file: string | undefined, problems: readonly ConfigProblem[], ending = startEnding): string {
  const lines = [`Config error${file ? ` in ${file}` : ''}:`];
  for (const problem of problems) {
    lines.push(`  ${problem.path === '' ? '(file)' : problem.path}: ${problem.problem}`);
    if (problem.example) lines.push(`      e.g. ${problem.example}`);
  }
  lines.push(ending);
  return lines.join('\n');
}
