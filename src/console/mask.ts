/**
 * Secrets never reach the console page. The config file is parsed (smol-toml) and every string
 * is judged by its TOML path, however it is written — a table, a dotted or quoted key, an inline
 * table, an array over several lines: a value under a secret key (`api_key`, `password`…) or in
 * an `env` / `headers` table is shown as {@link masked}, and so is the password in a URL
 * (`postgres://u:••••••••@db`) or a secret query parameter anywhere. A reference (`"${NAME}"`,
 * `"${file:/path}"`) is not a secret and is shown as it is.
 *
 * When an edited copy comes back, each {@link mark} is put back from the file on disk at the
 * same path only, and only where that path held a secret there; a mark anywhere else (inside
 * another string, under another key, a table that moved) is refused with the path named and
 * no value. The effective config (references resolved) is masked the same way, by path.
 */
import { parse, TomlError } from 'smol-toml';
import { tomlStrings, type TomlPath } from './toml-strings.ts';

/** What a secret is shown as. */
export const mark = '••••••••';
/** A masked secret as written in the file. */
export const masked = `"${mark}"`;

/** Keys whose values are secrets (api_key, api_keys, bot_token, signing_secret, password…), and tables of them. */
const secretKey = /(token|key|keys|secret|password|passwd|credentials)$/i;
const secretTable = /^(env|headers)$/i;
/** Query parameters that carry a secret (`?access_token=…`, `&sig=…`). */
const secretParam = /(token|key|secret|passw|pwd|sig|auth|credential)/i;
const reference = /^\$\{[^}]+\}$/;

/** The file on disk cannot be shown safely (not TOML, or a shape the masking does not know). */
export class UnshowableConfig extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UnshowableConfig';
  }
}

/** A secret key, or anything inside a secret key's value or an `env` / `headers` table. */
export function isSecretPath(path: TomlPath): boolean {
  const names = path.filter((part): part is string => typeof part === 'string');
  return names.some((name) => secretKey.test(name)) || names.slice(0, -1).some((name) => secretTable.test(name));
}

/** `mcp.servers[0].headers.Authorization`: how problems name a path (never with its value). */
export function pathText(path: TomlPath): string {
  return path.map((part, i) => (typeof part === 'number' ? `[${part}]` : `${i === 0 ? '' : '.'}${/^[A-Za-z0-9_-]+$/.test(part) ? part : JSON.stringify(part)}`)).join('');
}

