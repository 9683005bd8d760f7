/**
 * `npm run bench:cluster` — what a cluster on PostgreSQL buys and costs (issue 14), printed:
 *
 * 1. Throughput with 1, 2 and 3 nodes, the model taking 200 ms per turn: 240 messages from 40
 *    people (a Telegram peer), all queued at once; messages per second, the scaling ratio, and
 *    the CPU milliseconds per message of each node and of PostgreSQL (from /proc, so the ratio can
 *    be read for machines with more cores than this one).
 *    Beside the whole step, the steady rate: answers per second between the 10th and the 90th
 *    percent answered. The whole step includes the ramp-up (the holder storing the first messages,
 *    the slots filling) and the drain (the last conversations running with slots idle, since each
 *    person's messages run in order), which no number of nodes shortens; the steady rate is how
 *    the cluster scales while every slot has work. Before each step every node is warmed up
 *    (it has ended 30 turns: its first turns load the agent's modules and compile its hot code)
 *    and has settled its heap (app/heap.ts: one full collection 3 s after ready), so neither a
 *    cold node nor a node's start-up collection is measured against warm, settled ones.
 * 2. Each turn's wait at 3 nodes, split three ways from pg-boss's job rows and the nodes' "turn
 *    done" lines: waiting for the conversation's earlier turn (first in first out), waiting for a
 *    free slot on the node that ran it, and pickup — runnable with a slot free → turn started.
 * 3. Failover: the node holding Telegram is SIGKILLed; time until another node holds it and
 *    until a message written right after the kill is answered.
 * 4. Per-message overhead, PostgreSQL vs SQLite: one node, a model answering at once, 200
 *    messages from 20 people; wall and CPU milliseconds per message; and (first run) the
 *    statements and transactions one message costs PostgreSQL, from the server's statement log.
 *
 * Every step runs `--runs` times (default 3: the machine may be shared), then min / median / max.
 * Runs a throwaway PostgreSQL 15 (test/support/postgres.ts), the scripted model and the
 * Telegram peer in this process, and each node as `switchboard start` from the source tree.
 * On a 2-core machine the nodes share the cores, so more nodes add turn slots, not CPU.
 * Flags: --messages N (default 240), --model-ms N (default 200), --runs N (default 3),
 * --only per-message (step 4 alone), --statements (step 4 also lists each statement one message
 * sends, with how many times per message), --cpu-prof DIR (step 4's PostgreSQL node writes a
 * V8 CPU profile there as it stops), --syscalls (step 4, first run: the system calls one message
 * costs the PostgreSQL node and PostgreSQL, by strace: socket writes are packets the other side wakes for).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { SETTLE_AFTER_MS } from '../app/heap.ts';
import { lastUserText, startFakeOpenAI } from '../test/fixtures/fake-openai.ts';
import { startTelegramPeer, type TgUser } from '../test/peers/telegram.ts';
import { startCluster, type TestCluster } from '../test/support/cluster.ts';
import { startPostgres } from '../test/support/postgres.ts';
import { fmt, percentile, say, sleep } from './bench-support.ts';
import { countStatements, countSyscalls, cpuMeter, splitWaits, spread, steadyRate, turnTimes } from './bench-cluster-measure.ts';

const { values } = parseArgs({
  options: {
    messages: { type: 'string', default: '240' },
    'model-ms': { type: 'string', default: '200' },
    runs: { type: 'string', default: '3' },
    only: { type: 'string' },
    statements: { type: 'boolean', default: false },
    'cpu-prof': { type: 'string' },
    syscalls: { type: 'boolean', default: false },
  },
});
if (values.only !== undefined && values.only !== 'per-message') throw new Error(`--only takes "per-message", not "${values.only}"`);
const MESSAGES = Number(values.messages);
const MODEL_MS = Number(values['model-ms']);
const RUNS = Number(values.runs);
/** Turns a node runs at once: the default for one channel (clamp(channels × 4, 8, 64)). */
const SLOTS = 8;
const NOTE = /note-(\d+)/;

