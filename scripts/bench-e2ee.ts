/**
 * Matrix end-to-end encryption benchmark (issue 28's closing figures): prints, never fails.
 *
 *   node scripts/bench-e2ee.ts [round trips, default 30] [starts, default 3]
 *
 * Against the Matrix peer and the scripted model, with `encryption` off and on:
 * 1. start-up: `start` to "ready" (the Matrix channel synced; with encryption, its device
 *    opened from the database and its keys uploaded), a fresh data dir each time but the first
 *    start's (so the crypto state is loaded, not made);
 * 2. RSS of the daemon's process tree, ~2 s after ready, and after the round trips;
 * 3. reply latency, p50 / p90: a person's DM posted on the peer → the bot's reply there; with
 *    encryption the person's device encrypts (not timed) and the bot decrypts, answers and
 *    encrypts (timed).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { startFakeOpenAI } from '../test/fixtures/fake-openai.ts';
import { startMatrixPeer, SYNAPSE_EXEMPT } from '../test/peers/matrix.ts';
import { PersonDevice } from '../test/peers/matrix-person.ts';
import { startDaemon, tempConfig } from '../test/support/cli.ts';
import { until } from '../test/support/wait.ts';

const ROUNDS = Number(process.argv[2] ?? 30);
const STARTS = Number(process.argv[3] ?? 3);
const env = { TEST_MODEL_KEY: 'sk-bench', SWITCHBOARD_TOKEN: 'bench-e2ee-token-0123456789', SWITCHBOARD_LOG_LEVEL: 'info' };
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** The resident memory of a process and its descendants (MB). */
function treeRssMb(root: number): number {
  const children = new Map<number, number[]>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const ppid = Number(/PPid:\s+(\d+)/.exec(readFileSync(`/proc/${entry}/status`, 'utf8'))?.[1]);
      children.set(ppid, [...(children.get(ppid) ?? []), Number(entry)]);
    } catch {
      // gone meanwhile
    }
  }
  let kb = 0;
  const stack = [root];
  while (stack.length > 0) {
    const pid = stack.pop()!;
    try {
      kb += Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0);
    } catch {
      // gone
    }
    stack.push(...(children.get(pid) ?? []));
  }
  return Math.round(kb / 1024);
}

const percentile = (values: number[], p: number): number => [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor((p / 100) * values.length))] ?? Number.NaN;

async function run(encryption: boolean): Promise<void> {
  const model = await startFakeOpenAI();
  const peer = await startMatrixPeer({ rcMessage: SYNAPSE_EXEMPT });
  const config = tempConfig(model.baseUrl, `[log]\nformat = "json"\n${peer.configSection()}encryption = ${encryption}\nallow = ["${peer.users.alice}"]\n`);
  try {
    const starts: number[] = [];
    let daemon;
    for (let i = 0; i < STARTS; i++) {
      const t0 = performance.now();
      daemon = startDaemon(['start', '--config', config.file], { env });
      await daemon.waitFor(/"msg":"ready"/, 'stdout', 60_000);
      starts.push(performance.now() - t0);
      if (i < STARTS - 1) {
        daemon.child.kill('SIGTERM');
        await daemon.exited;
      }
    }
    await sleep(2000);
    const idleRss = treeRssMb(daemon!.child.pid!);
    const latencies: number[] = [];
    if (encryption) {
      const phone = await PersonDevice.open(peer, peer.users.alice, 'ALICEPHONE');
      const room = peer.inviteEncryptedDm('alice');
      await until(() => peer.botMembership(room) === 'join', 'joined', 20_000);
      const members = [peer.users.alice, peer.botUserId];
      for (let i = 0; i < ROUNDS; i++) {
        const before = peer.rawBotEventsIn(room).length;
        const content = await phone.crypto.encrypt(room, members, 'm.room.message', { msgtype: 'm.text', body: `ping ${i}` });
        const t0 = performance.now();
        peer.postEvent(room, 'alice', 'm.room.encrypted', content);
        await until(() => peer.rawBotEventsIn(room).length > before, `reply ${i}`, 20_000);
        latencies.push(performance.now() - t0);
      }
    } else {
      const dm = { kind: 'dm', user: 'alice' } as const;
      for (let i = 0; i < ROUNDS; i++) {
        const before = peer.botMessages(dm).length;
        const t0 = performance.now();
        await peer.post('alice', dm, `ping ${i}`);
        await until(() => peer.botMessages(dm).length > before, `reply ${i}`, 20_000);
        latencies.push(performance.now() - t0);
      }
    }
    const busyRss = treeRssMb(daemon!.child.pid!);
    daemon!.child.kill('SIGTERM');
    await daemon!.exited;
    const f = (ms: number): string => `${ms.toFixed(0)} ms`;
    console.log(
      `encryption ${encryption ? 'on ' : 'off'}: start p50 ${f(percentile(starts, 50))} (${starts.map((s) => s.toFixed(0)).join(', ')}); RSS idle ${idleRss} MB, after ${ROUNDS} replies ${busyRss} MB; reply p50 ${f(percentile(latencies, 50))} p90 ${f(percentile(latencies, 90))}`,
    );
  } finally {
    await peer.close();
    await model.close();
    config.cleanup();
  }
}

await run(false);
await run(true);
