/**
 * Secrets never reach the console page. In the config file's text, a secret written literally
 * (`token = "abc…"`) is shown as {@link masked}; a reference (`"${NAME}"`, `"${file:/path}"`) is
 * not a secret and is shown as it is. When an edited copy comes back, each masked value is put
 * back from the file on disk (matched by table and key), so saving never needs the secret.
 * The effective config (references already resolved) has every secret value masked.
 */

export const masked = '"••••••••"';

/** Keys whose values are secrets (api_key, api_keys, bot_token, signing_secret, password…), and tables of them. */
const secretKey = /(token|key|keys|secret|password|credentials)$/i;
const secretTable = /^(env|headers)$/i;

/** A line `key = value` (one line only; a value that spans lines is left alone). */
const assignment = /^(\s*)([A-Za-z0-9_-]+|"[^"]*")(\s*=\s*)(.*?)(\s*(?:#.*)?)$/;
const header = /^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(?:#.*)?$/;

/** True when a value holds a string that is not just a `${…}` reference. */
function hasLiteral(value: string): boolean {
  const strings = value.match(/"(?:[^"\\]|\\.)*"|'[^']*'/g) ?? [];
  return strings.some((s) => !/^["']\$\{[^}]+\}["']$/.test(s));
}

interface Slot {
  readonly where: string;
  readonly value: string;
}

function scan(text: string, onLine: (line: string, where: string | undefined, match: RegExpExecArray | null) => string): string {
  let table = '';
  const seen = new Map<string, number>();
  return text
    .split('\n')
    .map((line) => {
      const head = header.exec(line);
      if (head) {
        table = head[1]!.trim();
        return onLine(line, undefined, null);
      }
      const match = assignment.exec(line);
      if (!match || !(secretKey.test(match[2]!.replace(/"/g, '')) || secretTable.test(match[2]!))) return onLine(line, undefined, null);
      const base = `${table}.${match[2]}`;
      const n = seen.get(base) ?? 0;
      seen.set(base, n + 1);
      return onLine(line, `${base}#${n}`, match);
    })
    .join('\n');
}

/** The file's text with literal secrets replaced by {@link masked}. */
export function maskText(text: string): string {
  return scan(text, (line, where, match) => (where && match && hasLiteral(match[4]!) ? `${match[1]}${match[2]}${match[3]}${masked}${match[5]}` : line));
}

/**
 * Puts the secrets of `original` back where `edited` still shows {@link masked}. Returns the
 * text, or the keys whose masked value has no original to restore (a new key must be typed in full).
 */
export function unmaskText(edited: string, original: string): { text: string; missing: string[] } {
  const slots = new Map<string, Slot>();
  scan(original, (line, where, match) => {
    if (where && match) slots.set(where, { where, value: match[4]! });
    return line;
  });
  const missing: string[] = [];
  const text = scan(edited, (line, where, match) => {
    if (!where || !match || match[4] !== masked) return line;
    const slot = slots.get(where);
    if (!slot || !hasLiteral(slot.value)) {
      missing.push(where.split('#')[0]!.replace(/^\./, ''));
      return line;
    }
    return `${match[1]}${match[2]}${match[3]}${slot.value}${match[5]}`;
  });
  return { text, missing };
}

/** A copy of a config object with every secret value masked. */
export function maskObject(value: unknown, key = ''): unknown {
  if (Array.isArray(value)) return value.map((item) => maskObject(item, key));
  if (value !== null && typeof value === 'object') {
    const secretHere = secretTable.test(key);
    return Object.fromEntries(Object.entries(value as Record<string, unknown>).map(([k, v]) => [k, secretHere && typeof v === 'string' ? '••••••••' : maskObject(v, k)]));
  }
  if (typeof value === 'string' && secretKey.test(key) && value !== '') return '••••••••';
  return value;
}