const pg = await startPostgres();
const model = await startFakeOpenAI();
let modelDelay = MODEL_MS;
model.fallback = (request) => {
  model.requests.length = 0;
  return { text: `got note-${NOTE.exec(lastUserText(request))?.[1] ?? '?'}`, delayMs: modelDelay };
};
// Telegram's per-chat flood control lifted: with it, 10 messages to one chat take 7 s whatever the
// store, and "per message" measured the peer's 1/s pacing (38 ms) instead of the daemon (~3 ms).
const peer = await startTelegramPeer({ flood: false });
let people = 0;
let notes = 0;

/** Queues `count` messages from `from` new people (round robin); resolves when all are answered. Returns the wall ms. */
async function burst(count: number, from: number, timeoutMs = 300_000): Promise<number> {
  return (await timedBurst(count, from, timeoutMs)).ms;
}

/** {@link burst}, also returning when each answer arrived (`answeredAt[i]`: ms after the start when i + 1 were answered, to ~2 ms). */
async function timedBurst(count: number, from: number, timeoutMs = 300_000): Promise<{ ms: number; answeredAt: number[] }> {
  const who: TgUser[] = Array.from({ length: from }, () => {
    const id = 700_000 + ++people;
    return { id, is_bot: false, first_name: `P${id}`, username: `p${id}` };
  });
  const chats = new Set(who.map((person) => person.id));
  // read incrementally: looked at every 2 ms (at 20 ms, the end of a 2.3 s step was read up to 20 ms late)
  let seen = peer.sent.length;
  let answers = 0;
  const answered = (): number => {
    for (; seen < peer.sent.length; seen++) if (chats.has(peer.sent[seen]!.chatId) && NOTE.test(peer.sent[seen]!.text)) answers++;
    return answers;
  };
  const started = performance.now();
  for (let i = 0; i < count; i++) {
    const person = who[i % who.length]!;
    const n = ++notes;
    peer.queue({ message: { message_id: n, date: Math.floor(Date.now() / 1000), chat: { id: person.id, type: 'private', first_name: person.first_name }, from: person, text: `note-${n}` } });
  }
  const answeredAt: number[] = [];
  for (;;) {
    const now = performance.now() - started;
    const done = answered();
    while (answeredAt.length < done) answeredAt.push(now);
    if (done >= count) return { ms: now, answeredAt };
    if (now > timeoutMs) throw new Error(`only ${done} of ${count} answered within ${timeoutMs / 1000} s`);
    await sleep(2);
  }
}

/** The turns `node` has ended so far (its "turn done" lines, warm-up included). */
function turnsEnded(node: TestCluster['nodes'][number]): number {
  return (node.stdout().match(/"msg":"turn done"/g) ?? []).length;
}

/**
 * Warms every node up: a node's first turns load the agent's modules and compile its hot code
 * (a cold node's first turn took ~300 ms against ~205 with a 200 ms model). Which node runs a
 * turn is whoever fetches it first, so 4 messages from 2 people left a node of three cold in most
 * runs, and the 3-node step measured a cold node against a warm one at one node: bursts until
 * every node has ended at least WARM_TURNS turns. After 4 turns a node's hot code is still far
 * from V8's optimising tiers, and each of 3 nodes runs 80 turns of a step where one node runs
 * 240, so a short warm-up weighed more on the 3-node step: 6 interleaved probe runs with 4 and
 * with 30, 3-node step 2,341 → 2,300 ms (medians), 1-node 6,528 → 6,515.
 */
async function warmUp(cluster: TestCluster): Promise<void> {
  const WARM_TURNS = 30;
  for (let round = 0; cluster.nodes.some((node) => turnsEnded(node) < WARM_TURNS); round++) {
    if (round === 40) throw new Error(`a node ended fewer than ${WARM_TURNS} warm-up turns in 40 bursts: ${cluster.nodes.map((node) => `${node.name} ${turnsEnded(node)}`).join(', ')}`);
    await burst(8 * cluster.nodes.length, 4 * cluster.nodes.length);
  }
}

