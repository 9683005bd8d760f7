/**
 * Fault injection: the data_dir's disk fills up under a running daemon (a 2 MB tmpfs and a
 * filler file). Messages posted meanwhile are refused with 503 + Retry-After and not stored,
 * /readyz says why, the log says so once; a reply whose turn was running when the disk filled
 * waits in memory. Once the filler is deleted the daemon carries on by itself: the refused
 * messages, sent again, are answered exactly once, the waiting reply goes out once, and the
 * daemon never crashed.
 */
import assert from 'node:assert/strict';
import { rmSync, writeFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { sign } from '../channels/webhook/signature.ts';
import { startFakeOpenAI, type FakeOpenAI } from './fixtures/fake-openai.ts';
import { startDaemon, type Daemon } from './support/cli.ts';
import { startCallbackReceiver, type CallbackReceiver } from './support/callbacks.ts';
import { freePort } from './support/net.ts';
import { mountTmpfs, type Tmpfs } from './support/tmpfs.ts';
import { quiet, until } from './support/wait.ts';

const secret = 'disk-full-secret';
const env = { TEST_MODEL_KEY: 'k', WEBHOOK_SECRET: secret };
const mounted = mountTmpfs('2m');
const skip = 'skip' in mounted ? mounted.skip : false;

describe('disk full under a running daemon (tmpfs data_dir)', { skip }, () => {
  const disk = mounted as Tmpfs;
  let model: FakeOpenAI;
  let daemon: Daemon;
  let base: string;
  let configDir: string;
  let receiver: CallbackReceiver;
  let callbacks: string[];
  let callbackUrl: string;

  async function post(key: string, text: string, extra: Record<string, string> = {}): Promise<{ status: number; retryAfter: string | null; json: Record<string, unknown> }> {
    const body = JSON.stringify({ sender: 'crm', conversation: 'disk', text, ...extra });
    const response = await fetch(`${base}/webhook`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': key, 'x-switchboard-signature': sign(secret, { key, body }) },
      body,
    });
    return { status: response.status, retryAfter: response.headers.get('retry-after'), json: (await response.json()) as Record<string, unknown> };
  }
  async function readyz(): Promise<{ status: number; json: Record<string, unknown> }> {
    const response = await fetch(`${base}/readyz`);
    return { status: response.status, json: (await response.json()) as Record<string, unknown> };
  }
  const asked = (text: string): number => model.requests.filter((request) => request.body.messages.at(-1)?.content === text).length;
  const errorLines = (): string[] => daemon.stdout().split('\n').filter((line) => line.includes('"level":50'));

  before(async () => {
    model = await startFakeOpenAI();
    receiver = await startCallbackReceiver();
    ({ bodies: callbacks, url: callbackUrl } = receiver);
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    configDir = mkdtempSync(join(tmpdir(), 'sb-diskfull-'));
    const file = join(configDir, 'switchboard.toml');
    writeFileSync(
      file,
      `data_dir = ${JSON.stringify(disk.dir)}\n[agent]\nname = "Testbot"\n[provider]\nkind = "openai"\nbase_url = "${model.baseUrl}"\nmodel = "test-model"\napi_key = "\${TEST_MODEL_KEY}"\n` +
        `[log]\nformat = "json"\n[memory]\nbackend = "none"\n[gateway]\nlisten = "127.0.0.1:${port}"\n[channels.webhook]\nsecret = "\${WEBHOOK_SECRET}"\nreply_timeout_seconds = 2\n`,
    );
    daemon = startDaemon(['start', '--config', file], { env });
    await daemon.waitFor(/"msg":"ready"/, 'stdout', 20_000);
  });
  after(async () => {
    if (daemon && daemon.child.exitCode === null) {
      daemon.child.kill('SIGTERM');
      await daemon.exited;
    }
    await receiver.close();
    await model?.close();
    disk.unmount();
    rmSync(configDir, { recursive: true, force: true });
  });

  it('answers before the disk fills', async () => {
    assert.deepEqual((await post('before-1', 'hello')).json, { id: 'before-1', reply: 'echo: hello' });
    assert.equal((await readyz()).status, 200);
  });

  it('refuses messages with 503 + Retry-After while full, says so in /readyz and once in the log, and recovers by itself', async () => {
    // A turn is running when the disk fills: its reply cannot be recorded until there is room.
    model.script({ text: 'the reply that waited', delayMs: 1500 });
    const inFlight = post('inflight-1', 'started before the disk filled', { callback_url: callbackUrl });
    await model.waitForRequests(2);
    const filler = disk.fill();
    // The running turn's reply is the first write that finds no room (a message that came in
    // first might still fit in what SQLite's WAL had already grown into: then it is stored and answered).
    await until(() => errorLines().length > 0, 'the disk-full error line', 10_000, () => daemon.stdout().slice(-3000));

    const refused = [];
    for (const n of [1, 2, 3, 4, 5]) refused.push(await post(`full-${n}`, `message ${n} while full`));
    for (const answer of refused) {
      assert.equal(answer.status, 503, `${JSON.stringify(answer)}\n${daemon.stdout().slice(-3000)}`);
      assert.ok(Number(answer.retryAfter) > 0, 'a Retry-After tells the sender when to try again');
      assert.match(String(answer.json.error), /disk .* is full/);
    }
    const ready = await readyz();
    assert.equal(ready.status, 503);
    assert.equal((ready.json.storage as { writable: boolean; code: string }).writable, false);
    assert.match((ready.json.storage as { code: string }).code, /^(SQLITE_FULL|ENOSPC)$/);
    // The 2 s reply timeout passes: the caller was told 202, the reply will go to the callback.
    assert.equal((await inFlight).status, 202);
    await quiet(1500);
    assert.deepEqual(callbacks, [], 'the in-flight reply could not be recorded, so it was not sent');

    const full = errorLines();
    assert.equal(full.length, 1, `one error line, not one per message:\n${full.join('\n')}`);
    assert.match(full[0]!, new RegExp(`${disk.dir}.*(SQLITE_FULL|ENOSPC).*Fix: free space`));
    assert.equal(daemon.child.exitCode, null, 'the daemon is still running');

    rmSync(filler);
    const deadline = Date.now() + 20_000;
    while ((await readyz()).status !== 200) {
      assert.ok(Date.now() < deadline, `ready again within 20 s\n${daemon.stdout().slice(-3000)}`);
      await quiet(200);
    }
    await daemon.waitFor(/"msg":"the data_dir takes writes again: accepting messages"/, 'stdout');
    await until(() => callbacks.length >= 1, 'the reply that waited, at the callback', 15_000);

    for (const n of [1, 2, 3, 4, 5]) assert.deepEqual((await post(`full-${n}`, `message ${n} while full`)).json, { id: `full-${n}`, reply: `echo: message ${n} while full` });
    await quiet(1000);
    assert.deepEqual(
      callbacks.map((body) => (JSON.parse(body) as { reply: string }).reply),
      ['the reply that waited'],
      'the reply that waited went out once',
    );
    assert.equal(asked('started before the disk filled'), 1, 'the model was asked once for the in-flight message');
    for (const n of [1, 2, 3, 4, 5]) assert.equal(asked(`message ${n} while full`), 1, `message ${n} went to the model exactly once`);
    assert.equal(daemon.child.exitCode, null, 'the daemon never crashed');

    // Nothing lost, nothing doubled: every message once in the inbox, answered; every reply sent once.
    daemon.child.kill('SIGTERM');
    assert.equal((await daemon.exited).code, 0);
    const db = new Database(join(disk.dir, 'switchboard.db'), { readonly: true });
    try {
      const inbox = db.prepare<[], { platform_id: string; status: string }>('SELECT platform_id, status FROM inbox ORDER BY seq').all();
      assert.deepEqual(
        inbox.map((row) => `${row.platform_id}:${row.status}`),
        ['before-1:done', 'inflight-1:done', 'full-1:done', 'full-2:done', 'full-3:done', 'full-4:done', 'full-5:done'],
      );
      const outbox = db.prepare<[], { n: number; sent: number }>("SELECT count(*) AS n, sum(status = 'sent') AS sent FROM outbox").get()!;
      assert.deepEqual(outbox, { n: 7, sent: 7 });
    } finally {
      db.close();
    }
  });
});
