/**
 * `switchboard backup` of a live daemon's database while messages keep arriving, then the
 * README's restore into a fresh data_dir: the restored daemon starts and carries the history on.
 */
import assert from 'node:assert/strict';
import { copyFileSync, existsSync, mkdirSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { sign } from '../channels/webhook/signature.ts';
import { startFakeOpenAI, type FakeOpenAI } from './fixtures/fake-openai.ts';
import { runCli, startDaemon, tempConfig, type Daemon } from './support/cli.ts';
import { freePort } from './support/net.ts';
import { startPostgres } from './support/postgres.ts';
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';

const secret = 'backup-secret';
const env = { TEST_MODEL_KEY: 'k', WEBHOOK_SECRET: secret };

describe('switchboard backup of a running daemon, and a restore', () => {
  let model: FakeOpenAI;
  const configs: Array<ReturnType<typeof tempConfig>> = [];
  const daemons: Daemon[] = [];

  async function daemonOn(): Promise<{ config: ReturnType<typeof tempConfig>; base: string; start: () => Promise<Daemon> }> {
    const port = await freePort();
    const config = tempConfig(model.baseUrl, `[log]\nformat = "json"\n[memory]\nbackend = "none"\n[gateway]\nlisten = "127.0.0.1:${port}"\n[channels.webhook]\nsecret = "\${WEBHOOK_SECRET}"\nreply_timeout_seconds = 10\n`);
    configs.push(config);
    const start = async (): Promise<Daemon> => {
      const daemon = startDaemon(['start', '--config', config.file], { env });
      daemons.push(daemon);
      await daemon.waitFor(/"msg":"ready"/, 'stdout', 20_000);
      return daemon;
    };
    return { config, base: `http://127.0.0.1:${port}`, start };
  }
  async function post(base: string, key: string, conversation: string, text: string): Promise<{ status: number; json: Record<string, unknown> }> {
    const body = JSON.stringify({ sender: 'crm', conversation, text });
    const response = await fetch(`${base}/webhook`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': key, 'x-switchboard-signature': sign(secret, { key, body }) },
      body,
    });
    return { status: response.status, json: (await response.json()) as Record<string, unknown> };
  }

  before(async () => {
    model = await startFakeOpenAI();
  });
  after(async () => {
    for (const daemon of daemons) {
      if (daemon.child.exitCode === null && daemon.child.signalCode === null) {
        daemon.child.kill('SIGTERM');
        await daemon.exited;
      }
    }
    for (const config of configs) config.cleanup();
    await model.close();
  });

  it('copies the live database during traffic; the copy restored into a fresh data_dir starts with the history', async () => {
    const live = await daemonOn();
    const daemon = await live.start();
    for (let n = 0; n < 5; n++) assert.equal((await post(live.base, `early-${n}`, 'ticket-1', `early message ${n}`)).status, 200);

    // Traffic on another conversation while the backups run.
    let traffic = true;
    let sent = 0;
    const load = (async () => {
      while (traffic) {
        const answer = await post(live.base, `load-${sent}`, 'ticket-load', `load ${sent}`);
        assert.equal(answer.status, 200);
        sent++;
      }
    })();
    while (sent < 3) await new Promise((resolve) => setTimeout(resolve, 20));
    const file = join(live.config.dir, 'backups', 'switchboard-backup.db');
    mkdirSync(join(live.config.dir, 'backups'));
    const backup = await runCli(['backup', file, '--config', live.config.file], { env });
    assert.equal(backup.code, 0, backup.stderr);
    assert.match(backup.stdout, /^Backed up .*switchboard\.db to .*switchboard-backup\.db: [\d.]+ (KiB|MiB) in [\d.]+ s\n$/);
    assert.equal(statSync(file).mode & 0o777, 0o600, 'the copy is private like the database');
    assert.deepEqual(readdirSync(join(live.config.dir, 'backups')), ['switchboard-backup.db'], 'no temp file or -wal/-journal left beside it');

    // An existing FILE is kept unless --force.
    const again = await runCli(['backup', file, '--config', live.config.file], { env });
    assert.equal(again.code, 73);
    assert.match(again.stderr, /exists; nothing was written.*--force/);
    const forced = await runCli(['backup', file, '--force', '--config', live.config.file], { env });
    assert.equal(forced.code, 0, forced.stderr);
    traffic = false;
    await load;
    assert.equal(daemon.child.exitCode, null, 'the daemon ran on through the backups');

    // The copy is a whole database with the early conversation in it.
    const copy = new Database(file, { readonly: true });
    try {
      assert.equal(copy.pragma('quick_check', { simple: true }), 'ok');
      assert.equal(copy.pragma('journal_mode', { simple: true }), 'delete', 'self-contained: no -wal needed');
      const early = copy.prepare<[], { n: number }>("SELECT count(*) AS n FROM inbox WHERE platform_id LIKE 'early-%' AND status = 'done'").get()!;
      assert.equal(early.n, 5);
    } finally {
      copy.close();
    }

    // Restore, as the README says: a fresh data_dir, the copy as switchboard.db, no -wal/-shm.
    const restored = await daemonOn();
    const dataDir = join(restored.config.dir, 'data');
    mkdirSync(dataDir, { mode: 0o700 });
    copyFileSync(file, join(dataDir, 'switchboard.db'));
    assert.ok(!existsSync(join(dataDir, 'switchboard.db-wal')));
    await restored.start();
    const before = model.requests.length;
    const answer = await post(restored.base, 'after-restore', 'ticket-1', 'do you remember?');
    assert.deepEqual(answer, { status: 200, json: { id: 'after-restore', reply: 'echo: do you remember?' } });
    // (A load message the copy holds as accepted-but-unanswered runs again there: see the README.)
    const asked = model.requests.slice(before).filter((request) => request.body.messages.at(-1)?.content === 'do you remember?');
    assert.equal(asked.length, 1);
    const messages = asked[0]!.body.messages.map((m) => `${m.role}: ${m.content ?? ''}`);
    for (let n = 0; n < 5; n++) assert.ok(messages.includes(`user: early message ${n}`), `the history has early message ${n}:\n${messages.join('\n')}`);
  });
  it('says what is wrong, writing nothing: no database yet (66), no such directory (73), no FILE (2)', async () => {
    const config = tempConfig(model.baseUrl);
    configs.push(config);
    const none = await runCli(['backup', join(config.dir, 'copy.db'), '--config', config.file], { env });
    assert.equal(none.code, 66, none.stderr);
    assert.match(none.stderr, /there is no database at .*switchboard\.db yet/);
    mkdirSync(join(config.dir, 'data'));
    copyFileSync(join(configs[0]!.dir, 'backups', 'switchboard-backup.db'), join(config.dir, 'data', 'switchboard.db'));
    const nowhere = await runCli(['backup', join(config.dir, 'missing', 'copy.db'), '--config', config.file], { env });
    assert.equal(nowhere.code, 73, nowhere.stderr);
    assert.match(nowhere.stderr, /the directory .*missing does not exist; nothing was written/);
    const usage = await runCli(['backup', '--config', config.file], { env });
    assert.equal(usage.code, 2);
    assert.match(usage.stderr, /missing FILE/);
    assert.deepEqual(readdirSync(config.dir).sort(), ['data', 'switchboard.toml']);
  });
});