/**
 * Waits until every node has settled its heap: with `heap = "compact"` (the default) a node runs
 * one memory-reducing full collection SETTLE_AFTER_MS after ready (app/heap.ts), a start-up
 * transient. The steps began within 3 s of ready, so that collection landed inside them, on each
 * node of three: in a probe of 6 interleaved runs each, the 3-node step took 2,413 ms (median)
 * with it and 2,335 after it; the 1-node step 6,515 and 6,445.
 */
async function settled(cluster: TestCluster): Promise<void> {
  const readyAt = cluster.nodes.map((node) => Number(/"time":(\d+)[^\n]*"msg":"ready"/.exec(node.stdout())?.[1] ?? Date.now()));
  const wait = Math.max(...readyAt) + SETTLE_AFTER_MS + 500 - Date.now();
  if (wait > 0) await sleep(wait);
}

async function startNodes(url: string | undefined, names: readonly string[], env?: Record<string, string>): Promise<TestCluster> {
  const cluster = startCluster({ url, modelUrl: model.baseUrl, channels: `${peer.configSection()}poll_timeout_seconds = 1\nallow = ["*"]\n`, names, failoverSeconds: 3, ...(env ? { env } : {}) });
  await Promise.all(cluster.nodes.map((node) => cluster.joined(node, 60_000)));
  const deadline = Date.now() + 30_000;
  while (!cluster.holder() && url !== undefined) {
    if (Date.now() > deadline) throw new Error(`no node took Telegram\n${cluster.tail()}`);
    await sleep(50);
  }
  await warmUp(cluster);
  await settled(cluster);
  return cluster;
}

/** A statement on the database at `url` (default: the server's `postgres` database). */
async function adminQuery<Row>(text: string, url = pg.adminUrl): Promise<Row[]> {
  const { default: pgClient } = await import('pg');
  const client = new pgClient.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query(text)).rows as Row[];
  } finally {
    await client.end();
  }
}

const postmaster = Number(readFileSync(join((await adminQuery<{ data_directory: string }>('SHOW data_directory'))[0]!.data_directory, 'postmaster.pid'), 'utf8').split('\n')[0]);
/** Each figure over the runs. */
const figures = new Map<string, number[]>();
const record = (name: string, value: number | undefined): void => {
  if (value !== undefined && Number.isFinite(value)) figures.set(name, [...(figures.get(name) ?? []), value]);
};
const cpuLine = (cpu: { nodes: number[]; postgres: number | undefined }): string =>
  `CPU ms/msg: nodes ${cpu.nodes.map((ms) => fmt(ms, 2)).join(' / ')}${cpu.postgres === undefined ? '' : `, PostgreSQL ${fmt(cpu.postgres, 2)}`}`;

say(`bench:cluster — ${MESSAGES} messages from 40 people, model ${MODEL_MS} ms per turn, PostgreSQL 15 on 127.0.0.1, ${RUNS} run${RUNS > 1 ? 's' : ''}`);
let three: TestCluster | undefined;
try {
  for (let run = 1; run <= RUNS; run++) {
    say(`run ${run}:`);
    if (values.only !== 'per-message') await clusterSteps(run);
    await perMessage(run);
  }
  if (RUNS > 1) {
    say(`min / median / max over ${RUNS} runs:`);
    for (const [name, values] of figures) say(`  ${name}: ${spread(values, name.includes('×') ? 2 : name.includes('CPU') || name.startsWith('per message') ? 2 : 1)}`);
  }
} finally {
  await three?.close();
  await peer.close();
  await model.close();
  pg.stop();
}

