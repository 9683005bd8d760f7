/**
 * The environment a child process gets: a short list of harmless variables, never the
 * daemon's own (which holds model keys and bot tokens).
 */

/** Variables every child gets when the source has them (HOME is replaced by the workspace). */
export const BASE_ENV_NAMES: readonly string[] = ['PATH', 'HOME', 'LANG', 'LC_ALL', 'TZ', 'TERM'];

/** Names that look like they hold a secret; never passed, even when listed in a passthrough. */
export const SECRET_NAME = /(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL)/i;

const VALID_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * Builds a child environment: PATH, HOME, LANG, LC_ALL, TZ, TERM and the `passthrough` names
 * that exist in `source`, minus anything whose name matches {@link SECRET_NAME}.
 * `home` (normally the workspace) replaces HOME so `~` and dotfile-reading tools stay inside.
 * TERM defaults to `dumb` so programs do not colour their output for the model.
 *
 * @example cleanEnv(['GOPATH'], process.env, '/srv/switchboard/workspace')
 */
export function cleanEnv(passthrough: readonly string[], source: NodeJS.ProcessEnv = process.env, home?: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const name of [...BASE_ENV_NAMES, ...passthrough]) {
    if (!VALID_NAME.test(name) || SECRET_NAME.test(name)) continue;
    const value = source[name];
    if (value !== undefined) env[name] = value;
  }
  if (home !== undefined) env.HOME = home;
  env.TERM ??= 'dumb';
  return env;
}

/** Why a passthrough name would be dropped, or undefined when it is fine (for config validation). */
export function passthroughProblem(name: string): string | undefined {
  if (!VALID_NAME.test(name)) return `"${name}" is not a valid environment variable name`;
  if (SECRET_NAME.test(name)) return `"${name}" looks like a secret (KEY, TOKEN, SECRET, PASSWORD, CREDENTIAL) and is never passed to commands`;
  return undefined;
}

/** Values of the source's secret-looking variables (8+ characters), to scrub from tool output. */
export function secretValues(source: NodeJS.ProcessEnv = process.env): string[] {
  return Object.entries(source)
    .filter((entry): entry is [string, string] => SECRET_NAME.test(entry[0]) && typeof entry[1] === 'string' && entry[1].length >= 8)
    .map(([, value]) => value);
}

/** Replaces every occurrence of the given secret values with `[redacted]`. */
export function redactSecrets(text: string, secrets: readonly string[]): string {
  let out = text;
  for (const secret of secrets) if (out.includes(secret)) out = out.split(secret).join('[redacted]');
  return out;
}
