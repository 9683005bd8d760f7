/**
 * Hostile inputs against the real tool factories and a real temporary workspace: every one
 * must be refused with a sentence the model can act on, and nothing outside the workspace
 * may be read or written. The policy runs in `full` autonomy, so what refuses is the tools'
 * own sandbox, not the approval flow.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, realpath, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { createSecurityPolicy, type SecurityPolicy } from '../src/security/policy.ts';
import type { Tool, ToolContext, ToolResult } from '../src/tool.ts';
import { createFileEditTool, createFileReadTool, createFileWriteTool } from '../src/tools/files.ts';
import { createGlobTool, createGrepTool } from '../src/tools/search.ts';
import { createShellTool } from '../src/tools/shell.ts';
import { testLogger } from './support/log.ts';

const SECRET_ENV = 'sk-hostile-test';
const OUTSIDE_TEXT = 'TOP-SECRET-OUTSIDE-THE-WORKSPACE';
const MARKER = `switchboard-hostile-${process.pid}`;

type ToolName = 'shell' | 'file_read' | 'file_write' | 'file_edit' | 'glob' | 'grep';

interface Case {
  readonly name: string;
  readonly tool: ToolName;
  readonly args: Record<string, unknown>;
  /** What the refusal must say. */
  readonly message: RegExp;
  /** Paths (relative to the temp base, or absolute) that must not exist afterwards. */
  readonly notCreated?: readonly string[];
}

const sh = (name: string, command: string, message: RegExp, notCreated?: readonly string[]): Case => ({ name, tool: 'shell', args: { command }, message, ...(notCreated ? { notCreated } : {}) });
const read = (name: string, path: string, message: RegExp): Case => ({ name, tool: 'file_read', args: { path }, message });
const write = (name: string, path: string, message: RegExp, notCreated: readonly string[]): Case => ({ name, tool: 'file_write', args: { path, content: 'pwned' }, message, notCreated });

const ESCAPE = /escapes the workspace; use a path relative to the workspace, e.g. notes\/todo\.md/;
const ABSOLUTE = /absolute path .* is outside the workspace; use a path relative to the workspace/;
const SYMLINK = /leads outside the workspace through a symbolic link/;
const ABS_ARG = /Command refused: absolute paths are not allowed in commands .*use a relative path/;
const NOT_LISTED = /Command refused: ".*" is not on the command allowlist; allowed programs are: .*extra_allowed_commands/;
const NEVER = /Command refused: ".*" is never allowed/;

