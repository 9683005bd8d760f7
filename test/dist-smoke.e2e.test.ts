/**
 * The daemon as users run it: `bin/switchboard` (the launcher, on the Node it picks) starting
 * the built `dist/`, not `app/cli.ts` from source. Paths that differ between the two (the
 * recall worker's `recall-worker.js`, JSON read relative to the module, the launcher itself)
 * are only covered here. One webhook message is answered and auto-saved to memory, a second
 * one recalls it through the recall worker thread, /metrics answers, SIGTERM stops it cleanly.
 *
 * dist/ is built first when it is missing or older than its sources (test/support/dist.ts);
 * after `npm test`'s own build that check costs a few milliseconds.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { sign } from '../channels/webhook/signature.ts';
import { startFakeOpenAI, type FakeOpenAI } from './fixtures/fake-openai.ts';
import { startDaemon, tempConfig, type Daemon } from './support/cli.ts';
import { ensureDist, launcherPath } from './support/dist.ts';
import { freePort } from './support/net.ts';

const secret = 'dist-smoke-secret';
const env = { TEST_MODEL_KEY: 'sk-dist', WEBHOOK_SECRET: secret };

/** Threads of a process named "WorkerThread" (what Node names a worker_threads thread). */
function workerThreads(pid: number): number {
  return readdirSync(`/proc/${pid}/task`).filter((task) => {
    try {
      return readFileSync(`/proc/${pid}/task/${task}/comm`, 'utf8').trim() === 'WorkerThread';
    } catch {
      return false; // the thread ended meanwhile
    }
  }).length;
}

describe('the built daemon through bin/switchboard (dist smoke test)', () => {
  let model: FakeOpenAI;
  let daemon: Daemon;
  let config: ReturnType<typeof tempConfig>;
  let base: string;

  async function post(key: string, text: string): Promise<{ status: number; json: Record<string, unknown> }> {
    const body = JSON.stringify({ sender: 'ops', conversation: 'smoke', text });
    const response = await fetch(`${base}/webhook`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': key, 'x-switchboard-signature': sign(secret, { key, body }) },
      body,
    });
    return { status: response.status, json: (await response.json()) as Record<string, unknown> };
  }

  before(async () => {
    await ensureDist();
    model = await startFakeOpenAI();
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    config = tempConfig(
      model.baseUrl,
      `[log]\nformat = "json"\n[gateway]\nlisten = "127.0.0.1:${port}"\n[memory]\nauto_save = true\nauto_recall = true\n[channels.webhook]\nsecret = "\${WEBHOOK_SECRET}"\nreply_timeout_seconds = 10\n`,
    );
    daemon = startDaemon(['start', '--config', config.file], { env, command: [launcherPath] });
    await daemon.waitFor(/"msg":"ready"/, 'stdout', 30_000);
  });
  after(async () => {
    if (daemon.child.exitCode === null) {
      daemon.child.kill('SIGKILL');
      await daemon.exited;
    }
    config.cleanup();
    await model.close();
  });

  it('answers, recalls the first message through the recall worker, serves /metrics, and stops on SIGTERM', async () => {
    // The launcher exec()s Node: the child is the daemon itself, running dist/ on a Node new enough.
    const cmdline = readFileSync(`/proc/${daemon.child.pid}/cmdline`, 'utf8').split('\0');
    assert.match(cmdline[1]!, /\/dist\/app\/cli\.js$/, cmdline.join(' '));
    assert.equal(workerThreads(daemon.child.pid!), 0, 'the recall worker starts on the first search, not at start-up');

    const first = await post('smoke-1', 'my favourite colour is teal, please remember it');
    assert.deepEqual(first, { status: 200, json: { id: 'smoke-1', reply: 'echo: my favourite colour is teal, please remember it' } });
    const second = await post('smoke-2', 'which colour is my favourite?');
    assert.deepEqual(second, { status: 200, json: { id: 'smoke-2', reply: 'echo: which colour is my favourite?' } });

    // The auto-saved first message came back as a recalled memory in the second turn's system prompt…
    const system = model.requests.at(-1)!.body.messages[0]!.content ?? '';
    assert.match(system, /Things you remember[\s\S]*favourite colour is teal/);
    // …found by the recall worker (dist/app/recall-worker.js), not the main-thread fallback.
    assert.ok(workerThreads(daemon.child.pid!) >= 1, 'a recall worker thread runs');
    assert.doesNotMatch(daemon.stdout() + daemon.stderr(), /recall worker (unavailable|failed)|memory recall worker failed/);

    const metrics = await fetch(`${base}/metrics`);
    assert.equal(metrics.status, 200);
    const text = await metrics.text();
    assert.match(text, /^switchboard_messages_received_total\{channel="webhook"\} 2$/m);
    assert.match(text, /^process_cpu_seconds_total \d/m);
    assert.match(text, /^nodejs_version_info\{version="v(\d+)\.\d+\.\d+",/m);
    const promtool = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' }); // where Prometheus is installed
    if (promtool.error === undefined) assert.deepEqual([promtool.status, promtool.stdout + promtool.stderr], [0, ''], 'promtool check metrics');

    daemon.child.kill('SIGTERM');
    assert.deepEqual(await daemon.exited, { code: 0, signal: null });
    assert.doesNotMatch(daemon.stdout(), /"level":(50|60)/, 'no error was logged');
  });
});
