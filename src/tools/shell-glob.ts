/**
 * Wildcard expansion for the shell tool, done by us instead of by a shell so the expanded
 * argv can be checked before it runs. Follows sh: `*`, `?` and `[…]` (ranges, `!`/`^`
 * negation, `[:alpha:]`-style classes) match within one path component; a leading `.` must be
 * matched literally; matches are sorted (by code unit, like LC_ALL=C); a word that matches
 * nothing stays as written.
 */
import { lstat, readdir } from 'node:fs/promises';
import { resolve } from 'node:path';
import type { Word } from '../security/commands.ts';

export type Expansion = { readonly ok: true; readonly values: readonly string[] } | { readonly ok: false; readonly reason: string };

/** How many names one wildcard word may match before it is refused as too broad. */
export const MAX_GLOB_MATCHES = 2000;

/** Called for each name a wildcard component matches (before descending into it); a message refuses the word. */
export type MatchCheck = (path: string, name: string) => Promise<string | undefined>;

/**
 * The file names `word` stands for in `cwd`: itself unless it is an unquoted wildcard that
 * matches something. `check` sees every match on the way, so a symlink out of the workspace
 * is refused before it is read.
 */
export async function expandWord(word: Word, cwd: string, check?: MatchCheck): Promise<Expansion> {
  if (!word.glob) return { ok: true, values: [word.text] };
  let paths = [''];
  const parts = word.pattern.split('/');
  for (const [index, part] of parts.entries()) {
    const matcher = componentMatcher(part);
    const next: string[] = [];
    for (const path of paths) {
      const prefix = index === 0 ? '' : `${path}/`;
      if (matcher === undefined) {
        next.push(prefix + unescape(part));
        continue;
      }
      const names = await readdir(resolve(cwd, path === '' ? '.' : path)).catch(() => [] as string[]);
      for (const name of names.filter(matcher).sort()) {
        if (next.length >= MAX_GLOB_MATCHES) return { ok: false, reason: `the wildcard ${word.text} matches more than ${MAX_GLOB_MATCHES} names; narrow it.` };
        const problem = await check?.(resolve(cwd, prefix + name), name);
        if (problem !== undefined) return { ok: false, reason: problem };
        next.push(prefix + name);
      }
    }
    paths = next;
  }
  const existing = await existingOnly(paths, cwd);
  return { ok: true, values: existing.length === 0 ? [word.text] : existing.sort() };
}

async function existingOnly(paths: readonly string[], cwd: string): Promise<string[]> {
  const found = await Promise.all(paths.map((path) => lstat(resolve(cwd, path)).then(() => true, () => false)));
  return paths.filter((_, i) => found[i]);
}

/** Removes the backslashes that mark quoted characters in a pattern. */
function unescape(part: string): string {
  return part.replace(/\\(.)/gsu, '$1');
}

/** A test for one path component, or undefined when the component has no unquoted wildcard. */
export function componentMatcher(part: string): ((name: string) => boolean) | undefined {
  const source = patternSource(part);
  if (source === undefined) return undefined;
  const regex = new RegExp(`^${source}$`, 'su');
  const dotExplicit = part.startsWith('.') || part.startsWith('\\.');
  return (name) => (dotExplicit || !name.startsWith('.')) && regex.test(name);
}

const CLASSES: Readonly<Record<string, string>> = {
  alpha: '\\p{L}', digit: '0-9', alnum: '\\p{L}\\p{Nd}', upper: '\\p{Lu}', lower: '\\p{Ll}', space: '\\s', blank: ' \\t',
  punct: '\\p{P}\\p{S}', xdigit: '0-9A-Fa-f', cntrl: '\\p{Cc}',
};

/** The regular expression for a wildcard component, or undefined when nothing in it is a wildcard. */
function patternSource(part: string): string | undefined {
  let source = '';
  let wild = false;
  const chars = [...part];
  for (let i = 0; i < chars.length; i++) {
    const c = chars[i]!;
    if (c === '\\' && i + 1 < chars.length) {
      source += escapeRegExp(chars[++i]!);
    } else if (c === '*') {
      source += '.*';
      wild = true;
    } else if (c === '?') {
      source += '.';
      wild = true;
    } else if (c === '[') {
      const bracket = readBracket(chars, i);
      if (bracket === undefined) source += '\\[';
      else {
        source += bracket.source;
        i = bracket.end;
        wild = true;
      }
    } else source += escapeRegExp(c);
  }
  return wild ? source : undefined;
}

/** A `[…]` expression starting at `start`: its regex and the index of its `]`, or undefined if it is not closed. */
function readBracket(chars: readonly string[], start: number): { source: string; end: number } | undefined {
  let i = start + 1;
  const negate = chars[i] === '!' || chars[i] === '^';
  if (negate) i++;
  const items: string[] = [];
  for (let first = true; i < chars.length; first = false, i++) {
    let c = chars[i]!;
    if (c === ']' && !first) {
      // A class that can never match (a bad class name, only backwards ranges) matches nothing, as in sh.
      if (items.length === 0) return { source: negate ? '.' : '(?!)', end: i };
      return { source: `[${negate ? '^' : ''}${items.join('')}]`, end: i };
    }
    if (c === '[' && chars[i + 1] === ':') {
      const close = chars.indexOf(':', i + 2);
      if (close > 0 && chars[close + 1] === ']') {
        const name = chars.slice(i + 2, close).join('');
        const cls = CLASSES[name];
        if (cls !== undefined) items.push(cls);
        i = close + 1;
        continue;
      }
    }
    if (c === '\\' && i + 1 < chars.length) c = chars[++i]!;
    if (chars[i + 1] === '-' && chars[i + 2] !== undefined && chars[i + 2] !== ']') {
      let to = chars[i + 2]!;
      i += 2;
      if (to === '\\' && i + 1 < chars.length) to = chars[++i]!;
      if (c.codePointAt(0)! <= to.codePointAt(0)!) items.push(`${escapeClass(c)}-${escapeClass(to)}`);
      continue;
    }
    items.push(escapeClass(c));
  }
  return undefined;
}

function escapeRegExp(c: string): string {
  return c.replace(/[\\^$.*+?()[\]{}|/]/g, '\\$&');
}

function escapeClass(c: string): string {
  return c.replace(/[\\\]^[-]/g, '\\$&');
}
