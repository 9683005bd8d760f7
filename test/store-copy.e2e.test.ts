/**
 * Moving a running install to a cluster, as docs/cluster.md says: conversations on the SQLite store,
 * `switchboard store copy --to postgres://…` (refused while the daemon runs), `[store]` switched
 * to PostgreSQL, and the node started there carries the conversation on.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { after, before, describe, it } from 'node:test';
import { sign } from '../channels/webhook/signature.ts';
import { startFakeOpenAI, type FakeOpenAI } from './fixtures/fake-openai.ts';
import { runCli, startDaemon, tempConfig, type Daemon } from './support/cli.ts';
import { freePort } from './support/net.ts';
import { startPostgres, type TestPostgres } from './support/postgres.ts';
import { postgresBin } from './support/servers.ts';

const secret = 'copy-secret';
const env = { TEST_MODEL_KEY: 'k', WEBHOOK_SECRET: secret };

describe('switchboard store copy: SQLite to a cluster', () => {
  let model: FakeOpenAI;
  let server: TestPostgres;
  const daemons: Daemon[] = [];
  const cleanups: Array<() => void> = [];

  before(async () => {
    server = await startPostgres();
    model = await startFakeOpenAI();
  });
  after(async () => {
    for (const daemon of daemons) {
      if (daemon.child.exitCode === null && daemon.child.signalCode === null) {
        daemon.child.kill('SIGTERM');
        await daemon.exited;
      }
    }
    for (const cleanup of cleanups) cleanup();
    await model.close();
    server.stop();
  });

  async function post(base: string, key: string, conversation: string, text: string): Promise<{ status: number; json: Record<string, unknown> }> {
    const body = JSON.stringify({ sender: 'crm', conversation, text });
    const response = await fetch(`${base}/webhook`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': key, 'x-switchboard-signature': sign(secret, { key, body }) },
      body,
    });
    return { status: response.status, json: (await response.json()) as Record<string, unknown> };
  }
  async function stop(daemon: Daemon): Promise<void> {
    daemon.child.kill('SIGTERM');
    assert.equal((await daemon.exited).code, 0);
  }

  it('refused while the daemon runs; then copies, and the node on PostgreSQL remembers the conversation', async () => {
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    const channels = `[log]\nformat = "json"\n[memory]\nbackend = "none"\n[gateway]\nlisten = "127.0.0.1:${port}"\n[channels.webhook]\nsecret = "\${WEBHOOK_SECRET}"\nreply_timeout_seconds = 10\n`;
    const config = tempConfig(model.baseUrl, channels);
    cleanups.push(config.cleanup);
    const start = async (): Promise<Daemon> => {
      const daemon = startDaemon(['start', '--config', config.file], { env });
      daemons.push(daemon);
      await daemon.waitFor(/"msg":"ready"/, 'stdout', 30_000);
      return daemon;
    };
    const sqliteNode = await start();
    for (let n = 0; n < 3; n++) assert.equal((await post(base, `early-${n}`, 'ticket-1', `early message ${n}`)).status, 200);
    const pairing = await runCli(['pairing', 'list', '--config', config.file], { env });
    assert.equal(pairing.code, 0, pairing.stderr);

    // The setup in docs/cluster.md ("A cluster on PostgreSQL"): a role with no other right than to log in, owning its database.
    await server.createRole('switchboard', 'sb-secret-1');
    execFileSync(`${postgresBin}/createdb`, ['-h', '127.0.0.1', '-p', String(server.port), '-U', 'postgres', '--owner=switchboard', 'sbmove']);
    const url = `postgres://switchboard:sb-secret-1@127.0.0.1:${server.port}/sbmove`;
    const busy = await runCli(['store', 'copy', '--to', url, '--config', config.file], { env });
    assert.equal(busy.code, 1, busy.stderr);
    assert.match(busy.stderr, /a Switchboard daemon \(or chat\) is running on the source .*switchboard\.db; nothing was copied\. Stop it first/);

    await stop(sqliteNode);
    // A message accepted but not answered when the daemon stopped (as a stop mid-turn leaves one).
    const lite = new Database(join(config.dir, 'data', 'switchboard.db'));
    lite.prepare("INSERT INTO inbox (channel, platform_id, conversation, payload, status, received_at) SELECT channel, 'left-1', conversation, replace(payload, 'early message 0', 'left unanswered'), 'queued', received_at + 1 FROM inbox ORDER BY seq LIMIT 1").run();
    lite.close();
    const copy = await runCli(['store', 'copy', '--to', url, '--config', config.file], { env, timeoutMs: 60_000 });
    assert.equal(copy.code, 0, copy.stderr);
    assert.match(copy.stdout, /^Copying .*switchboard\.db → postgres:\/\/switchboard@127\.0\.0\.1:\d+\/sbmove\n/);
    assert.doesNotMatch(`${copy.stdout}${copy.stderr}`, /sb-secret-1/);
    assert.match(copy.stdout, /^ {2}inbox +4 → 4 +ok$/m);
    assert.match(copy.stdout, /^1 message accepted but not yet answered went to the cluster's turn queue: the first node to start answers it\.$/m);
    assert.match(copy.stdout, /^ {2}history +\d+ → \d+ +ok$/m);
    assert.match(copy.stdout, /^Copied: \d+ rows in 11 tables, every count matches \([\d.]+ s\)\.\n1 message .*\nNext: set \[store\] kind = "postgres" and url = /m);

    // Run again: the target is no longer empty.
    const again = await runCli(['store', 'copy', '--to', url, '--config', config.file], { env, timeoutMs: 60_000 });
    assert.equal(again.code, 73, again.stderr);
    assert.match(again.stderr, /already holds rows \(inbox 4, outbox 3, history \d+.*\); nothing was copied\. .*pass --force/);

    // The cluster node: same config, the store switched to PostgreSQL.
    writeFileSync(config.file, `data_dir = "./data"\n[agent]\nname = "Testbot"\n[provider]\nkind = "openai"\nbase_url = "${model.baseUrl}"\nmodel = "test-model"\napi_key = "\${TEST_MODEL_KEY}"\n[store]\nkind = "postgres"\nurl = "${url}"\n[cluster]\nnode = "n1"\nfailover_seconds = 3\n${channels}`);
    const clusterNode = await start();
    for (let waited = 0; !model.requests.some((request) => request.body.messages.at(-1)?.content === 'left unanswered'); waited += 100) {
      assert.ok(waited < 20_000, 'the message left unanswered is answered by the node');
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const before = model.requests.length;
    // the channel starts once this node holds its lease
    let answer = await post(base, 'after-copy', 'ticket-1', 'do you remember?');
    for (let tries = 0; answer.status !== 200 && tries < 50; tries++) {
      await new Promise((resolve) => setTimeout(resolve, 200));
      answer = await post(base, 'after-copy', 'ticket-1', 'do you remember?');
    }
    assert.deepEqual(answer, { status: 200, json: { id: 'after-copy', reply: 'echo: do you remember?' } });
    const asked = model.requests.slice(before).filter((request) => request.body.messages.at(-1)?.content === 'do you remember?');
    assert.equal(asked.length, 1);
    const messages = asked[0]!.body.messages.map((m) => `${m.role}: ${m.content ?? ''}`);
    for (let n = 0; n < 3; n++) assert.ok(messages.includes(`user: early message ${n}`), `the history has early message ${n}:\n${messages.join('\n')}`);

    // A node running on the PostgreSQL source: refused too.
    const fromCluster = await runCli(['store', 'copy', '--from', url, '--to', `${config.dir}/back.db`, '--config', config.file], { env, timeoutMs: 60_000 });
    assert.equal(fromCluster.code, 1, fromCluster.stderr);
    assert.match(fromCluster.stderr, /node n1 is running on the source postgres:\/\/switchboard@127\.0\.0\.1:\d+\/sbmove; nothing was copied\. Stop it first/);
    await stop(clusterNode);
  });

  it('the grants docs/cluster.md shows for a database the role does not own are enough for a node (migrations, pg-boss, leases)', async () => {
    await server.createRole('sb_granted', 'sb-secret-2');
    execFileSync(`${postgresBin}/createdb`, ['-h', '127.0.0.1', '-p', String(server.port), '-U', 'postgres', 'sbgranted']);
    const page = readFileSync(new URL('../docs/cluster.md', import.meta.url), 'utf8');
    const grants = /```sql\n(-- a database the role does not own[\s\S]*?)```/.exec(page)?.[1];
    assert.ok(grants, 'docs/cluster.md shows the GRANT lines');
    execFileSync('/usr/bin/psql', ['-v', 'ON_ERROR_STOP=1', '-q', '-h', '127.0.0.1', '-p', String(server.port), '-U', 'postgres', '-d', 'sbgranted', '-c', grants.replaceAll('DATABASE switchboard', 'DATABASE sbgranted').replaceAll('TO switchboard', 'TO sb_granted')]);
    const port = await freePort();
    const config = tempConfig(model.baseUrl, `[log]\nformat = "json"\n[memory]\nbackend = "none"\n[gateway]\nlisten = "127.0.0.1:${port}"\n[channels.webhook]\nsecret = "\${WEBHOOK_SECRET}"\n[store]\nkind = "postgres"\nurl = "postgres://sb_granted:sb-secret-2@127.0.0.1:${server.port}/sbgranted"\n[cluster]\nnode = "g1"\n`);
    cleanups.push(config.cleanup);
    const daemon = startDaemon(['start', '--config', config.file], { env });
    daemons.push(daemon);
    await daemon.waitFor(/"msg":"ready"/, 'stdout', 30_000);
    let answer = await post(`http://127.0.0.1:${port}`, 'granted-1', 'ticket-9', 'hello');
    for (let tries = 0; answer.status !== 200 && tries < 50; tries++) {
      await new Promise((resolve) => setTimeout(resolve, 200));
      answer = await post(`http://127.0.0.1:${port}`, 'granted-1', 'ticket-9', 'hello');
    }
    assert.deepEqual(answer, { status: 200, json: { id: 'granted-1', reply: 'echo: hello' } });
    await stop(daemon);
  });
});
