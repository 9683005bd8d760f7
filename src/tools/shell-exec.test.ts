/**
 * The shell tool runs exactly what the guard checked: each case parses a command line the
 * way the guard does, runs it through the tool with a program that prints its argv, and
 * asserts the two are the same. Then the sh features we now run ourselves: &&/||/;, pipes,
 * redirections, cd, wildcards, exit statuses.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, realpath, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { testLogger } from '../../test/support/log.ts';
import { error, text } from '../../test/support/results.ts';
import { parseCommand } from '../security/commands.ts';
import { createSecurityPolicy, type SecurityPolicyOptions } from '../security/policy.ts';
import type { ToolContext } from '../tool.ts';
import { createShellTool } from './shell.ts';

/** Prints its arguments (after `--`) as JSON. */
const ARGV = "node -e 'process.stdout.write(JSON.stringify(process.argv.slice(1)))' --";

describe('shell tool: what runs is what was checked', () => {
  let base: string;
  let ws: string;
  before(async () => {
    base = await realpath(await mkdtemp(join(tmpdir(), 'sb-shell-exec-')));
    ws = join(base, 'ws');
    await mkdir(join(ws, 'sub'), { recursive: true });
    await writeFile(join(ws, 'b.md'), 'b\n');
    await writeFile(join(ws, 'a.md'), 'a\n');
    await writeFile(join(ws, 'keep.txt'), 'keep\n');
    await symlink('/etc', join(ws, 'etc-link'));
  });
  after(() => rm(base, { recursive: true, force: true }));

  const ctx = (): ToolContext => ({ conversation: 'c', channel: 'test', senderId: 'u', workspace: ws, signal: new AbortController().signal, log: testLogger() });
  const shell = (options: Partial<SecurityPolicyOptions> = {}) => createShellTool(createSecurityPolicy({ workspace: ws, autonomy: 'full', ...options }));
  const run = async (command: string, options: Partial<SecurityPolicyOptions> = {}): Promise<string> => text(await shell(options).execute({ command }, ctx()));

  /** The words the guard checked for the one command in `args`, after the ARGV prefix. */
  const checked = (args: string): string[] => {
    const parsed = parseCommand(`${ARGV} ${args}`);
    assert.ok(parsed.ok, `${args} did not parse`);
    assert.equal(parsed.segments.length, 1, `${args} is one command`);
    return parsed.segments[0]!.words.slice(4).map((w) => w.text);
  };

  const exact: ReadonlyArray<readonly [string, string, readonly string[]]> = [
    ['adjacent quotes join', `'a'"b"c`, ['abc']],
    ['backslash escapes', String.raw`a\ b \"c\" d\\e \'`, ['a b', '"c"', 'd\\e', "'"]],
    ['backslash inside single quotes is literal', String.raw`'a\' 'b\\n'`, ['a\\', 'b\\\\n']],
    ['double-quote escapes only $ ` " \\ newline', String.raw`"a\$b \x \"q\""`, ['a$b \\x "q"']],
    ['escaped dollar is not expansion', String.raw`\$IFS '$HOME' "\$PATH"`, ['$IFS', '$HOME', '$PATH']],
    ['a lone $ is literal', '$ a$ $%', ['$', 'a$', '$%']],
    ['; | && inside quotes are text', `"a;b" 'c|d' "e&&f" g\\;h`, ['a;b', 'c|d', 'e&&f', 'g;h']],
    ['newline inside quotes stays in the argument', '"line1\nline2"', ['line1\nline2']],
    ['line continuation joins', 'ab\\\ncd', ['abcd']],
    ['# inside a word is text, a comment after a blank', 'a#b # c; rm keep.txt', ['a#b']],
    ['unicode quotes are ordinary characters', '‘a b’ “c”', ['‘a', 'b’', '“c”']],
    ['unicode dashes and non-breaking space are ordinary characters', '—rf −L a\u00a0b', ['—rf', '−L', 'a\u00a0b']],
    ['carriage return is part of the word', 'a\rb', ['a\rb']],
    ['quoted wildcards are literal', `'*' "?.md" \\[a].md "*".md`, ['*', '?.md', '[a].md', '*.md']],
    ['empty quotes are an argument', `'' ""`, ['', '']],
    ['tabs separate words', 'a\tb', ['a', 'b']],
  ];
  for (const [name, args, words] of exact) {
    it(name, async () => {
      assert.deepEqual(checked(args), words, 'what the guard checked');
      assert.equal(await run(`${ARGV} ${args}`), `exit code 0\n${JSON.stringify(words)}`, 'what ran');
    });
  }

  it('a ; inside curly quotes still separates commands, and the second is checked', async () => {
    assert.match(error(await shell().execute({ command: 'echo “a;cat /etc/passwd”' }, ctx())), /Command refused: absolute paths/);
    assert.equal(await run('echo “a;echo b”'), 'exit code 0\n“a\nb”');
  });

  it('a word with a non-breaking space is one program name, not "ls -L"', async () => {
    assert.match(error(await shell().execute({ command: 'ls\u00a0-L etc-link' }, ctx())), /not on the command allowlist/);
  });

  it('refuses $IFS and other expansions instead of guessing their value', async () => {
    for (const command of ['cat$IFS/etc/passwd', 'cat${IFS}x', 'echo "$IFS"']) {
      assert.match(error(await shell().execute({ command }, ctx())), /variable expansion/, command);
    }
  });

  it('expands wildcards itself, sorted, and runs the expanded argv', async () => {
    assert.equal(await run(`${ARGV} *.md`), 'exit code 0\n["a.md","b.md"]');
    assert.equal(await run(`${ARGV} ?.md *[!a].md`), 'exit code 0\n["a.md","b.md","b.md"]');
    assert.equal(await run(`${ARGV} "*".md`), 'exit code 0\n["*.md"]');
    assert.equal(await run(`${ARGV} *.none`), 'exit code 0\n["*.none"]', 'no match: the word as written, like sh');
    assert.equal(await run(`${ARGV} s*/`), 'exit code 0\n["sub/"]');
  });

  it('never follows a wildcard through a symlink out of the workspace', async () => {
    assert.match(error(await shell().execute({ command: 'ls e*/' }, ctx())), /e\*\/ \(matching etc-link\).*symbolic link/);
  });
});