/** Steps 1–3: throughput at 1, 2 and 3 nodes, the waits at 3, then failover. */
async function clusterSteps(run: number): Promise<void> {
  const rates: number[] = [];
  const steadyRates: number[] = [];
  let threeUrl = '';
  let threeBegan = 0;
  for (const count of [1, 2, 3]) {
    const url = await pg.createDatabase(`bench_${run}_${count}`);
    const cluster = await startNodes(url, ['n1', 'n2', 'n3'].slice(0, count));
    const meter = cpuMeter(cluster, postmaster);
    const began = Date.now();
    const { ms, answeredAt } = await timedBurst(MESSAGES, 40);
    const cpu = meter.per(MESSAGES);
    const steady = steadyRate(answeredAt);
    // The holder stores the messages one after another: when that, not the turn slots, is the limit, this is close to the whole step.
    const stored = (await adminQuery<{ last: number }>(`SELECT max(received_at)::float8 AS last FROM inbox`, url))[0]!.last - began;
    record(`${count} node${count > 1 ? 's' : ''}, all stored after, ms`, stored);
    const rate = (MESSAGES / ms) * 1000;
    rates.push(rate);
    record(`${count} node${count > 1 ? 's' : ''}, msg/s`, rate);
    if (count > 1) record(`${count} nodes, scaling ×`, rate / rates[0]!);
    steadyRates.push(steady);
    record(`${count} node${count > 1 ? 's' : ''}, steady msg/s (answers 10 %→90 %)`, steady);
    if (count > 1) record(`${count} nodes, steady scaling ×`, steady / steadyRates[0]!);
    cpu.nodes.forEach((ms, i) => record(`${count} node${count > 1 ? 's' : ''}, CPU ms/msg n${i + 1}`, ms));
    record(`${count} node${count > 1 ? 's' : ''}, CPU ms/msg PostgreSQL`, cpu.postgres);
    const turns = cluster.nodes.map(turnsEnded);
    say(`  ${count} node${count > 1 ? 's' : ' '}: ${fmt(rate)} msg/s (${fmt(ms / 1000)} s; turns per node ${turns.join(' / ')}; scaling ×${fmt(rate / rates[0]!, 2)}; steady ${fmt(steady)} msg/s, ×${fmt(steady / steadyRates[0]!, 2)}; the last message stored ${fmt(stored / 1000)} s in; ${cpuLine(cpu)})`);
    if (count === 3) {
      three = cluster;
      threeUrl = url;
      threeBegan = began;
    } else await cluster.close();
  }
  // the step's turns only, not the warm-up's (finished before the step began; the clocks are this machine's)
  const waits = splitWaits((await turnTimes(three!, threeUrl)).filter((turn) => turn.created >= threeBegan - 5), SLOTS);
  for (const [name, list] of [['pickup', waits.pickup], ['pickup: claim', waits.claim], ['pickup: claim → start', waits.startUp], ['slot wait', waits.slotWait], ['conversation wait', waits.fifoWait]] as const) {
    record(`${name} p50, ms`, percentile(list, 50));
    record(`${name} p99, ms`, percentile(list, 99));
  }
  say(
    `  3 nodes, ${waits.pickup.length} turns: pickup (runnable with a slot free → turn started) p50 ${fmt(percentile(waits.pickup, 50), 0)} ms, p99 ${fmt(percentile(waits.pickup, 99), 0)} ms (claimed p50 ${fmt(percentile(waits.claim, 50), 0)} / p99 ${fmt(percentile(waits.claim, 99), 0)} ms, claimed → started p50 ${fmt(percentile(waits.startUp, 50), 0)} / p99 ${fmt(percentile(waits.startUp, 99), 0)} ms); ` +
      `slot wait p50 ${fmt(percentile(waits.slotWait, 50), 0)} ms, p99 ${fmt(percentile(waits.slotWait, 99), 0)} ms; ` +
      `waiting for the conversation's earlier turn p50 ${fmt(percentile(waits.fifoWait, 50), 0)} ms, p99 ${fmt(percentile(waits.fifoWait, 99), 0)} ms`,
  );

  // Failover: kill the holder, then write at once.
  const holder = three!.holder()!;
  const killedAt = Date.now();
  holder.daemon.child.kill('SIGKILL');
  const answeredMs = await burst(1, 1, 120_000);
  let movedAt: number | undefined;
  for (const node of three!.nodes) {
    if (node === holder) continue;
    const match = /"time":(\d+)[^\n]*"msg":"this node now holds the channel"/.exec(node.daemon.stdout());
    if (match) movedAt = Number(match[1]);
  }
  record('failover: channel moved, ms', movedAt === undefined ? undefined : movedAt - killedAt);
  record('failover: message answered, ms', answeredMs);
  say(`  failover (failover_seconds = 3): Telegram held by another node ${movedAt === undefined ? 'n/a' : `${movedAt - killedAt} ms`} after the kill; a message written at the kill answered after ${fmt(answeredMs, 0)} ms`);
  await three!.close();
  three = undefined;
}

