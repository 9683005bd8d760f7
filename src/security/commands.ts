/**
 * Command policy for the shell tool: which programs may run and how risky each call is.
 * A command line is split into simple commands the way /bin/sh would, and refused outright
 * when it uses shell features that would let a program run without being checked here
 * (substitution, eval, subshells, redirections, variable expansion, env prefixes).
 *
 * This is a guard, not a jail: an allowed program still runs with the daemon's rights.
 * Arguments are checked lexically here and against symlinks by the shell tool before it runs.
 */
import { normalize } from 'node:path/posix';
import type { Risk } from '../tool.ts';

/** Programs that may run (besides the `cd` builtin), by risk class. */
export const DEFAULT_COMMANDS: Readonly<Record<Risk, readonly string[]>> = {
  low: [
    'cd', 'ls', 'cat', 'head', 'tail', 'wc', 'echo', 'printf', 'pwd', 'date', 'grep', 'egrep', 'fgrep', 'find', 'sort', 'uniq',
    'diff', 'cmp', 'comm', 'file', 'stat', 'du', 'df', 'which', 'tree', 'cut', 'tr', 'nl', 'tac', 'rev', 'paste', 'join',
    'column', 'fold', 'fmt', 'expand', 'seq', 'basename', 'dirname', 'realpath', 'md5sum', 'sha1sum', 'sha256sum', 'base64',
    'od', 'xxd', 'jq', 'uname', 'true', 'false',
  ],
  medium: [
    'git', 'npm', 'npx', 'node', 'python3', 'python', 'pip', 'pip3', 'make', 'tar', 'gzip', 'gunzip', 'zip', 'unzip', 'cp',
    'mv', 'mkdir', 'rmdir', 'touch', 'sed', 'awk', 'tee', 'patch',
  ],
  high: ['rm', 'chmod', 'chown', 'chgrp', 'dd', 'kill', 'pkill', 'killall', 'ssh', 'scp', 'rsync', 'crontab', 'systemctl'],
};

/**
 * Never allowed, not even by configuration: they stop or reshape the machine, or run another
 * program (a shell, `sudo`, `env`, `xargs` …) that this policy would then never see.
 */
export const NEVER_COMMANDS: ReadonlySet<string> = new Set([
  'shutdown', 'reboot', 'halt', 'poweroff', 'init', 'telinit', 'mkfs', 'mkswap', 'fdisk', 'sfdisk', 'parted', 'wipefs',
  'mount', 'umount', 'swapon', 'swapoff', 'insmod', 'rmmod', 'modprobe', 'chroot', 'sudo', 'su', 'doas', 'pkexec',
  'sh', 'bash', 'dash', 'zsh', 'ksh', 'fish', 'csh', 'tcsh', 'ash', 'busybox', 'env', 'xargs', 'eval', 'exec', 'source',
  '.', 'command', 'builtin', 'nohup', 'setsid', 'timeout', 'nice', 'ionice', 'stdbuf', 'time', 'watch', 'script', 'expect',
]);

/** The allowlist in force: program name → risk. */
export interface CommandPolicy {
  readonly allowed: ReadonlyMap<string, Risk>;
}

export interface CommandPolicyOptions {
  /** Replaces the default allowlist; known programs keep their default risk, others are medium. @default DEFAULT_COMMANDS */
  readonly allowedCommands?: readonly string[];
  /** Added to the allowlist as medium risk (a program already listed keeps its risk). @default [] */
  readonly extraAllowedCommands?: readonly string[];
}

const NAME = /^[A-Za-z0-9_][A-Za-z0-9._+-]*$/;

