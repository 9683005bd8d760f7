/**
 * The storage contract (test/contracts/storage.ts) on both engines: SQLite in memory, and a
 * real PostgreSQL 15 started for this file (a fresh database per test). Plus what is
 * PostgreSQL's own: migrations that several nodes run at the same moment, and a schema from
 * the future refused.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import pino from 'pino';
import { openDatabase } from './db.ts';
import { sqliteDatabase } from './sqlite-sql.ts';
import { openPostgres, redactUrl } from './postgres/sql.ts';
import { postgresMigrations } from './postgres/schema.ts';
import { storageContract } from '../../test/contracts/storage.ts';
import { startPostgres, type TestPostgres } from '../../test/support/postgres.ts';
import { testLogger } from '../../test/support/log.ts';

storageContract(
  'SQLite',
  async () => sqliteDatabase(openDatabase(':memory:')),
  async () => {
    // two connections to one file, as a daemon and its successor have
    const dir = mkdtempSync(join(tmpdir(), 'sb-state-'));
    after(() => rmSync(dir, { recursive: true, force: true }));
    const path = join(dir, 'switchboard.db');
    return [sqliteDatabase(openDatabase(path)), sqliteDatabase(openDatabase(path))] as const;
  },
);

let server: TestPostgres;
before(async () => {
  server = await startPostgres();
});
after(() => server?.stop());

storageContract(
  'PostgreSQL',
  async () => openPostgres({ url: await server.createDatabase(), log: testLogger() }),
  async () => {
    const url = await server.createDatabase();
    return Promise.all([openPostgres({ url, log: testLogger() }), openPostgres({ url, log: testLogger() })]);
  },
);

describe('PostgreSQL schema', () => {
  it('is migrated once when several nodes start at the same moment', async () => {
    const url = await server.createDatabase();
    const nodes = await Promise.all(Array.from({ length: 4 }, () => openPostgres({ url, log: testLogger() })));
    try {
      const applied = await nodes[0]!.all<{ version: number }>('SELECT version FROM switchboard_migrations ORDER BY version');
      assert.deepEqual(
        applied.map((row) => row.version),
        postgresMigrations.map((_, index) => index + 1),
      );
    } finally {
      await Promise.all(nodes.map((node) => node.close()));
    }
  });

  it('refuses a schema from a newer Switchboard, naming the fix, and never shows the password', async () => {
    const url = await server.createDatabase();
    const first = await openPostgres({ url, log: testLogger() });
    await first.run('INSERT INTO switchboard_migrations (version, applied_at) VALUES (?, ?)', [999, 0]);
    await first.close();
    const withPassword = url.replace('postgres@', 'postgres:s3cret@');
    await assert.rejects(openPostgres({ url: withPassword, log: testLogger() }), (error: Error) => {
      assert.match(error.message, /schema version 999 is newer than this Switchboard knows .*upgrade every node/);
      assert.doesNotMatch(error.message, /s3cret/);
      return true;
    });
    assert.equal(redactUrl('postgres://u:pw@h:5/db'), 'postgres://u@h:5/db');
  });

  it('warns once at start when the server acknowledges commits it could lose (synchronous_commit = off)', async () => {
    const url = await server.createDatabase();
    const lines: string[] = [];
    const log = pino({ level: 'warn' }, { write: (line: string) => void lines.push(line) });
    await (await openPostgres({ url, log })).close();
    assert.deepEqual(lines, [], 'the default (on) is not warned of');
    const admin = await openPostgres({ url, log: testLogger() });
    await admin.run(`ALTER DATABASE "${new URL(url).pathname.slice(1)}" SET synchronous_commit = off`);
    await admin.close();
    await (await openPostgres({ url, log })).close();
    assert.equal(lines.length, 1);
    assert.match(lines[0]!, /synchronous_commit = off: a crash of the database server can lose messages already confirmed/);
  });

  it('says which server it cannot reach', async () => {
    await assert.rejects(openPostgres({ url: 'postgres://x:pw@127.0.0.1:1/none', log: testLogger() }), /cannot use the PostgreSQL database postgres:\/\/x@127\.0\.0\.1:1\/none \(\[store\] url\): connection refused: nothing listens on 127\.0\.0\.1:1 \(ECONNREFUSED\)\. Fix: start PostgreSQL/);
  });
});
