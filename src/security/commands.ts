/**
 * Command policy for the shell tool: which programs may run and how risky each call is.
 * A command line is parsed by `command-parser.ts` (a strict subset of sh) and refused outright
 * when it uses shell features that would let a program run without being checked here
 * (substitution, eval, subshells, redirections, variable expansion, env prefixes). The shell
 * tool then runs exactly the parsed argv, without a shell, so what is checked is what runs.
 *
 * This is a guard, not a jail: an allowed program still runs with the daemon's rights.
 * Arguments are checked lexically here and against symlinks by the shell tool before it runs.
 */
import { normalize } from 'node:path/posix';
import type { Risk } from '../tool.ts';
import { parseCommand, type Pipeline, type Segment, type Word } from './command-parser.ts';

export { parseCommand, type Connector, type ParsedCommand, type Pipeline, type Redirection, type Segment, type Word } from './command-parser.ts';

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
  | {
      readonly risk: Risk;
      readonly mutates: boolean;
      readonly summary: string;
      /** Every simple command, in order. */
      readonly segments: readonly Segment[];
      /** What the shell tool executes: exactly these argv, joined as parsed. */
      readonly pipelines: readonly Pipeline[];
    }
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
  for (const pipeline of parsed.pipelines) {
    const problem = cdProblem(pipeline);
    if (problem !== undefined) return { refused: problem };
  }
  let risk: Risk = 'low';
  let mutates = false;
  for (const segment of parsed.segments) {
    const judged = assessSegment(segment, policy);
    if ('refused' in judged) return judged;
    if (RANK[judged.risk] > RANK[risk]) risk = judged.risk;
    mutates ||= judged.mutates;
  }
  return { risk, mutates: mutates || risk !== 'low', summary: summarize(command), segments: parsed.segments, pipelines: parsed.pipelines };
}

/**
 * `cd` is run by the shell tool itself, so only its plain forms are accepted: `cd`, `cd DIR`
 * (options -L/-P and `--` ignored), and not inside a pipeline, where sh would run it in a
 * subshell to no effect.
 */
function cdProblem(pipeline: Pipeline): string | undefined {
  for (const command of pipeline.commands) {
    if (command.words[0]?.text !== 'cd') continue;
    if (pipeline.commands.length > 1) return 'cd inside a pipeline has no effect; use "cd DIR && …" instead.';
    const operands = cdOperands(command.words.slice(1).map((w) => w.text));
    if (operands === undefined) return 'cd accepts no options but -L and -P; use "cd DIR".';
    if (operands.length > 1) return `cd takes one directory, not ${operands.length} (${operands.join(' ')}); quote a name that contains spaces.`;
    if (operands[0] === '-') return 'cd - is not supported; name the directory, e.g. "cd .." or "cd src".';
  }
  return undefined;
}

/** The operands of `cd` after its options (-L, -P, --), or undefined for an unknown option. */
export function cdOperands(args: readonly string[]): string[] | undefined {
  let i = 0;
  for (; i < args.length; i++) {
    const arg = args[i]!;
    if (arg === '--') {
      i++;
      break;
    }
    if (arg === '-' || !arg.startsWith('-')) break;
    if (!/^-[LP]+$/.test(arg)) return undefined;
  }
  return args.slice(i);
}

/** `shell: <command>` on one line, cut to 200 characters. */
export function summarize(command: string): string {
  const line = command.replace(/\s+/g, ' ').trim();
  return `shell: ${line.length > 200 ? `${line.slice(0, 199)}…` : line}`;
}

/** True when risk `a` is above risk `b`. */
export function riskAbove(a: Risk, b: Risk): boolean {
  return RANK[a] > RANK[b];
}

/** Judges one simple command (program, program rules, arguments); the shell tool calls it again on the argv after wildcard expansion. */
export function assessSegment(segment: Segment, policy: CommandPolicy): { risk: Risk; mutates: boolean } | { refused: string } {
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
  // getopt_long takes any unambiguous prefix (`--deref` is `--dereference`): `min` is the shortest that is unambiguous for the program.
  const long = (name: string, min: number): boolean =>
    texts.some((text) => {
      const given = text.startsWith('--') ? text.slice(2).split('=')[0]! : '';
      return given.length >= min && name.startsWith(given);
    });
  const follows = (what: string, fix: string): Rule => ({ refused: `${what} follows symbolic links, possibly out of the workspace (a link to ../../secret would be copied in); ${fix}.` });
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
    case 'cp':
      if (short('L') || short('H') || long('dereference', 3)) return follows('cp -L/-H/--dereference', 'drop that option (cp -r and cp -a copy links as links)');
      return undefined;
    case 'chown':
    case 'chgrp':
      if (short('L') || short('H') || long('dereference', 1)) return follows(`${program} -L/-H/--dereference`, 'drop that option (-R alone does not follow links)');
      return undefined;
    case 'rsync':
      if (short('L') || short('k') || long('copy-links', 6) || long('copy-unsafe-links', 6) || long('copy-dirlinks', 6)) return follows('rsync -L/-k/--copy-links/--copy-unsafe-links/--copy-dirlinks', 'drop that option (-a keeps links as links)');
      return undefined;
    case 'zip':
      // zip stores what a link points to unless told -y, so a recursive zip reads through links.
      if ((short('r') || short('R') || long('recurse-paths', 3) || long('recurse-patterns', 9)) && !(short('y') || long('symlinks', 2))) return follows('zip -r without -y', 'add -y (--symlinks) to store links as links');
      return undefined;
    case 'tar':
      // The first word of tar without a dash is a bundle of option letters (`tar chf a.tar .`).
      if (short('h') || (texts[0] !== undefined && /^[A-Za-z]+$/.test(texts[0]) && texts[0].includes('h')) || long('dereference', 3)) {
        return follows('tar -h/--dereference', 'drop that option (links are archived as links without it)');
      }
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
