/**
 * Every string value of a TOML document with its path and where it is in the text — what the
 * console needs to mask and put back secrets by path while leaving the rest of the file (its
 * comments, its layout) exactly as written. smol-toml parses but keeps no positions, so this
 * walks the text itself: tables and arrays of tables, dotted and quoted keys, inline tables,
 * arrays over several lines, and the four kinds of string. Only call it on text that smol-toml
 * has parsed: it trusts the syntax and throws a TomlShapeError where it does not understand it.
 */
import { parse } from 'smol-toml';

/** A key's place: table and key names, and the index in an array (of tables or of values). */
export type TomlPath = ReadonlyArray<string | number>;

export interface TomlString {
  readonly path: TomlPath;
  /** The literal's span in the text, quotes included: text.slice(start, end). */
  readonly start: number;
  readonly end: number;
}

export class TomlShapeError extends Error {
  constructor(message: string, at: number) {
    super(`${message} (at character ${at})`);
    this.name = 'TomlShapeError';
  }
}

const bare = /[A-Za-z0-9_-]/;

export function tomlStrings(text: string): TomlString[] {
  const found: TomlString[] = [];
  /** Elements so far of each array of tables, by its path (with the indices of its parents). */
  const tableArrays = new Map<string, number>();
  let at = 0;

  const fail = (what: string): never => {
    throw new TomlShapeError(what, at);
  };
  const spaces = (): void => {
    while (text[at] === ' ' || text[at] === '\t') at++;
  };
  /** Spaces, newlines and comments (inside arrays and between lines). */
  const blank = (): void => {
    for (;;) {
      spaces();
      if (text[at] === '#') while (at < text.length && text[at] !== '\n') at++;
      else if (text[at] === '\n' || text[at] === '\r') at++;
      else return;
    }
  };

  /** The end of a string literal starting at `at` (which is a quote), and whether it is one. */
  const stringEnd = (): number => {
    const quote = text[at]!;
    if (text.startsWith(quote.repeat(3), at)) {
      let i = at + 3;
      for (;;) {
        if (i >= text.length) return fail('an unclosed multi-line string');
        if (quote === '"' && text[i] === '\\') i += 2;
        else if (text.startsWith(quote.repeat(3), i)) {
          // Up to two more quotes belong to the content: """a""""" is a"" closed.
          let end = i + 3;
          while (end < i + 5 && text[end] === quote) end++;
          return end;
        } else i++;
      }
    }
    let i = at + 1;
    for (;;) {
      if (i >= text.length || text[i] === '\n') return fail('an unclosed string');
      if (quote === '"' && text[i] === '\\') i += 2;
      else if (text[i] === quote) return i + 1;
      else i++;
    }
  };

  const key = (): string => {
    const c = text[at];
    if (c === '"' || c === "'") {
      const start = at;
      at = stringEnd();
      // smol-toml reads it exactly (escapes and all), as the key of a one-line document.
      try {
        return Object.keys(parse(`${text.slice(start, at)} = 0`))[0]!;
      } catch {
        return fail('a quoted key that cannot be read');
      }
    }
    const start = at;
    while (at < text.length && bare.test(text[at]!)) at++;
    if (at === start) fail('a key was expected');
    return text.slice(start, at);
  };
  const dottedKey = (): string[] => {
    const keys: string[] = [];
    for (;;) {
      spaces();
      keys.push(key());
      spaces();
      if (text[at] !== '.') return keys;
      at++;
    }
  };

  const value = (path: TomlPath): void => {
    const c = text[at];
    if (c === '"' || c === "'") {
      const start = at;
      at = stringEnd();
      found.push({ path, start, end: at });
    } else if (c === '[') {
      at++;
      for (let index = 0; ; index++) {
        blank();
        if (text[at] === ']') break;
        value([...path, index]);
        blank();
        if (text[at] === ',') at++;
        else if (text[at] !== ']') fail('"," or "]" was expected in an array');
      }
      at++;
    } else if (c === '{') {
      at++;
      for (;;) {
        blank();
        if (text[at] === '}') break;
        const keys = dottedKey();
        if (text[at] !== '=') fail('"=" was expected in an inline table');
        at++;
        blank();
        value([...path, ...keys]);
        blank();
        if (text[at] === ',') at++;
        else if (text[at] !== '}') fail('"," or "}" was expected in an inline table');
      }
      at++;
    } else {
      // A number, a boolean or a date (which may hold a space): up to what ends a value.
      const start = at;
      while (at < text.length && !/[,\]}#\n\r]/.test(text[at]!)) at++;
      if (text.slice(start, at).trim() === '') fail('a value was expected');
      while (text[at - 1] === ' ' || text[at - 1] === '\t') at--;
    }
  };

  /** A table header's path, with the current element of each array of tables on the way. */
  const resolve = (keys: readonly string[], newElement: boolean): TomlPath => {
    const path: Array<string | number> = [];
    keys.forEach((name, i) => {
      path.push(name);
      const id = JSON.stringify(path);
      const count = tableArrays.get(id);
      if (i === keys.length - 1 && newElement) {
        tableArrays.set(id, (count ?? 0) + 1);
        path.push(count ?? 0);
      } else if (count !== undefined) path.push(count - 1);
    });
    return path;
  };

  let table: TomlPath = [];
  for (;;) {
    blank();
    if (at >= text.length) return found;
    if (text[at] === '[') {
      const array = text[at + 1] === '[';
      at += array ? 2 : 1;
      const keys = dottedKey();
      if (!text.startsWith(array ? ']]' : ']', at)) fail(`"${array ? ']]' : ']'}" was expected after a table name`);
      at += array ? 2 : 1;
      table = resolve(keys, array);
    } else {
      const keys = dottedKey();
      if (text[at] !== '=') fail('"=" was expected after a key');
      at++;
      spaces();
      value([...table, ...keys]);
    }
    spaces();
    if (text[at] === '#') while (at < text.length && text[at] !== '\n') at++;
    if (at < text.length && text[at] !== '\n' && text[at] !== '\r') fail('the end of the line was expected');
  }
}
