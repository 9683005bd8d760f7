/**
 * A data_dir that cannot be created or written: every command that opens it exits 73 with one
 * paragraph naming the path, the user and the fix — no stack trace, and never a loop. The
 * "cannot write" cases run the CLI as `nobody` (root can write anywhere), so they need root.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { cliPath } from './support/cli.ts';

const NOBODY = 65534;
const asRoot = process.getuid?.() === 0 ? false : 'runs the CLI as nobody, which needs root (CI runs as root)';

interface Run {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
  readonly ms: number;
}

/** The CLI with a hard deadline: a loop would fail the test here, not hang it. */
function run(args: readonly string[], options: { uid?: number; cwd: string; timeoutMs?: number }): Promise<Run> {
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const env: NodeJS.ProcessEnv = { ...process.env, TEST_MODEL_KEY: 'k' };
    delete env.SWITCHBOARD_CONFIG;
    delete env.SWITCHBOARD_LOG_LEVEL;
    const child = spawn(process.execPath, [cliPath, ...args], { cwd: options.cwd, env, ...(options.uid === undefined ? {} : { uid: options.uid, gid: options.uid }) });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`switchboard ${args.join(' ')} did not exit within ${options.timeoutMs ?? 15_000} ms (a loop?)\nstderr: ${stderr}`));
    }, options.timeoutMs ?? 15_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr, ms: Date.now() - started });
    });
    child.stdin.end('');
  });
}

/** A temp dir others may enter, holding a config whose data_dir is `dataDir`. */
function setup(dataDir: string): { dir: string; file: string; cleanup(): void } {
  const dir = mkdtempSync(join(tmpdir(), 'sb-files-e2e-'));
  chmodSync(dir, 0o755);
  const file = join(dir, 'switchboard.toml');
  writeFileSync(
    file,
    `data_dir = ${JSON.stringify(dataDir)}\n[provider]\nkind = "openai"\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "m"\napi_key = "\${TEST_MODEL_KEY}"\n[channels.terminal]\nuser = "tester"\n`,
    { mode: 0o644 },
  );
  return { dir, file, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** One paragraph, no stack trace, exit 73. */
function assertExplained(result: Run, ...patterns: RegExp[]): void {
  assert.equal(result.code, 73, result.stderr);
  assert.doesNotMatch(result.stderr, /\n\s+at |node:internal|Error: /, 'no stack trace');
  assert.equal(result.stderr.trim().split('\n').length, 1, `one paragraph: ${result.stderr}`);
  for (const pattern of patterns) assert.match(result.stderr, pattern);
}

const quote = (text: string): string => text.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');

describe('a data_dir that cannot be created', () => {
  it('as a user who may not write its parent: EACCES naming the path, the user and the fix (start, chat, memory, pairing)', { skip: asRoot }, async () => {
    const { dir, file, cleanup } = setup('./data');
    try {
      const data = join(dir, 'data');
      for (const args of [['start'], ['chat'], ['memory', 'list'], ['pairing', 'list']]) {
        const result = await run([...args, '--config', file], { uid: NOBODY, cwd: dir });
        assertExplained(
          result,
          new RegExp(`Cannot create the directory ${quote(data)}: permission denied \\(EACCES\\)`),
          /Switchboard runs as nobody \(uid 65534\), who may not write .* \(owned by root, mode 755\)/,
          new RegExp(`Fix: sudo install -d -o nobody -m 700 ${quote(data)}`),
          new RegExp(`or set data_dir in ${quote(file)} to a directory nobody may write`),
        );
        assert.equal(existsSync(data), false);
      }
    } finally {
      cleanup();
    }
  });

  it('a data_dir (or a file in it) that belongs to another user: chown -R the data_dir', { skip: asRoot }, async () => {
    const { dir, file, cleanup } = setup('./data');
    try {
      const data = join(dir, 'data');
      mkdirSync(join(data, 'workspace'), { recursive: true, mode: 0o755 });
      const first = await run(['chat', '--config', file], { uid: NOBODY, cwd: dir });
      assertExplained(first, new RegExp(`Cannot write in ${quote(data)}: permission denied`), new RegExp(`Fix: sudo chown -R nobody ${quote(data)} `));

      // The directories are the user's, but the database from an earlier run as root is not.
      for (const sub of ['', 'workspace']) chownSync(join(data, sub), NOBODY, NOBODY);
      writeFileSync(join(data, 'switchboard.db'), '', { mode: 0o600 });
      const second = await run(['chat', '--config', file], { uid: NOBODY, cwd: dir });
      assertExplained(second, /Cannot open the (database|lock file) .*: permission denied \(EACCES\)/, /owned by root, mode 600/, new RegExp(`sudo chown -R nobody ${quote(data)} `));
    } finally {
      cleanup();
    }
  });

  it('a config file the user may not read: exit 78 naming the user and the fix', { skip: asRoot }, async () => {
    const { dir, file, cleanup } = setup('./data');
    try {
      chmodSync(file, 0o600);
      const result = await run(['start', '--config', file], { uid: NOBODY, cwd: dir });
      assert.equal(result.code, 78, result.stderr);
      const expected = `Config error in ${file}:\n  (file): cannot be read (EACCES): Switchboard runs as nobody (uid 65534), who may not read it; let that user read it (e.g. sudo chgrp <its group> ${file} && sudo chmod 640 ${file})`;
      assert.ok(result.stderr.startsWith(expected), result.stderr);
      assert.doesNotMatch(result.stderr, /\n\s+at /, 'no stack trace');
    } finally {
      cleanup();
    }
  });

  it('under a file: ENOTDIR naming the file', async () => {
    const { dir, file, cleanup } = setup('./a-file/data');
    try {
      writeFileSync(join(dir, 'a-file'), 'not a directory');
      for (const args of [['start'], ['chat'], ['memory', 'list']]) {
        const result = await run([...args, '--config', file], { cwd: dir });
        assertExplained(result, new RegExp(`${quote(join(dir, 'a-file'))} is a file, not a directory`), /\(ENOTDIR\)\. Fix: move .* out of the way, or set data_dir in .* to another path\./);
      }
    } finally {
      cleanup();
    }
  });

  it('under /proc: an answer within seconds instead of a mkdir loop at 100 % CPU', { skip: existsSync('/proc/self') ? false : 'no /proc on this system' }, async () => {
    const { dir, file, cleanup } = setup('/proc/switchboard-test/data');
    try {
      for (const args of [['chat'], ['start'], ['memory', 'list']]) {
        const result = await run([...args, '--config', file], { cwd: dir, timeoutMs: 10_000 });
        assertExplained(result, /Cannot create the directory \/proc\/switchboard-test\/data: \/proc does not take new directories/, /Fix: set data_dir in .* to a directory on an ordinary disk/);
        assert.ok(result.ms < 10_000);
      }
    } finally {
      cleanup();
    }
  });
});
