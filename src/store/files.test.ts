import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { createPrivateFile, FileSystemError, fileSystemError, makeDirectory, withFileContext } from './files.ts';
import { openDatabase } from './db.ts';

function tempDir(t: { after(fn: () => void): void }): string {
  const dir = mkdtempSync(join(tmpdir(), 'sb-files-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

test('makeDirectory creates every missing component, the last one private, and is idempotent', (t) => {
  const dir = tempDir(t);
  const target = join(dir, 'a', 'b', 'data');
  makeDirectory(target);
  assert.equal(statSync(target).mode & 0o777, 0o700);
  makeDirectory(target); // exists: fine
  makeDirectory(join(dir, 'a')); // an existing one keeps its mode
  assert.ok(statSync(join(dir, 'a')).isDirectory());
});

test('createPrivateFile makes a 0600 file and leaves an existing one alone', (t) => {
  const dir = tempDir(t);
  const file = join(dir, 'x.db');
  createPrivateFile(file);
  assert.equal(statSync(file).mode & 0o777, 0o600);
  writeFileSync(file, 'kept');
  createPrivateFile(file);
  assert.equal(readFileSync(file, 'utf8'), 'kept');
});

test('a database and its WAL are created private', (t) => {
  const dir = tempDir(t);
  const path = join(dir, 'data', 'switchboard.db');
  const db = openDatabase(path);
  t.after(() => db.close());
  db.exec('CREATE TABLE IF NOT EXISTS t (x); INSERT INTO t VALUES (1)');
  assert.equal(statSync(join(dir, 'data')).mode & 0o777, 0o700);
  for (const file of [path, `${path}-wal`, `${path}-shm`]) assert.equal(statSync(file).mode & 0o777, 0o600, file);
});

test('a file where a directory should be: ENOTDIR naming the file and the fix', (t) => {
  const dir = tempDir(t);
  const blocker = join(dir, 'a-file');
  writeFileSync(blocker, '');
  const error = (() => {
    try {
      withFileContext({ dataDir: join(blocker, 'data'), configFile: join(dir, 'switchboard.toml') }, () => makeDirectory(join(blocker, 'data', 'workspace')));
    } catch (caught) {
      return caught;
    }
    return undefined;
  })();
  assert.ok(error instanceof FileSystemError);
  assert.equal(error.code, 'ENOTDIR');
  assert.match(error.message, new RegExp(`${blocker} is a file, not a directory`));
  assert.match(error.message, /Fix: move .* out of the way, or set data_dir in .*switchboard\.toml to another path\.$/);
  assert.doesNotMatch(error.message, /\n/, 'one paragraph');

  // The same when the file is the data_dir itself.
  assert.throws(() => makeDirectory(blocker), (thrown: unknown) => thrown instanceof FileSystemError && thrown.code === 'ENOTDIR' && thrown.message.includes(`${blocker} is a file`));
});

test('under /proc: an error at once, not an endless mkdir loop', { skip: existsSync('/proc/self') ? false : 'no /proc here' }, () => {
  const started = Date.now();
  assert.throws(
    () => makeDirectory('/proc/switchboard-test/data/workspace'),
    (error: unknown) => error instanceof FileSystemError && /\/proc does not take new directories/.test(error.message) && /Fix: set data_dir to a directory on an ordinary disk/.test(error.message),
  );
  assert.ok(Date.now() - started < 1000);
});

test('fileSystemError explains SQLite and errno errors, names the user, and passes anything else through', (t) => {
  const dir = tempDir(t);
  const full = fileSystemError(Object.assign(new Error('database or disk is full'), { code: 'SQLITE_FULL' }), `open the database ${dir}/x.db`, join(dir, 'x.db'));
  assert.ok(full instanceof FileSystemError);
  assert.match(full.message, /no space left on the file system of .*x\.db \(ENOSPC\)\. Fix: free some space \(df -h /);

  const denied = fileSystemError(Object.assign(new Error('EACCES: permission denied'), { code: 'EACCES', path: dir }), `write in ${dir}`, dir);
  assert.ok(denied instanceof FileSystemError);
  const uid = process.getuid?.() ?? -1;
  assert.match(denied.message, new RegExp(`Switchboard runs as ${userInfo().username} \\(uid ${uid}\\)`));
  assert.match(denied.message, new RegExp(`sudo chown -R ${userInfo().username} ${dir}`));

  const readOnly = (fileSystemError(Object.assign(new Error('EROFS'), { code: 'EROFS', path: dir }), 'write', dir) as FileSystemError).in({ dataDir: dir, configFile: '/etc/switchboard/config.toml' });
  assert.match(readOnly.message, /read-only file system \(EROFS\)\. Fix: set data_dir in \/etc\/switchboard\/config\.toml to a writable directory — under systemd/);

  const other = new TypeError('not a file-system problem');
  assert.equal(fileSystemError(other, 'open', dir), other);
  const busy = Object.assign(new Error('database is locked'), { code: 'SQLITE_BUSY' });
  assert.equal(fileSystemError(busy, 'open', dir), busy);
});

test('a missing parent that may not be written: the fix creates the data_dir for the user, never chowns the parent', () => {
  const me = userInfo().username;
  const error = new FileSystemError({ action: 'create the directory /srv/sb/data', path: '/srv/sb/data', code: 'EACCES', blocker: '/srv/sb' }, { dataDir: '/srv/sb/data' });
  assert.match(error.message, new RegExp(`Fix: sudo install -d -o ${me} -m 700 /srv/sb/data`));
  assert.doesNotMatch(error.message, /chown/);
});