/** The spans of a URL's userinfo secret (the password, or a lone user name: often a token) and of secret query values. */
function urlSecrets(value: string): Array<[number, number]> {
  const spans: Array<[number, number]> = [];
  for (const match of value.matchAll(/[A-Za-z][A-Za-z0-9+.-]*:\/\/([^\s/?#]*)/g)) {
    const authority = match[1]!;
    const at = authority.lastIndexOf('@');
    if (at <= 0) continue;
    const start = match.index + match[0].length - authority.length;
    const colon = authority.slice(0, at).indexOf(':');
    spans.push(colon >= 0 ? [start + colon + 1, start + at] : [start, start + at]);
  }
  for (const match of value.matchAll(/[?&]([^=&#\s]*)=([^&#\s]*)/g)) {
    if (!secretParam.test(match[1]!) || match[2] === '') continue;
    const end = match.index + match[0].length;
    spans.push([end - match[2]!.length, end]);
  }
  return spans.filter(([start, end]) => end > start && !reference.test(value.slice(start, end))).sort((a, b) => a[0] - b[0]);
}

/**
 * How a string at `path` is shown: undefined when it holds no secret, else the shown text and
 * the secret parts it hides, in order (each shown as {@link mark}).
 */
export function maskString(value: string, path: TomlPath): { shown: string; parts: string[] } | undefined {
  if (value === '') return undefined;
  if (isSecretPath(path)) return reference.test(value) ? undefined : { shown: mark, parts: [value] };
  const spans = urlSecrets(value);
  if (spans.length === 0) return undefined;
  let shown = '';
  let last = 0;
  const parts: string[] = [];
  for (const [start, end] of spans) {
    if (start < last) continue;
    shown += value.slice(last, start) + mark;
    parts.push(value.slice(start, end));
    last = end;
  }
  return { shown: shown + value.slice(last), parts };
}

/** Every string leaf of a parsed document, with its path. */
function* leaves(value: unknown, path: Array<string | number> = []): Generator<{ path: TomlPath; value: string }> {
  if (typeof value === 'string') yield { path, value };
  else if (Array.isArray(value)) for (const [i, item] of value.entries()) yield* leaves(item, [...path, i]);
  else if (value !== null && typeof value === 'object' && !(value instanceof Date)) for (const [key, item] of Object.entries(value)) yield* leaves(item, [...path, key]);
}

/** Every key of a parsed document, with its path. */
function* keys(value: unknown, path: Array<string | number> = []): Generator<{ path: TomlPath; key: string }> {
  if (Array.isArray(value)) for (const [i, item] of value.entries()) yield* keys(item, [...path, i]);
  else if (value !== null && typeof value === 'object' && !(value instanceof Date)) {
    for (const [key, item] of Object.entries(value)) {
      yield { path: [...path, key], key };
      yield* keys(item, [...path, key]);
    }
  }
}

/** A TOML basic string holding `value`. */
function basicString(value: string): string {
  const escapes: Record<string, string> = { '\b': '\\b', '\t': '\\t', '\n': '\\n', '\f': '\\f', '\r': '\\r', '"': '\\"', '\\': '\\\\' };
  // eslint-disable-next-line no-control-regex -- control characters are exactly what must be escaped
  return `"${value.replace(/[\u0000-\u001f\u007f"\\]/g, (c) => escapes[c] ?? `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`)}"`;
}

/** The value of one string literal, read by smol-toml. */
const decode = (literal: string): string => (parse(`v = ${literal}`) as { v: string }).v;

function parsed(text: string, what: string): Record<string, unknown> {
  try {
    return parse(text);
  } catch (error) {
    const where = error instanceof TomlError ? ` (line ${error.line}, column ${error.column})` : '';
    throw new UnshowableConfig(`${what} is not valid TOML${where}`);
  }
}

/** The file's text with every secret replaced by {@link mark}; comments and layout kept. Throws UnshowableConfig. */
export function maskText(text: string): string {
  parsed(text, 'the config file');
  let strings;
  try {
    strings = tomlStrings(text);
  } catch (error) {
    throw new UnshowableConfig(`the config file could not be read for masking: ${error instanceof Error ? error.message : String(error)}`);
  }
  let out = '';
  let last = 0;
  for (const { path, start, end } of strings) {
    const shown = maskString(decode(text.slice(start, end)), path);
    if (!shown) continue;
    out += text.slice(last, start) + (shown.shown === mark ? masked : basicString(shown.shown));
    last = end;
  }
  out += text.slice(last);
  // Checked again on the result, by the parser: a string the walk above missed is not shown.
  for (const leaf of leaves(parsed(out, 'the masked config'))) {
    if (maskString(leaf.value, leaf.path)?.parts.some((part) => part !== mark)) throw new UnshowableConfig(`the config file could not be shown with its secrets masked (at ${pathText(leaf.path)}); edit it on disk`);
  }
  return out;
}

const missing = (path: TomlPath): string => `${pathText(path)}: a masked secret with no saved value; type the value or a "\${NAME}" reference`;
const misplaced = (path: TomlPath): string =>
  `${pathText(path)}: "${mark}" stands for a secret saved at this very key, and none is saved here (or it was moved, or changed around); type the value or a "\${NAME}" reference`;

/** The value at `path` in a parsed document. */
function at(document: unknown, path: TomlPath): unknown {
  let value = document;
  for (const part of path) value = value !== null && typeof value === 'object' ? (value as Record<string | number, unknown>)[part] : undefined;
  return value;
}

/** True when each array element on the way names itself (`name = …`) the same in both. */
function sameElements(edited: unknown, original: unknown, path: TomlPath): boolean {
  return path.every((part, i) => {
    if (typeof part !== 'number') return true;
    const a = at(edited, path.slice(0, i + 1)) as { name?: unknown } | undefined;
    const b = at(original, path.slice(0, i + 1)) as { name?: unknown } | undefined;
    return typeof a?.name !== 'string' || typeof b?.name !== 'string' || a.name === b.name;
  });
}

/**
 * Puts the secrets of `original` back where `edited` shows {@link mark}, by path. Returns the
 * text, and problems (each naming a path, never a value) when a mark has nothing to stand for.
 */
export function unmaskText(edited: string, original: string): { text: string; problems: string[] } {
  let editedDocument: unknown;
  try {
    editedDocument = parse(edited);
  } catch {
    // Not TOML: nothing is put back, and validating it names the syntax error.
    return { text: edited, problems: [] };
  }
  let originalDocument: unknown = {};
  const saved = new Map<string, { value: string; literal: string }>();
  try {
    originalDocument = parse(original);
    for (const { path, start, end } of tomlStrings(original)) {
      const literal = original.slice(start, end);
      saved.set(JSON.stringify(path), { value: decode(literal), literal });
    }
  } catch {
    // The file on disk is not TOML: there is nothing to put back.
  }
  const problems: string[] = [];
  let text = '';
  let last = 0;
  for (const { path, start, end } of tomlStrings(edited)) {
    const value = decode(edited.slice(start, end));
    if (!value.includes(mark)) continue;
    const before = saved.get(JSON.stringify(path));
    if (before === undefined) {
      problems.push(missing(path));
      continue;
    }
    const secret = maskString(before.value, path);
    if (!secret) {
      if (value !== before.value) problems.push(misplaced(path));
      continue;
    }
    const pieces = value.split(mark);
    const candidate = pieces.length - 1 === secret.parts.length && sameElements(editedDocument, originalDocument, path) ? pieces.map((piece, i) => piece + (secret.parts[i] ?? '')).join('') : undefined;
    if (candidate === undefined || maskString(candidate, path)?.shown !== value) {
      problems.push(misplaced(path));
      continue;
    }
    text += edited.slice(last, start) + (candidate === before.value ? before.literal : basicString(candidate));
    last = end;
  }
  text += edited.slice(last);
  for (const { path, key } of keys(editedDocument)) if (key.includes(mark)) problems.push(`${pathText(path.slice(0, -1)) || 'the top level'}: a key holds "${mark}"; a key cannot be a masked secret`);
  return { text, problems };
}

/** The secret parts of a config text (for taking them out of messages). */
export function secretsOf(text: string): string[] {
  let document: unknown;
  try {
    document = parse(text);
  } catch {
    return [];
  }
  const secrets = new Set<string>();
  for (const leaf of leaves(document)) for (const part of maskString(leaf.value, leaf.path)?.parts ?? []) if (part !== mark) secrets.add(part);
  return [...secrets];
}

/** `message` with each of `secrets` (three characters or more: shorter ones would garble it) shown as {@link mark}. */
export function scrub(message: string, secrets: readonly string[]): string {
  return [...secrets].filter((secret) => secret.length >= 3).sort((a, b) => b.length - a.length).reduce((text, secret) => text.split(secret).join(mark), message);
}

/** A copy of a config object with every secret masked, by path as in the file. */
export function maskObject(value: unknown, path: Array<string | number> = []): unknown {
  if (typeof value === 'string') return maskString(value, path)?.shown ?? value;
  if (Array.isArray(value)) return value.map((item, i) => maskObject(item, [...path, i]));
  if (value !== null && typeof value === 'object' && !(value instanceof Date)) return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, maskObject(item, [...path, key])]));
  return value;
}