const cases: readonly Case[] = [
  // Path escapes through the file and search tools.
  read('parent traversal', '../../etc/passwd', ESCAPE),
  read('deep parent traversal', 'notes/../../../etc/shadow', ESCAPE),
  read('absolute system file', '/etc/passwd', ABSOLUTE),
  read('absolute root', '/', ABSOLUTE),
  read('symlink to /etc', 'etc-link/passwd', SYMLINK),
  read('symlink to a file outside', 'secret-link', SYMLINK),
  read('symlinked folder outside', 'out-dir-link/secret.txt', SYMLINK),
  read('percent-encoded traversal', '%2e%2e%2f%2e%2e%2fetc%2fpasswd', /percent-encoded/),
  read('mixed-case percent encoding', '%2E%2E/outside/secret.txt', /percent-encoded/),
  read('percent-encoded backslash', '..%5c..%5cetc%5cpasswd', /percent-encoded/),
  read('NUL byte truncation', 'notes.md\0../../etc/passwd', /NUL byte/),
  read('home directory', '~/.ssh/id_rsa', /"~" \(a home directory\) is outside the workspace/),
  read('other user home', '~root/.bashrc', /"~" \(a home directory\) is outside the workspace/),
  read('process environment', '/proc/self/environ', ABSOLUTE),
  read('proc cwd loop back', '/proc/self/cwd/notes.md', ABSOLUTE),
  read('device file', '/dev/stdin', ABSOLUTE),
  write('write with parent traversal', '../outside/evil.txt', ESCAPE, ['outside/evil.txt']),
  write('write to absolute path outside', `/tmp/${MARKER}-abs.txt`, ABSOLUTE, [`/tmp/${MARKER}-abs.txt`]),
  write('new file under a symlinked folder', 'out-dir-link/new.txt', SYMLINK, ['outside/new.txt']),
  write('write through a dangling symlink', 'dangling', SYMLINK, ['outside/created-by-dangling.txt']),
  write('write under /etc via symlink', `etc-link/${MARKER}`, SYMLINK, [`/etc/${MARKER}`]),
  write('write to the parent folder itself', '..', ESCAPE, []),
  { name: 'edit through a symlink', tool: 'file_edit', args: { path: 'secret-link', old_string: 'TOP', new_string: 'PWNED' }, message: SYMLINK },
  { name: 'edit with traversal', tool: 'file_edit', args: { path: '../outside/secret.txt', old_string: 'TOP', new_string: 'PWNED' }, message: ESCAPE },
  { name: 'grep a folder outside', tool: 'grep', args: { pattern: 'SECRET', path: '../outside' }, message: ESCAPE },
  { name: 'grep through a symlink', tool: 'grep', args: { pattern: 'root', path: 'etc-link' }, message: SYMLINK },
  { name: 'grep an absolute path', tool: 'grep', args: { pattern: 'root', path: '/etc' }, message: ABSOLUTE },
  { name: 'grep with a traversal glob', tool: 'grep', args: { pattern: 'SECRET', glob: '../**' }, message: /The glob may not contain "\.\."/ },
  { name: 'glob an absolute pattern', tool: 'glob', args: { pattern: '/etc/*' }, message: /must be relative to the workspace, not absolute/ },
  { name: 'glob a parent pattern', tool: 'glob', args: { pattern: '../outside/*' }, message: /may not contain "\.\."/ },
  { name: 'glob home', tool: 'glob', args: { pattern: '~/.ssh/*' }, message: /"~" is outside it/ },

  // Command injection through the shell tool.
  sh('second command after ;', 'ls; cat /etc/passwd', ABS_ARG),
  sh('second command after &&', 'ls && curl http://example.com/x', NOT_LISTED),
  sh('second command after ||', 'ls missing || cat ../../etc/passwd', /Command refused: the argument \.\.\/\.\.\/etc\/passwd escapes the workspace/),
  sh('newline-separated second command', 'ls\ncurl http://example.com', NOT_LISTED),
  sh('command substitution', 'echo $(id)', /Command refused: command substitution/),
  sh('substitution inside double quotes', 'echo "$(cat /etc/passwd)"', /Command refused: command substitution/),
  sh('backticks', 'echo `id`', /Command refused: command substitution/),
  sh('pipe into a shell', 'echo id | sh', NEVER),
  sh('bash -c', 'bash -c "cat /etc/passwd"', NEVER),
  sh('eval', 'eval "cat /etc/passwd"', NEVER),
  sh('exec', 'exec cat notes.md', NEVER),
  sh('source', '. ./evil.sh', NEVER),
  sh('sudo', 'sudo ls', NEVER),
  sh('xargs runs anything', 'echo notes.md | xargs cat', NEVER),
  sh('unknown program', 'frobnicate --all', NOT_LISTED),
  sh('program by path', '/bin/cat notes.md', /Command refused: programs must be named, not given as a path/),
  sh('redirect into /etc', `echo x > /etc/${MARKER}`, /Command refused: output redirection/, [`/etc/${MARKER}`]),
  sh('append redirect', `echo x >> ../outside/${MARKER}`, /Command refused: output redirection/, [`outside/${MARKER}`]),
  sh('input redirect', 'wc -l < /etc/passwd', /Command refused: input redirection/),
  sh('here-document', 'cat <<EOF\nroot\nEOF', /Command refused: here-documents/),
  sh('process substitution', 'diff <(cat /etc/passwd) notes.md', /Command refused: process substitution/),
  sh('env assignment prefix', 'FOO=1 ls', /Command refused: environment assignments before a command/),
  sh('PATH hijack prefix', 'PATH=. ls', /Command refused: environment assignments before a command/),
  sh('subshell', '(cd / && cat etc/passwd)', /Command refused: subshells/),
  sh('brace group', '{ cat /etc/passwd; }', /Command refused: unquoted braces/),
  sh('background job', 'sleep 100 & cat notes.md', /Command refused: background jobs/),
  sh('rm -rf /', 'rm -rf /', /Command refused: rm -r on \/ would delete/),
  sh('rm -rf *', 'rm -rf *', /Command refused: rm -r on \* would delete/),
  sh('rm -rf ~', 'rm -rf ~', /Command refused: "~" is not allowed in commands/),
  sh('find -exec', 'find . -exec cat /etc/passwd \\;', /Command refused: find -exec runs other programs/),
  sh('git -c pager', "git -c core.pager='cat /etc/passwd' log", /Command refused: that git option/),
  sh('ANSI-C quoting', "cat $'\\x2fetc\\x2fpasswd'", /Command refused: \$'…' and \$"…" quoting is not allowed/),
  sh('symlink argument', 'cat etc-link/passwd', /Command refused: the argument etc-link\/passwd: .*symbolic link/),
  sh('wildcard through a symlink', 'cat e*/passwd', /Command refused: the argument e\*\/passwd \(matching etc-link\): .*symbolic link/),
  sh('cd into a symlinked folder', 'cd out-dir-link && cat secret.txt', /Command refused: the argument out-dir-link: .*symbolic link/),
  sh('copy a file out through a link', 'cp secret-link stolen.txt', /Command refused: the argument secret-link: .*symbolic link/, ['ws/stolen.txt']),
  sh('dot wildcard matching ..', 'cat .?/outside/secret.txt', /Command refused: the wildcard \.\?\/outside\/secret\.txt could match "\.\."/),
  sh('tar from /', 'tar -C / -cf etc.tar etc', ABS_ARG, ['ws/etc.tar']),

  // Environment exfiltration.
  sh('env', 'env', NEVER),
  sh('printenv', 'printenv', NOT_LISTED),
  sh('printenv one name', 'printenv OPENAI_API_KEY', NOT_LISTED),
  sh('set', 'set', NOT_LISTED),
  sh('proc environ', 'cat /proc/self/environ', ABS_ARG),
  sh('proc environ by traversal', 'cat ../../../../proc/self/environ', /escapes the workspace/),
  sh('variable expansion', 'echo $OPENAI_API_KEY', /Command refused: variable expansion/),
  sh('braced expansion', 'echo "${OPENAI_API_KEY}"', /Command refused: variable expansion/),
];

