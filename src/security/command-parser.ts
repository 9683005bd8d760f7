/**
 * The shell tool's command-line grammar: a small, strict subset of POSIX sh. What this parser
 * returns is exactly what the shell tool executes (it spawns each argv itself, no shell in
 * between), so the guard in `commands.ts` checks the very words that run.
 *
 * Supported: words with '…', "…" and backslash quoting; `;` and newlines, `&&`, `||`, `|`;
 * `#` comments; the redirections `2>&1`, `1>&2`/`>&2`, `N>/dev/null`, `N>>/dev/null` and
 * `&>/dev/null` (N = 1 or 2). Everything else that sh would treat specially is refused.
 */

/** One shell word after quote removal. */
export interface Word {
  readonly text: string;
  /** Some part of it was quoted or escaped (so `FOO=1` is not an assignment, `*` not a wildcard). */
  readonly quoted: boolean;
  /** Has an unquoted `*`, `?` or `[`: the shell tool expands it into file names. */
  readonly glob: boolean;
  /** The word as a wildcard pattern: `text` with every quoted `*`, `?`, `[`, `]` and `\` escaped by a backslash. */
  readonly pattern: string;
}

/** Where one output descriptor of a command goes: `/dev/null` or a copy of descriptor 1 or 2. */
export interface Redirection {
  readonly fd: 1 | 2;
  readonly to: 'null' | 1 | 2;
}

/** A simple command: its words and, in order, its redirections. */
export interface Segment {
  readonly words: readonly Word[];
  readonly redirections: readonly Redirection[];
}

/** How a pipeline joins the one before it (the first pipeline's is `;`). */
export type Connector = ';' | '&&' | '||';

/** Commands joined by `|`, each one's stdout feeding the next one's stdin. */
export interface Pipeline {
  readonly connector: Connector;
  readonly commands: readonly Segment[];
}

export type ParsedCommand =
  | {
      readonly ok: true;
      /** Every simple command, in order (the flattened `pipelines`). */
      readonly segments: readonly Segment[];
      readonly pipelines: readonly Pipeline[];
    }
  | { readonly ok: false; readonly reason: string };