/** Builds the allowlist; throws a TypeError naming the config key for a bad or never-allowed name. */
export function createCommandPolicy(options: CommandPolicyOptions = {}): CommandPolicy {
  const defaults = new Map<string, Risk>();
  for (const risk of ['low', 'medium', 'high'] as const) for (const name of DEFAULT_COMMANDS[risk]) defaults.set(name, risk);
  const allowed = new Map<string, Risk>();
  if (options.allowedCommands === undefined) for (const [name, risk] of defaults) allowed.set(name, risk);
  else for (const name of checkNames('allowed_commands', options.allowedCommands)) allowed.set(name, defaults.get(name) ?? 'medium');
  for (const name of checkNames('extra_allowed_commands', options.extraAllowedCommands ?? [])) {
    if (!allowed.has(name)) allowed.set(name, 'medium');
  }
  return { allowed };
}

function checkNames(key: string, names: readonly string[]): readonly string[] {
  if (!Array.isArray(names)) throw new TypeError(`[security] ${key} must be a list of program names, got ${JSON.stringify(names)}`);
  for (const name of names) {
    if (typeof name !== 'string' || !NAME.test(name)) {
      throw new TypeError(`[security] ${key}: ${JSON.stringify(name)} is not a program name; list bare names such as "git", not paths or commands`);
    }
    if (NEVER_COMMANDS.has(name)) {
      throw new TypeError(`[security] ${key}: "${name}" can never be allowed (it would run other programs past the allowlist, or act on the whole machine); remove it`);
    }
  }
  return names;
}

export type CommandAssessment =
  | { readonly risk: Risk; readonly mutates: boolean; readonly summary: string; readonly segments: readonly Segment[] }
  | { readonly refused: string };

const RANK: Readonly<Record<Risk, number>> = { low: 0, medium: 1, high: 2 };

/**
 * Judges a command line: refused (with a sentence the model can act on), or the highest risk
 * over its simple commands. `mutates` is true for anything above low risk and for low-risk
 * programs used in a writing mode (`sort -o`, `find -delete` …).
 *
 * @example assessCommand('git status && ls', policy) // { risk: 'medium', summary: 'shell: git status && ls', … }
 */
export function assessCommand(command: string, policy: CommandPolicy): CommandAssessment {
  const parsed = parseCommand(command);
  if (!parsed.ok) return { refused: parsed.reason };
  let risk: Risk = 'low';
  let mutates = false;
  for (const segment of parsed.segments) {
    const judged = assessSegment(segment, policy);
    if ('refused' in judged) return judged;
    if (RANK[judged.risk] > RANK[risk]) risk = judged.risk;
    mutates ||= judged.mutates;
  }
  return { risk, mutates: mutates || risk !== 'low', summary: summarize(command), segments: parsed.segments };
}

/** `shell: <command>` on one line, cut to 200 characters. */
export function summarize(command: string): string {
  const line = command.replace(/\s+/g, ' ').trim();
  return `shell: ${line.length > 200 ? `${line.slice(0, 199)}…` : line}`;
}

function assessSegment(segment: Segment, policy: CommandPolicy): { risk: Risk; mutates: boolean } | { refused: string } {
  const [first, ...args] = segment.words;
  if (first === undefined) return { refused: 'the command has an empty part (two separators in a row); remove it.' };
  if (/^[A-Za-z_][A-Za-z0-9_]*=/.test(first.text)) {
    return { refused: `environment assignments before a command (${first.text} …) are not allowed; pass values as arguments instead.` };
  }
  const program = first.text;
  if (first.glob) return { refused: `the program name ${program} contains a wildcard; name the program exactly.` };
  if (program.includes('/')) {
    return { refused: `programs must be named, not given as a path (${program}); use e.g. "ls", or "node script.js" to run a script.` };
  }
  if (NEVER_COMMANDS.has(program)) {
    return { refused: `"${program}" is never allowed: it runs other programs past the command allowlist or acts on the whole machine. Run the allowed program directly.` };
  }
  const risk = policy.allowed.get(program);
  if (risk === undefined) {
    return { refused: `"${program}" is not on the command allowlist; allowed programs are: ${[...policy.allowed.keys()].sort().join(', ')}. The owner can add it with [security] extra_allowed_commands.` };
  }
  const rule = programRule(program, args);
  if (rule !== undefined && 'refused' in rule) return rule;
  for (const word of args) {
    const problem = argumentProblem(word);
    if (problem !== undefined) return { refused: problem };
  }
  return { risk: rule?.risk !== undefined && RANK[rule.risk] > RANK[risk] ? rule.risk : risk, mutates: rule?.mutates ?? false };
}