describe('switchboard backup with [store] kind = "postgres"', () => {
  it('never copies the SQLite file in data_dir: prints the pg_dump line (which works as printed) and exits 69, server up or down', async () => {
    const server = await startPostgres();
    const config = tempConfig('http://127.0.0.1:9/v1', '');
    try {
      // A whole, stale SQLite database in data_dir: the file a wrong backup would copy.
      mkdirSync(join(config.dir, 'data'), { mode: 0o700 });
      new Database(join(config.dir, 'data', 'switchboard.db')).close();
      const password = "pa ss'wd";
      await server.createRole('sb_backup', password);
      const url = await server.createDatabase();
      const database = new URL(url).pathname.slice(1);
      execFileSync('/usr/bin/psql', ['-q', '-d', url, '-c', `ALTER DATABASE "${database}" OWNER TO sb_backup; CREATE TABLE kept (n int); INSERT INTO kept VALUES (42); ALTER TABLE kept OWNER TO sb_backup`]);
      const down = `postgres://sb_backup:${encodeURIComponent(password)}@127.0.0.1:${await freePort()}/${database}`;
      const up = `postgres://sb_backup:${encodeURIComponent(password)}@127.0.0.1:${server.port}/${database}`;
      const file = join(config.dir, 'pg backup.dump');
      for (const storeUrl of [down, up]) {
        writeFileSync(config.file, `data_dir = "./data"\n[provider]\nkind = "openai"\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "m"\napi_key = "k"\n[store]\nkind = "postgres"\nurl = "${storeUrl}"\n`);
        const result = await runCli(['backup', file, '--config', config.file], { env });
        assert.equal(result.code, 69, result.stderr);
        assert.equal(result.stdout, '');
        assert.ok(!existsSync(file), 'nothing was written');
        assert.doesNotMatch(result.stderr, /pa ss|pa%20ss/, 'the password is not printed');
        assert.match(result.stderr, /the store is PostgreSQL \(\[store\] kind = "postgres"\), which this command does not copy; nothing was written/);
        assert.match(result.stderr, /It asks for the password in \[store\] url \(or set PGPASSWORD/);
        assert.ok(result.stderr.includes(`  pg_dump --format=custom --file='${file}' ${storeUrl.replace(/:[^:@]*@/, '@')}\n`), result.stderr);
      }
      // The printed lines, run as printed (with the password in PGPASSWORD), back the database up and restore it.
      const printed = (await runCli(['backup', file, '--config', config.file], { env })).stderr.split('\n');
      const dump = printed.find((line) => line.startsWith('  pg_dump '))!.trim();
      execFileSync('/bin/sh', ['-c', dump], { env: { ...process.env, PGPASSWORD: password } });
      assert.ok(statSync(file).size > 0);
      execFileSync('/usr/bin/psql', ['-q', '-d', url, '-c', 'DELETE FROM kept']);
      const restore = printed.find((line) => line.startsWith('  pg_restore '))!.trim();
      execFileSync('/bin/sh', ['-c', restore], { env: { ...process.env, PGPASSWORD: password } });
      assert.equal(execFileSync('/usr/bin/psql', ['-At', '-d', url, '-c', 'SELECT n FROM kept'], { encoding: 'utf8' }).trim(), '42');
      assert.deepEqual(readdirSync(join(config.dir, 'data')), ['switchboard.db'], 'the SQLite file was not copied anywhere');
    } finally {
      config.cleanup();
      server.stop();
    }
  });
});
