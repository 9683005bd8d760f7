/**
 * A damaged database — truncated, garbage over a page in the middle, not a database at all —
 * stops `switchboard start` (and the commands that open the database) with one paragraph that
 * names the file, says what is wrong and points to the backup, and exit code 65: never a stack trace.
 */
import assert from 'node:assert/strict';
import { closeSync, openSync, readFileSync, statSync, truncateSync, writeFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { openDatabase } from '../src/store/db.ts';
import { runCli, tempConfig } from './support/cli.ts';

const env = { TEST_MODEL_KEY: 'k' };

/** A database in `dataDir` with some history: ~600 KB, so its middle pages are history leaves. */
function makeDatabase(dataDir: string): string {
  const path = join(dataDir, 'switchboard.db');
  const db = openDatabase(path);
  const append = db.prepare('INSERT INTO history (conversation, turn, message, created_at) VALUES (?, ?, ?, ?)');
  db.transaction(() => {
    for (let turn = 0; turn < 500; turn++) append.run('terminal:local:me', turn, JSON.stringify({ role: 'user', content: `message ${turn} ${'x'.repeat(1000)}` }), Date.now());
  })();
  db.close(); // a clean close: no -wal left behind
  return path;
}

describe('a damaged database stops start with a clear message and exit 65', () => {
  let config: ReturnType<typeof tempConfig>;
  let dataDir: string;
  let pristine: Buffer;
  before(() => {
    config = tempConfig('http://127.0.0.1:9/v1');
    dataDir = join(config.dir, 'data');
    pristine = readFileSync(makeDatabase(dataDir));
  });
  after(() => config.cleanup());

  const damage = {
    truncated: (path: string) => truncateSync(path, Math.floor(pristine.length / 2)),
    'garbage over a page in the middle': (path: string) => {
      const pageSize = pristine.readUInt16BE(16);
      const middle = Math.floor(pristine.length / pageSize / 2);
      const fd = openSync(path, 'r+');
      writeSync(fd, Buffer.alloc(512, 0xde), 0, 512, middle * pageSize);
      closeSync(fd);
    },
    'not a database': (path: string) => writeFileSync(path, 'these are my notes, not a database; someone copied them over the file by mistake.\n'.repeat(4)),
  };
  const expected: Record<keyof typeof damage, RegExp> = {
    truncated: /is damaged: it is \d+ bytes long, but its header says it holds \d+ pages .* \(TRUNCATED\)/,
    'garbage over a page in the middle': /is damaged: PRAGMA quick_check .* \(SQLITE_CORRUPT\)/,
    'not a database': /is damaged: it is not a SQLite database .* \(SQLITE_NOTADB\)/,
  };

  for (const [name, spoil] of Object.entries(damage) as Array<[keyof typeof damage, (path: string) => void]>) {
    it(name, async () => {
      const path = join(dataDir, 'switchboard.db');
      writeFileSync(path, pristine);
      spoil(path);
      const start = await runCli(['start', '--config', config.file], { env });
      assert.equal(start.code, 65, start.stderr);
      assert.match(start.stderr, new RegExp(`The database ${path.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} is damaged`));
      assert.match(start.stderr, expected[name]);
      assert.match(start.stderr, /switchboard backup/);
      assert.match(start.stderr, /"Backup and restore"/);
      assert.match(start.stderr, /Nothing was started/);
      assert.doesNotMatch(start.stderr, /^\s+at /m, 'no stack trace');
      assert.equal(start.stdout, '', 'nothing was logged: the daemon did not start');
      // The operator commands that open the database say the same (they check the header only:
      // they run beside the daemon and must not read a big file each time).
      if (name !== 'garbage over a page in the middle') {
        const memory = await runCli(['memory', 'list', '--config', config.file], { env });
        assert.equal(memory.code, 65, memory.stderr);
        assert.match(memory.stderr, expected[name]);
      }
      // A backup of it is refused: it would not restore.
      const backup = await runCli(['backup', join(config.dir, 'copy.db'), '--config', config.file], { env });
      assert.equal(backup.code, 65, backup.stderr);
      assert.match(backup.stderr, /nothing was written/);
      assert.throws(() => statSync(join(config.dir, 'copy.db')), /ENOENT/);
    });
  }
});