/** Step 4: PostgreSQL vs SQLite, per message, one node, a model that answers at once. */
async function perMessage(run: number): Promise<void> {
  modelDelay = 0;
  for (const [label, url] of [['SQLite', undefined], ['PostgreSQL', await pg.createDatabase(`bench_${run}_overhead`)]] as const) {
    const profiled = url !== undefined && values['cpu-prof'] !== undefined;
    const cluster = await startNodes(url, ['solo'], profiled ? { NODE_OPTIONS: `--cpu-prof --cpu-prof-dir=${values['cpu-prof']}` } : undefined);
    const meter = cpuMeter(cluster, url === undefined ? undefined : postmaster);
    const ms = await burst(200, 20);
    const cpu = meter.per(200);
    record(`per message ${label}, ms`, ms / 200);
    record(`per message ${label}, CPU ms/msg node`, cpu.nodes[0]);
    record(`per message ${label}, CPU ms/msg PostgreSQL`, cpu.postgres);
    say(`  one node, ${label}: ${fmt(ms / 200, 2)} ms per message (${fmt((200 / ms) * 1000)} msg/s, model at 0 ms; ${cpuLine(cpu)})`);
    if (url !== undefined && run === 1) {
      // What one message costs PostgreSQL in round trips, counted from the server's statement log.
      const counted = await countStatements(pg.adminUrl, async () => void (await burst(20, 20)));
      const parts = [...counted.byApplication].map(([app, n]) => `${app} ${fmt(n / 20, 1)}`).join(', ');
      say(`  one node, PostgreSQL, 20 messages from 20 people: ${fmt(counted.statements / 20, 1)} statements per message (${parts}), ${fmt(counted.transactions / 20, 1)} BEGIN per message`);
      if (values.statements) {
        const list = [...counted.list].sort((a, b) => b[1] - a[1]);
        for (const [text, n] of list) say(`    ${fmt(n / 20, 2)} × ${text.length > 220 ? `${text.slice(0, 220)}…` : text}`);
      }
      if (values.syscalls) {
        const calls = await countSyscalls(cluster.nodes[0]!.daemon.child.pid!, postmaster, async () => void (await burst(100, 20)));
        const line = (counts: Map<string, number>): string =>
          ['write', 'writev', 'sendto', 'read', 'recvfrom', 'epoll_wait', 'epoll_pwait'].filter((name) => counts.has(name)).map((name) => `${name} ${fmt(counts.get(name)! / 100, 1)}`).join(', ');
        say(calls ? `  one node, PostgreSQL, 100 messages from 20 people, system calls per message (strace): node ${line(calls.node)}; PostgreSQL ${line(calls.postgres)}` : '  (strace is not installed: no system call counts)');
      }
    }
    if (profiled) {
      // the profile is written as the process exits; close() would SIGKILL it
      cluster.nodes[0]!.daemon.child.kill('SIGTERM');
      await cluster.nodes[0]!.daemon.exited;
    }
    await cluster.close();
  }
  modelDelay = MODEL_MS;
}