const EXPANSION_START = /[A-Za-z_{0-9@*#?$!-]/;
const GLOB_SPECIAL = /[*?[\]\\]/g;

/** Builds words, commands and pipelines as the parser walks the line. */
class Builder {
  readonly pipelines: Pipeline[] = [];
  private commands: Segment[] = [];
  private words: Word[] = [];
  private redirections: Redirection[] = [];
  private connector: Connector = ';';
  private text = '';
  private pattern = '';
  inWord = false;
  private quoted = false;
  private glob = false;

  /** Appends characters to the current word; quoted ones never act as wildcards. */
  add(chars: string, quoted: boolean): void {
    this.text += chars;
    this.pattern += quoted ? chars.replace(GLOB_SPECIAL, '\\$&') : chars;
    this.inWord = true;
    if (quoted) this.quoted = true;
    else if (/[*?[]/.test(chars)) this.glob = true;
  }

  /** Marks the word as started even if it stays empty (`''`). */
  startQuoted(): void {
    this.inWord = this.quoted = true;
  }

  /** The current word if it is a bare descriptor number (the `2` of `2>&1`), which it then drops. */
  takeDescriptor(): string | undefined {
    if (!this.inWord || this.quoted || !/^[0-9]+$/.test(this.text)) return undefined;
    const fd = this.text;
    this.reset();
    return fd;
  }

  endWord(): void {
    if (this.inWord) this.words.push({ text: this.text, quoted: this.quoted, glob: this.glob, pattern: this.pattern });
    this.reset();
  }

  redirect(redirection: Redirection): void {
    this.redirections.push(redirection);
  }

  /** True when nothing of the current command has been read yet. */
  get blank(): boolean {
    return !this.inWord && this.words.length === 0 && this.redirections.length === 0;
  }

  endCommand(): void {
    this.endWord();
    this.commands.push({ words: this.words, redirections: this.redirections });
    this.words = [];
    this.redirections = [];
  }

  endPipeline(next: Connector): void {
    this.endCommand();
    this.pipelines.push({ connector: this.connector, commands: this.commands });
    this.commands = [];
    this.connector = next;
  }

  private reset(): void {
    this.text = this.pattern = '';
    this.inWord = this.quoted = this.glob = false;
  }
}

/**
 * Splits a command line into pipelines of simple commands, refusing every feature that could
 * run or produce code the policy does not see: `$(…)`, backticks, `${…}`/`$VAR`, `<(…)`,
 * subshells and brace groups, background `&`, here-docs and redirections other than those to
 * `/dev/null` or between stdout and stderr. Quotes and backslashes are honoured the way sh
 * does, so `echo "a;b"` is one command with the argument `a;b`.
 */
export function parseCommand(command: string): ParsedCommand {
  if (typeof command !== 'string' || command.trim() === '') return fail('the command is empty.');
  if (command.includes('\0')) return fail('the command contains a NUL byte.');
  const b = new Builder();
  let i = 0;
  while (i < command.length) {
    const c = command[i]!;
    const next = command[i + 1];
    if (c === ' ' || c === '\t') {
      b.endWord();
      i++;
    } else if (c === '\n' && b.blank) {
      i++; // a blank line, or a line break after an operator, separates nothing
    } else if (c === '\n' || c === ';') {
      b.endPipeline(';');
      i++;
    } else if (c === '#' && !b.inWord) {
      while (i < command.length && command[i] !== '\n') i++;
    } else if (c === "'") {
      const close = command.indexOf("'", i + 1);
      if (close < 0) return fail('the command has an unterminated single quote.');
      b.startQuoted();
      b.add(command.slice(i + 1, close), true);
      i = close + 1;
    } else if (c === '"') {
      const end = readDoubleQuoted(command, i + 1, b);
      if (typeof end === 'string') return fail(end);
      i = end;
    } else if (c === '\\') {
      if (next === undefined) return fail('the command ends with a lone backslash.');
      if (next !== '\n') b.add(next, true);
      i += 2;
    } else if (c === '`') {
      return fail(SUBSTITUTION);
    } else if (c === '$' && next !== undefined && (next === '(' || next === "'" || next === '"' || EXPANSION_START.test(next))) {
      return fail(expansion(next));
    } else if ((c === '&' && next === '&') || (c === '|' && next === '|')) {
      b.endPipeline(c === '&' ? '&&' : '||');
      i += 2;
    } else if (c === '|') {
      if (next === '&') return fail('"|&" is not allowed; use "2>&1 |".');
      b.endCommand();
      i++;
    } else if (c === '>' || (c === '&' && next === '>')) {
      const end = readRedirection(command, i, b);
      if (typeof end === 'string') return fail(end);
      i = end;
    } else if (c === '<') {
      if (next === '<') return fail('here-documents (<<) are not allowed; write the text to a file with file_write and pass the file name.');
      if (next === '(') return fail('process substitution "<(…)" is not allowed.');
      return fail('input redirection (<) is not allowed; pass the file name as an argument instead.');
    } else if (c === '&') {
      return fail('background jobs (&) are not allowed; run the command in the foreground.');
    } else if (c === '(' || c === ')') {
      return fail('subshells "( … )" are not allowed; run the commands one after another with && instead.');
    } else if (c === '{' || c === '}') {
      return fail('unquoted braces are not allowed (brace groups and brace expansion); quote them if they are text, e.g. \'{}\'.');
    } else if (c === '~' && !b.inWord) {
      return fail('"~" is not allowed in commands; commands run in the workspace, so use a relative path.');
    } else {
      b.add(c, false);
      i++;
    }
  }
  b.endPipeline(';');
  return finish(b.pipelines);
}

/** Reads a "…" string from `i` (after the opening quote) into the word; returns the index after the closing quote or a refusal. */
function readDoubleQuoted(command: string, start: number, b: Builder): number | string {
  b.startQuoted();
  let i = start;
  for (;;) {
    const d = command[i];
    if (d === undefined) return 'the command has an unterminated double quote.';
    if (d === '"') return i + 1;
    if (d === '`') return SUBSTITUTION;
    if (d === '$' && (command[i + 1] === '(' || EXPANSION_START.test(command[i + 1] ?? ''))) return expansion(command[i + 1]!);
    if (d === '\\' && command[i + 1] !== undefined && '$`"\\\n'.includes(command[i + 1]!)) {
      if (command[i + 1] !== '\n') b.add(command[i + 1]!, true);
      i += 2;
      continue;
    }
    b.add(d, true);
    i++;
  }
}

const REDIRECTION_HELP = 'only 2>&1, >&2 and redirections to /dev/null (>/dev/null, 2>/dev/null, &>/dev/null) are allowed; use the file_write tool to write files.';

/**
 * Reads a redirection starting at `i` (a `>`, or the `&` of `&>`), a descriptor number just
 * before it taken from the current word. Returns the index after it or a refusal.
 */
function readRedirection(command: string, i: number, b: Builder): number | string {
  const both = command[i] === '&';
  const fd = both ? undefined : b.takeDescriptor();
  b.endWord();
  let j = both ? i + 2 : i + 1;
  if (command[j] === '(') return 'process substitution ">(…)" is not allowed.';
  const append = command[j] === '>';
  if (append) j++;
  const rest = command.slice(j);
  const duplicate = /^&([0-9]+)(?=$|[ \t\n;&|])/.exec(rest);
  const devNull = /^[ \t]*\/dev\/null(?=$|[ \t\n;&|])/.exec(rest);
  const match = (!append && !both ? duplicate : null) ?? devNull;
  if (match === null) return `output redirection (>, >>) to a file or descriptor is not allowed: ${REDIRECTION_HELP}`;
  if (fd !== undefined && fd !== '1' && fd !== '2') return `output redirection of descriptor ${fd} is not allowed: ${REDIRECTION_HELP}`;
  const to = match === devNull ? 'null' : Number(duplicate![1]);
  if (to !== 'null' && to !== 1 && to !== 2) return `output redirection to descriptor ${to} is not allowed: ${REDIRECTION_HELP}`;
  if (both) {
    b.redirect({ fd: 1, to });
    b.redirect({ fd: 2, to });
  } else b.redirect({ fd: fd === '2' ? 2 : 1, to });
  return j + match[0].length;
}

/** Drops the empty pipeline a trailing `;` or newline leaves; refuses a line ending in `&&`, `||` or `|`. */
function finish(pipelines: Pipeline[]): ParsedCommand {
  const last = pipelines.at(-1)!;
  const lastCommand = last.commands.at(-1)!;
  if (lastCommand.words.length === 0 && lastCommand.redirections.length === 0) {
    if (last.commands.length > 1) return fail('the command ends with "|"; add the command that should read the output, or remove the "|".');
    if (last.connector !== ';') return fail(`the command ends with "${last.connector}"; add the command that should follow it, or remove the "${last.connector}".`);
    if (pipelines.length > 1) pipelines.pop();
  }
  return { ok: true, pipelines, segments: pipelines.flatMap((p) => p.commands) };
}

const SUBSTITUTION = 'command substitution (backticks or $(…)) is not allowed; run the inner command on its own first.';

function expansion(next: string): string {
  if (next === '(') return SUBSTITUTION;
  if (next === "'" || next === '"') return '$\'…\' and $"…" quoting is not allowed; write the text literally in plain quotes.';
  return 'variable expansion ($NAME, ${…}) is not allowed; write the value literally.';
}

function fail(reason: string): ParsedCommand {
  return { ok: false, reason };
}
