/**
 * `switchboard doctor` with `[store] kind = "postgres"` checks that PostgreSQL — never the
 * SQLite file in data_dir — against a real server (test/support/postgres.ts): down, fresh,
 * migrated with a node holding a channel, and with synchronous_commit off.
 */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { startFakeOpenAI, type FakeOpenAI } from '../test/fixtures/fake-openai.ts';
import { testLogger } from '../test/support/log.ts';
import { freePort } from '../test/support/net.ts';
import { startPostgres, type TestPostgres } from '../test/support/postgres.ts';
import { startLeases } from '../src/cluster/leases.ts';
import { NodeRegistry, NODE_REPORT_MS } from '../src/cluster/nodes.ts';
import { openPostgres } from '../src/store/postgres/sql.ts';
import { postgresMigrations } from '../src/store/postgres/schema.ts';
import { runDoctor, type CheckResult } from './doctor.ts';

describe('doctor on a PostgreSQL store', () => {
  let server: TestPostgres;
  let model: FakeOpenAI;
  let dir: string;
  let n = 0;

  before(async () => {
    server = await startPostgres();
    model = await startFakeOpenAI();
    dir = mkdtempSync(join(tmpdir(), 'doctor-store-'));
  });
  after(async () => {
    await model.close();
    server.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  /** Runs doctor on a cluster config whose data_dir holds a whole (stale) SQLite database. */
  async function doctor(url: string, json = true): Promise<{ code: number; out: string; results: CheckResult[] }> {
    const home = join(dir, `case${++n}`);
    const data = join(home, 'data');
    mkdirSync(data, { recursive: true, mode: 0o700 });
    new Database(join(data, 'switchboard.db')).close();
    const file = join(home, 'switchboard.toml');
    writeFileSync(
      file,
      `data_dir = ${JSON.stringify(data)}\n[provider]\nkind = "openai"\nbase_url = "${model.baseUrl}"\nmodel = "scripted"\napi_key = "k"\n` +
        `[store]\nkind = "postgres"\nurl = "${url}"\n[gateway]\nlisten = "127.0.0.1:${await freePort()}"\n[channels.webhook]\nsecret = "s3cret-webhook"\n`,
    );
    let out = '';
    const code = await runDoctor(json ? ['--json'] : [], {
      stdout: new Writable({ write: (chunk: Buffer, _encoding, done) => ((out += chunk.toString('utf8')), done()) }),
      stderr: new Writable({ write: (_chunk, _encoding, done) => done() }),
      env: {},
      configFlag: file,
      home,
      timeoutMs: 3000,
      unitPaths: [join(home, 'none.service')],
    });
    return { code, out, results: json ? (JSON.parse(out) as CheckResult[]) : [] };
  }
  const byName = (results: readonly CheckResult[], name: string): CheckResult => {
    const found = results.find((result) => result.check === name);
    assert.ok(found, `no "${name}" check in ${JSON.stringify(results.map((result) => result.check))}`);
    return found;
  };

  it('server down: the store check fails naming the server (not its password), and the SQLite file is not checked', async () => {
    const port = await freePort();
    const url = `postgres://switchboard:pw-hidden@127.0.0.1:${port}/switchboard`;
    const text = await doctor(url, false);
    assert.equal(text.code, 1, text.out);
    assert.doesNotMatch(text.out, /All checks passed/);
    assert.doesNotMatch(text.out, /pw-hidden/);
    assert.match(text.out, new RegExp(`✗ store — cannot use the PostgreSQL database postgres://switchboard@127\\.0\\.0\\.1:${port}/switchboard: connection refused: nothing listens on 127\\.0\\.0\\.1:${port} \\(ECONNREFUSED\\); fix: start PostgreSQL`));
    const { results } = await doctor(url);
    assert.equal(results.some((result) => result.check === 'database'), false, 'the SQLite file in data_dir is not the store');
  });

  it('a fresh database: reached, no tables yet (a warning), durable; no node, no lease', async () => {
    const url = await server.createDatabase();
    const { code, results } = await doctor(url);
    assert.equal(code, 0, JSON.stringify(results, null, 2));
    assert.match(byName(results, 'store').detail, /^PostgreSQL 15\.\d+ at postgres:\/\/postgres@127\.0\.0\.1:\d+\/\w+ answers \(as postgres\)/);
    const schema = byName(results, 'store schema');
    assert.equal(schema.warning, true);
    assert.match(schema.detail, /has no Switchboard tables yet/);
    assert.match(byName(results, 'store durability').detail, /^synchronous_commit = on/);
    assert.match(byName(results, 'cluster nodes').detail, /no node is running \(none has ever joined\)/);
    assert.match(byName(results, 'cluster leases').detail, /none held \(no node running\): webhook/);
  });

  it('migrated, a node reporting and holding the webhook lease: who holds which channel; synchronous_commit off is said and why', async () => {
    const url = await server.createDatabase();
    const database = await openPostgres({ url, log: testLogger() });
    const registry = new NodeRegistry(database, NODE_REPORT_MS);
    const leases = await startLeases(['webhook'], { url, log: testLogger(), retryMs: 200, keepaliveSeconds: 15 }, { onAcquired: async () => undefined, onLost: async () => undefined });
    try {
      for (let waited = 0; !leases.held().has('webhook'); waited += 50) {
        assert.ok(waited < 10_000, 'the lease was taken');
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      await registry.report({ node: 'n1', version: '9.9.9', startedAt: Date.now(), channels: ['webhook'], inFlight: 2, turns: 5 });
      await registry.report({ node: 'old', version: '9.9.8', startedAt: 0, channels: ['webhook'], inFlight: 0, turns: 1 }, Date.now() - 60_000);
      let { code, results } = await doctor(url);
      assert.equal(code, 0, JSON.stringify(results, null, 2));
      assert.match(byName(results, 'store schema').detail, new RegExp(`^schema version ${postgresMigrations.length} of ${postgresMigrations.length}: every migration applied`));
      assert.match(byName(results, 'cluster nodes').detail, /^1 running: n1 \(v9\.9\.9, channels: webhook, 2 in flight\); gone: old \(last seen 60 s ago\)$/);
      assert.match(byName(results, 'cluster leases').detail, /^held: webhook → n1 \(backend pid \d+, from 127\.0\.0\.1\)$/);

      await database.run(`ALTER DATABASE "${new URL(url).pathname.slice(1)}" SET synchronous_commit = off`);
      ({ code, results } = await doctor(url));
      assert.equal(code, 0);
      const durability = byName(results, 'store durability');
      assert.equal(durability.warning, true);
      assert.match(durability.detail, /synchronous_commit = off: .* a crash of the database server can lose messages Switchboard already confirmed/);
      assert.match(durability.fix!, /ALTER DATABASE "\w+" SET synchronous_commit = on/);

      await leases.stop();
      ({ results } = await doctor(url));
      const free = byName(results, 'cluster leases');
      assert.equal(free.warning, true, 'a running node holds no lease of a configured channel');
      assert.match(free.detail, /not held by any node: webhook/);
    } finally {
      await leases.stop();
      await database.close();
    }
  });
});