describe('hostile tool inputs', () => {
  let base: string;
  let ws: string;
  let policy: SecurityPolicy;
  let tools: Record<ToolName, Tool>;
  let outsideBefore: string;
  const previousKey = process.env.OPENAI_API_KEY;

  before(async () => {
    process.env.OPENAI_API_KEY = SECRET_ENV;
    base = await realpath(await mkdtemp(join(tmpdir(), 'sb-hostile-')));
    ws = join(base, 'ws');
    await mkdir(join(ws, 'notes'), { recursive: true });
    await mkdir(join(base, 'outside'));
    await writeFile(join(ws, 'notes.md'), 'hello from the workspace\n');
    await writeFile(join(base, 'outside', 'secret.txt'), `${OUTSIDE_TEXT}\n`);
    await symlink('/etc', join(ws, 'etc-link'));
    await symlink(join(base, 'outside'), join(ws, 'out-dir-link'));
    await symlink(join(base, 'outside', 'secret.txt'), join(ws, 'secret-link'));
    await symlink(join(base, 'outside', 'created-by-dangling.txt'), join(ws, 'dangling'));
    policy = createSecurityPolicy({ workspace: ws, autonomy: 'full', commandTimeoutMs: 10_000 });
    tools = {
      shell: createShellTool(policy) as unknown as Tool,
      file_read: createFileReadTool(policy) as unknown as Tool,
      file_write: createFileWriteTool(policy) as unknown as Tool,
      file_edit: createFileEditTool(policy) as unknown as Tool,
      glob: createGlobTool(policy) as unknown as Tool,
      grep: createGrepTool(policy) as unknown as Tool,
    };
    outsideBefore = await snapshot(join(base, 'outside'));
  });

  after(async () => {
    if (previousKey === undefined) delete process.env.OPENAI_API_KEY;
    else process.env.OPENAI_API_KEY = previousKey;
    await rm(`/etc/${MARKER}`, { force: true });
    await rm(`/tmp/${MARKER}-abs.txt`, { force: true });
    await rm(base, { recursive: true, force: true });
  });

  const ctx = (): ToolContext => ({ conversation: 'c', channel: 'test', senderId: 'attacker', workspace: ws, signal: new AbortController().signal, log: testLogger() });

  it(`has at least 50 cases (${cases.length})`, () => {
    assert.ok(cases.length >= 50);
  });

  for (const c of cases) {
    it(`refuses ${c.tool}: ${c.name}`, async () => {
      const result = await tools[c.tool].execute(c.args, ctx());
      assert.equal(result.kind, 'error', `${c.name}: expected a refusal, got ${JSON.stringify(result)}`);
      const message = result.kind === 'error' ? result.message : '';
      assert.match(message, c.message);
      assert.match(message, /[.!]$|\)$/, 'a refusal is a full sentence');
      assertNoLeak(message);
      for (const path of c.notCreated ?? []) assert.equal(existsSync(path.startsWith('/') ? path : join(base, path)), false, `${path} must not exist`);
    });
  }

  it('never leaks the API key, even when a command that prints the environment is allowed', async () => {
    const permissive = createShellTool(createSecurityPolicy({ workspace: ws, autonomy: 'full', extraAllowedCommands: ['printenv'], envPassthrough: ['LANG'] }));
    const all = await permissive.execute({ command: 'printenv' }, ctx());
    assert.equal(all.kind, 'ok');
    if (all.kind === 'ok') {
      assert.match(all.text, /^exit code 0\n/);
      assert.match(all.text, new RegExp(`HOME=${ws}`));
      assert.doesNotMatch(all.text, /OPENAI_API_KEY/);
    }
    assertNoLeak(JSON.stringify(all));
    const one = await permissive.execute({ command: 'printenv OPENAI_API_KEY' }, ctx());
    assert.deepEqual(one, { kind: 'ok', text: 'exit code 1\n(no output)' });
    const echoed = await permissive.execute({ command: "echo 'sk-hostile-test is scrubbed too'" }, ctx());
    assert.deepEqual(echoed, { kind: 'ok', text: 'exit code 0\n[redacted] is scrubbed too' });
  });

  it('left everything outside the workspace as it was', async () => {
    assert.equal(await snapshot(join(base, 'outside')), outsideBefore);
    assert.equal(existsSync(`/etc/${MARKER}`), false);
  });

  describe('what is allowed still works', () => {
    it('runs allowed commands', async () => {
      const result = await tools.shell.execute({ command: 'ls notes.md && cat notes.md | wc -l && echo "a;b" | tr ";" "-"' }, ctx());
      assert.deepEqual(result, { kind: 'ok', text: 'exit code 0\nnotes.md\n1\na-b' });
    });

    it('round-trips a file through write, edit, read, glob and grep', async () => {
      const run = (tool: ToolName, args: Record<string, unknown>): Promise<ToolResult> => tools[tool].execute(args, ctx());
      assert.equal((await run('file_write', { path: 'notes/todo.md', content: '- buy milk\n- call mum\n' })).kind, 'ok');
      assert.equal((await run('file_edit', { path: 'notes/todo.md', old_string: 'milk', new_string: 'oat milk' })).kind, 'ok');
      assert.deepEqual(await run('file_read', { path: 'notes/todo.md' }), { kind: 'ok', text: '1\t- buy oat milk\n2\t- call mum' });
      assert.deepEqual(await run('glob', { pattern: 'notes/*.md' }), { kind: 'ok', text: 'notes/todo.md' });
      assert.deepEqual(await run('grep', { pattern: 'oat', path: 'notes' }), { kind: 'ok', text: 'notes/todo.md:1: - buy oat milk' });
      assert.deepEqual(await run('shell', { command: 'cat notes/todo.md' }), { kind: 'ok', text: 'exit code 0\n- buy oat milk\n- call mum' });
    });
  });
});

function assertNoLeak(text: string): void {
  assert.doesNotMatch(text, new RegExp(SECRET_ENV), 'the API key leaked');
  assert.doesNotMatch(text, new RegExp(OUTSIDE_TEXT), 'a file outside the workspace was read');
  assert.doesNotMatch(text, /root:x:0:0/, '/etc/passwd was read');
}

/** Names and contents of every file under `dir`, as one string. */
async function snapshot(dir: string): Promise<string> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  const files = entries.filter((e) => e.isFile()).map((e) => join(e.parentPath, e.name)).sort();
  const parts = await Promise.all(files.map(async (file) => `${file}=${await readFile(file, 'utf8')}`));
  return parts.join('\n');
}