/** Values inside a word that the program may take as a path: the word, after `=`, after a short option. */
export function pathCandidates(word: Word): string[] {
  const text = word.text;
  const candidates = [text];
  const eq = text.indexOf('=');
  if (text.startsWith('-') && eq > 0) candidates.push(text.slice(eq + 1));
  else if (/^-[A-Za-z]./.test(text)) candidates.push(text.slice(2));
  return candidates;
}

/** Lexical argument check: absolute paths, `~`, `..` escapes, wildcards that could match `..`. */
function argumentProblem(word: Word): string | undefined {
  for (const value of pathCandidates(word)) {
    if (value === '/dev/null') continue;
    if (value.startsWith('/')) {
      return `absolute paths are not allowed in commands (${value}); commands run in the workspace, so use a relative path such as notes/todo.md.`;
    }
    if (value.startsWith('~')) return `"~" is not allowed in commands (${value}); commands run in the workspace, so use a relative path.`;
    const normalized = normalize(value);
    if (normalized === '..' || normalized.startsWith('../')) {
      return `the argument ${value} escapes the workspace; use a path inside the workspace, e.g. notes/todo.md.`;
    }
    if (word.glob && value.split('/').some((part) => /^[.[]/.test(part) && /[*?[]/.test(part))) {
      return `the wildcard ${value} could match ".." and leave the workspace; name hidden files explicitly.`;
    }
  }
  return undefined;
}

type Rule = { readonly risk?: Risk; readonly mutates?: boolean } | { readonly refused: string };

/** Per-program argument rules: options that run other programs, write files, or wipe everything. */
function programRule(program: string, args: readonly Word[]): Rule | undefined {
  const texts = args.map((word) => word.text);
  const has = (...options: string[]): boolean => texts.some((text) => options.some((o) => text === o || text.startsWith(`${o}=`)));
  const short = (letter: string): boolean => texts.some((text) => /^-[A-Za-z]+$/.test(text) && text.includes(letter));
  switch (program) {
    case 'rm': {
      if (has('--no-preserve-root')) return { refused: 'rm --no-preserve-root is never allowed.' };
      const recursive = short('r') || short('R') || has('--recursive');
      const targets = texts.filter((text) => !text.startsWith('-'));
      const wipe = targets.find((text) => /^(\/+\*?|~.*|\*|\.\/?\*?|\.\.\/?\*?|\/.*)$/.test(text));
      if (recursive && wipe !== undefined) return { refused: `rm -r on ${wipe} would delete the workspace or the whole system and is never allowed; name the files or folders to delete.` };
      return undefined;
    }
    case 'find':
      if (has('-exec', '-execdir', '-ok', '-okdir')) return { refused: 'find -exec runs other programs past the command allowlist; list the files with find, then run the command on them directly.' };
      if (has('-L', '-follow', '-H')) return { refused: 'find -L/-follow follows symbolic links, possibly out of the workspace; drop that option.' };
      if (has('-delete', '-fprint', '-fprint0', '-fprintf', '-fls')) return { risk: 'medium', mutates: true };
      return undefined;
    case 'grep':
    case 'egrep':
    case 'fgrep':
      if (short('R') || has('--dereference-recursive')) return { refused: 'grep -R follows symbolic links, possibly out of the workspace; use grep -r.' };
      return undefined;
    case 'ls':
    case 'du':
    case 'stat':
    case 'file':
      if (short('L') || has('--dereference')) return { refused: `${program} -L follows symbolic links, possibly out of the workspace; drop that option.` };
      return undefined;
    case 'tree':
      if (short('l')) return { refused: 'tree -l follows symbolic links, possibly out of the workspace; drop that option.' };
      if (short('o')) return { risk: 'medium', mutates: true };
      return undefined;
    case 'sort':
      if (has('--compress-program')) return { refused: 'sort --compress-program runs another program past the command allowlist; drop it.' };
      if (short('o') || has('--output')) return { risk: 'medium', mutates: true };
      return undefined;
    case 'uniq':
      return texts.filter((text) => !text.startsWith('-')).length > 1 ? { risk: 'medium', mutates: true } : undefined;
    case 'date':
      return short('s') || has('--set') ? { refused: 'date -s sets the system clock and is not allowed.' } : undefined;
    case 'tar':
      if (has('--to-command', '--use-compress-program', '--checkpoint-action', '--info-script', '--new-volume-script', '--rsh-command', '-I', '-F')) {
        return { refused: 'that tar option runs another program past the command allowlist; drop it.' };
      }
      return undefined;
    case 'git': {
      const subcommand = texts.findIndex((text, i) => !text.startsWith('-') && texts[i - 1] !== '-C');
      const globals = subcommand < 0 ? texts : texts.slice(0, subcommand);
      const name = subcommand < 0 ? '' : texts[subcommand];
      const runsProgram =
        globals.some((text) => /^(-c|--config-env|--exec-path)/.test(text)) ||
        has('--upload-pack', '--receive-pack', '--exec') ||
        (['clone', 'fetch', 'pull', 'ls-remote', 'archive'].includes(name ?? '') && has('-u')) ||
        (name === 'rebase' && (has('-x') || short('x')));
      if (runsProgram) {
        return { refused: 'that git option (-c, --exec-path, --upload-pack, --receive-pack, --exec, rebase -x) runs other programs past the command allowlist; run git without it.' };
      }
      return undefined;
    }
    default:
      return undefined;
  }
}

/** One shell word after quote removal. */
export interface Word {
  readonly text: string;
  /** Some part of it was quoted or escaped (so `FOO=1` is not an assignment, `*` not a wildcard). */
  readonly quoted: boolean;
  /** Has an unquoted `*`, `?` or `[`: the shell may expand it into file names. */
  readonly glob: boolean;
}

/** A simple command: the words between two of `;` `&&` `||` `|` newline. */
export interface Segment {
  readonly words: readonly Word[];
}

export type ParsedCommand = { readonly ok: true; readonly segments: readonly Segment[] } | { readonly ok: false; readonly reason: string };

const EXPANSION_START = /[A-Za-z_{0-9@*#?$!-]/;

/**
 * Splits a command line into simple commands the way POSIX sh would, refusing every feature
 * that could run or produce code this policy does not see: `$(…)`, backticks, `${…}`/`$VAR`,
 * `<(…)`, subshells and brace groups, background `&`, here-docs and redirections (except
 * `2>&1` and `>/dev/null`). Quotes and backslashes are honoured, so `echo "a;b"` is one command.
 */
export function parseCommand(command: string): ParsedCommand {
  if (typeof command !== 'string' || command.trim() === '') return fail('the command is empty.');
  if (command.includes('\0')) return fail('the command contains a NUL byte.');
  const segments: Segment[] = [];
  let words: Word[] = [];
  let text = '';
  let inWord = false;
  let quoted = false;
  let glob = false;
  const endWord = (): void => {
    if (inWord) words.push({ text, quoted, glob });
    text = '';
    inWord = quoted = glob = false;
  };
  const endSegment = (): void => {
    endWord();
    segments.push({ words });
    words = [];
  };
  let i = 0;
  while (i < command.length) {
    const c = command[i]!;
    const next = command[i + 1];
    if (c === ' ' || c === '\t') {
      endWord();
      i++;
    } else if (c === '\n' && !inWord && words.length === 0) {
      i++; // a blank line separates nothing
    } else if (c === '\n' || c === ';') {
      endSegment();
      i++;
    } else if (c === '#' && !inWord) {
      while (i < command.length && command[i] !== '\n') i++;
    } else if (c === "'") {
      const close = command.indexOf("'", i + 1);
      if (close < 0) return fail('the command has an unterminated single quote.');
      text += command.slice(i + 1, close);
      inWord = quoted = true;
      i = close + 1;
    } else if (c === '"') {
      i++;
      inWord = quoted = true;
      for (;;) {
        const d = command[i];
        if (d === undefined) return fail('the command has an unterminated double quote.');
        if (d === '"') break;
        if (d === '`') return fail(SUBSTITUTION);
        if (d === '$' && (command[i + 1] === '(' || EXPANSION_START.test(command[i + 1] ?? ''))) return fail(expansion(command[i + 1]!));
        if (d === '\\' && command[i + 1] !== undefined && '$`"\\\n'.includes(command[i + 1]!)) {
          if (command[i + 1] !== '\n') text += command[i + 1];
          i += 2;
          continue;
        }
        text += d;
        i++;
      }
      i++;
    } else if (c === '\\') {
      if (next === undefined) return fail('the command ends with a lone backslash.');
      if (next !== '\n') {
        text += next;
        inWord = quoted = true;
      }
      i += 2;
    } else if (c === '`') {
      return fail(SUBSTITUTION);
    } else if (c === '$' && next !== undefined && (next === '(' || next === "'" || next === '"' || EXPANSION_START.test(next))) {
      return fail(expansion(next));
    } else if (c === '&' && next === '&') {
      endSegment();
      i += 2;
    } else if (c === '|' && next === '|') {
      endSegment();
      i += 2;
    } else if (c === '|') {
      if (next === '&') return fail('"|&" is not allowed; use "2>&1 |".');
      endSegment();
      i++;
    } else if (c === '>' || (c === '&' && next === '>')) {
      if (next === '(') return fail('process substitution ">(…)" is not allowed.');
      const fd = inWord && !quoted && /^[0-9]*$/.test(text) ? text : undefined;
      if (fd !== undefined) {
        text = '';
        inWord = false;
      } else endWord();
      const end = harmlessRedirection(command, c === '&' ? i + 1 : i);
      if (end === undefined) return fail('output redirection (>, >>) is not allowed, only 2>&1 and >/dev/null; use the file_write tool to write files.');
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
    } else if (c === '~' && !inWord) {
      return fail('"~" is not allowed in commands; commands run in the workspace, so use a relative path.');
    } else {
      if (c === '*' || c === '?' || c === '[') glob = true;
      text += c;
      inWord = true;
      i++;
    }
  }
  endSegment();
  while (segments.length > 1 && segments.at(-1)!.words.length === 0) segments.pop();
  return { ok: true, segments };
}

const SUBSTITUTION = 'command substitution (backticks or $(…)) is not allowed; run the inner command on its own first.';

function expansion(next: string): string {
  if (next === '(') return SUBSTITUTION;
  if (next === "'" || next === '"') return '$\'…\' and $"…" quoting is not allowed; write the text literally in plain quotes.';
  return 'variable expansion ($NAME, ${…}) is not allowed; write the value literally.';
}

/** End index of a `>/dev/null`, `>>/dev/null`, `>&1` or `>&2` starting at `i` (the `>`), else undefined. */
function harmlessRedirection(command: string, i: number): number | undefined {
  let j = i + 1;
  if (command[j] === '>') j++;
  while (command[j] === ' ' || command[j] === '\t') j++;
  const rest = command.slice(j);
  const match = /^(&[12]|\/dev\/null)(?=$|[\s;&|])/.exec(rest);
  return match === null ? undefined : j + match[0].length;
}

function fail(reason: string): ParsedCommand {
  return { ok: false, reason };
}
