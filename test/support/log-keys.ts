/**
 * Finds keys that appear twice in one JSON object of a log line. JSON.parse keeps only the
 * last of them, and so do most log pipelines — a line like
 * `{"channel":"irc", …, "channel":"#probe"}` silently loses a fact. pino does not dedupe
 * (a child logger's bindings and a call's fields are written side by side), so the tests
 * check every line the daemon prints.
 */

/** Each key that occurs more than once in the same object, with its JSON path (`$.a.b`). */
export function duplicateKeys(line: string): string[] {
  const found: string[] = [];
  let i = 0;

  const space = (): void => {
    while (i < line.length && ' \t\r\n'.includes(line[i]!)) i++;
  };
  const expect = (char: string): void => {
    if (line[i] !== char) throw new SyntaxError(`expected ${char} at ${i}`);
    i++;
  };
  const string = (): string => {
    expect('"');
    const start = i;
    while (line[i] !== '"') {
      if (i >= line.length) throw new SyntaxError('unterminated string');
      if (line[i] === '\\') i++;
      i++;
    }
    const raw = line.slice(start, i);
    i++;
    return JSON.parse(`"${raw}"`) as string;
  };
  const value = (path: string): void => {
    space();
    const char = line[i];
    if (char === '{') {
      i++;
      const seen = new Set<string>();
      space();
      if (line[i] === '}') {
        i++;
        return;
      }
      for (;;) {
        space();
        const key = string();
        if (seen.has(key)) found.push(`${path}.${key}`);
        seen.add(key);
        space();
        expect(':');
        value(`${path}.${key}`);
        space();
        if (line[i] === ',') {
          i++;
          continue;
        }
        expect('}');
        return;
      }
    }
    if (char === '[') {
      i++;
      space();
      if (line[i] === ']') {
        i++;
        return;
      }
      for (let index = 0; ; index++) {
        value(`${path}[${index}]`);
        space();
        if (line[i] === ',') {
          i++;
          continue;
        }
        expect(']');
        return;
      }
    }
    if (char === '"') {
      string();
      return;
    }
    const match = /^(?:-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null)/.exec(line.slice(i, i + 64));
    if (!match) throw new SyntaxError(`unexpected ${char ?? 'end'} at ${i}`);
    i += match[0].length;
  };

  value('$');
  return found;
}

/**
 * Checks each complete line of `text` that looks like a JSON log line; returns a description
 * of every line with a repeated key (empty when all are clean).
 */
export function logLinesWithDuplicateKeys(text: string): string[] {
  const problems: string[] = [];
  for (const line of text.split('\n')) {
    const trimmed = line.trim();
    if (!trimmed.startsWith('{') || !trimmed.endsWith('}')) continue;
    let keys: string[];
    try {
      keys = duplicateKeys(trimmed);
    } catch {
      continue; // not JSON: a reply or pretty output that happens to start with "{"
    }
    if (keys.length > 0) problems.push(`key ${keys.join(', ')} repeated in: ${trimmed.slice(0, 600)}`);
  }
  return problems;
}

/**
 * Feeds a stream's text in chunks and calls `onProblem` once per log line with a repeated key.
 * Keeps only the unfinished last line between chunks.
 */
export function logKeyWatcher(onProblem: (problem: string) => void): { feed(chunk: string): void } {
  let partial = '';
  return {
    feed(chunk: string): void {
      const text = partial + chunk;
      const end = text.lastIndexOf('\n');
      if (end === -1) {
        partial = text;
        return;
      }
      partial = text.slice(end + 1);
      for (const problem of logLinesWithDuplicateKeys(text.slice(0, end))) onProblem(problem);
    },
  };
}