describe('shell tool: sequencing, pipes and redirections without a shell', () => {
  let ws: string;
  before(async () => {
    ws = await realpath(await mkdtemp(join(tmpdir(), 'sb-shell-seq-')));
    await mkdir(join(ws, 'sub'));
    await writeFile(join(ws, 'sub', 'file.txt'), 'x\n');
  });
  after(() => rm(ws, { recursive: true, force: true }));

  const ctx = (): ToolContext => ({ conversation: 'c', channel: 'test', senderId: 'u', workspace: ws, signal: new AbortController().signal, log: testLogger() });
  const tool = (options: Partial<SecurityPolicyOptions> = {}) => createShellTool(createSecurityPolicy({ workspace: ws, autonomy: 'full', ...options }));
  const run = async (command: string, options: Partial<SecurityPolicyOptions> = {}): Promise<string> => text(await tool(options).execute({ command }, ctx()));
  const OUT_ERR = `node -e "console.log('O'); console.error('E')"`;

  it('refuses a wildcard that matches a name the program would take as an option', async () => {
    await writeFile(join(ws, 'sub', '-L'), '');
    try {
      assert.match(error(await tool().execute({ command: 'cd sub && ls *' }, ctx())), /the wildcard \* matched the file name -L.*write \.\/\*/);
      assert.equal(await run('cd sub && ls ./*'), 'exit code 0\n./-L\n./file.txt');
    } finally {
      await rm(join(ws, 'sub', '-L'));
    }
  });

  it('judges the expanded argv again: a wildcard cannot turn a read into a write', async () => {
    await mkdir(join(ws, 'pair'));
    await writeFile(join(ws, 'pair', 'in.txt'), 'x\n');
    await writeFile(join(ws, 'pair', 'out.txt'), 'keep me\n');
    const message = error(await tool().execute({ command: 'uniq pair/*' }, ctx()));
    assert.match(message, /after wildcard expansion \(uniq pair\/in\.txt pair\/out\.txt\) the command is riskier than the one assessed \(medium risk, writes files\)/);
    assert.equal(await run('cat pair/out.txt'), 'exit code 0\nkeep me');
  });

  it('checks again right before each command runs, with the files as they are then', async () => {
    const message = error(await tool().execute({ command: 'touch sub/-x && cd sub && ls *' }, ctx()));
    assert.match(message, /^Command refused: the wildcard \* matched the file name -x.*\(nothing after this point ran\)/s);
    assert.ok(existsSync(join(ws, 'sub', '-x')), 'the first command ran');
    await rm(join(ws, 'sub', '-x'));
  });

  it('sequences && and || left to right like sh, and ; always', async () => {
    assert.equal(await run('false && echo a || echo b'), 'exit code 0\nb');
    assert.equal(await run('true || echo a && echo b'), 'exit code 0\nb');
    assert.equal(await run('false; echo after'), 'exit code 0\nafter');
    assert.equal(await run('echo a && false'), 'exit code 1\na');
    assert.equal(await run('false && echo never'), 'exit code 1\n(no output)');
  });

  it('pipes stdout to stdin and reports the last command\'s status', async () => {
    assert.equal(await run('printf "b\\na\\n" | sort | head -1'), 'exit code 0\na');
    assert.equal(await run('echo x | false'), 'exit code 1\n(no output)');
  });

  it('lets a writer die of SIGPIPE when the reader stops early', async () => {
    const started = Date.now();
    assert.equal(await run('seq 1 100000000 | head -1'), 'exit code 0\n1');
    assert.ok(Date.now() - started < 10_000);
  });

  it('applies redirections in order, as sh does', async () => {
    assert.equal(await run(`${OUT_ERR} 2>&1 >/dev/null | wc -l`), 'exit code 0\n1');
    assert.equal(await run(`${OUT_ERR} >/dev/null 2>&1`), 'exit code 0\n(no output)');
    assert.equal(await run(`${OUT_ERR} 2>/dev/null`), 'exit code 0\nO');
    assert.equal(await run(`${OUT_ERR} &>/dev/null`), 'exit code 0\n(no output)', '&> is bash\'s "both", not dash\'s "background"');
    assert.equal(await run(`${OUT_ERR} 2>/dev/null >&2 | wc -c`), 'exit code 0\n0', 'stdout copies stderr, which already went to /dev/null');
    const bypass = await run(`${OUT_ERR} >&2 2>/dev/null | wc -c`);
    assert.deepEqual(bypass.split('\n').sort(), ['0', 'O', 'exit code 0'], 'stdout bypasses the pipe, so wc counts nothing');
  });

  it('refuses redirections it does not run', async () => {
    for (const command of ['ls 3>&1', 'ls >&3', 'ls > &1', 'ls >>&1', 'ls >/dev/null\u00a0x', 'ls &>&1']) {
      assert.match(error(await tool().execute({ command }, ctx())), /Command refused: output redirection/, command);
    }
  });

  it('refuses a line that ends in an operator instead of dropping it', async () => {
    assert.match(error(await tool().execute({ command: 'ls &&' }, ctx())), /ends with "&&"/);
    assert.match(error(await tool().execute({ command: 'ls |' }, ctx())), /ends with "\|"/);
    assert.equal(await run('echo a;'), 'exit code 0\na');
  });

  it('runs cd itself, inside the workspace only', async () => {
    assert.equal(await run('cd sub && cat file.txt && cd && pwd'), `exit code 0\nx\n${ws}`);
    assert.equal(await run('cd missing && echo no || echo yes'), 'exit code 0\ncd: missing: no such directory\nyes');
    assert.equal(await run('cd missing 2>/dev/null || echo quiet'), 'exit code 0\nquiet');
    assert.equal(await run('cd sub/file.txt'), 'exit code 1\ncd: sub/file.txt: not a directory');
    assert.match(error(await tool().execute({ command: 'cd sub | ls' }, ctx())), /cd inside a pipeline has no effect/);
    assert.match(error(await tool().execute({ command: 'cd -' }, ctx())), /cd - is not supported/);
    assert.match(error(await tool().execute({ command: 'cd a b' }, ctx())), /cd takes one directory/);
  });

  it('reports a missing program as exit code 127 and goes on like sh', async () => {
    const options = { extraAllowedCommands: ['sb-no-such-program'] };
    assert.equal(await run('sb-no-such-program', options), 'exit code 127\nsb-no-such-program: command not found');
    assert.equal(await run('sb-no-such-program || echo fallback', options), 'exit code 0\nsb-no-such-program: command not found\nfallback');
    assert.equal(await run('sb-no-such-program | wc -c', options), 'exit code 0\nsb-no-such-program: command not found\n0');
  });

  it('reports a command killed by a signal', async () => {
    assert.equal(await run(`node -e "process.kill(process.pid, 'SIGTERM')"`), 'exit code 0\n(no output)'.replace('exit code 0', 'killed by SIGTERM'));
  });

  it('runs /usr/bin/echo, not a shell builtin: no escape processing without -e', async () => {
    assert.equal(await run("echo 'a\\nb'"), 'exit code 0\na\\nb');
  });
});
