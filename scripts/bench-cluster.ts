/**
 * `npm run bench:cluster` — what a cluster on PostgreSQL buys and costs (issue 14), printed:
 *
 * 1. Throughput with 1, 2 and 3 nodes, the model taking 200 ms per turn: 240 messages from 40
 *    people (a Telegram peer), all queued at once; messages per second and the scaling ratio.
 * 2. Queue pickup latency, message in the inbox → its turn started (p50 / p99), from the inbox's
 *    received_at and each node's "turn done" log line (its end minus its duration).
 * 3. Failover: the node holding Telegram is SIGKILLed; time until another node holds it and
 *    until a message written right after the kill is answered.
 * 4. Per-message overhead, PostgreSQL vs SQLite: one node, a model answering at once, 200
 *    messages from 20 people; wall milliseconds per message.
 *
 * Runs a throwaway PostgreSQL 15 (test/support/postgres.ts), the scripted model and the
 * Telegram peer in this process, and each node as `switchboard start` from the source tree.
 * On a 2-core machine the nodes share the cores, so more nodes add turn slots, not CPU.
 * Flags: --messages N (default 240), --model-ms N (default 200).
 */
import { parseArgs } from 'node:util';
import { lastUserText, startFakeOpenAI } from '../test/fixtures/fake-openai.ts';
import { startTelegramPeer, type TgUser } from '../test/peers/telegram.ts';
import { startCluster, type TestCluster } from '../test/support/cluster.ts';
import { startPostgres } from '../test/support/postgres.ts';
import { fmt, percentile, say, sleep } from './bench-support.ts';

const { values } = parseArgs({ options: { messages: { type: 'string', default: '240' }, 'model-ms': { type: 'string', default: '200' } } });
const MESSAGES = Number(values.messages);
const MODEL_MS = Number(values['model-ms']);
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
  const who: TgUser[] = Array.from({ length: from }, () => {
    const id = 700_000 + ++people;
    return { id, is_bot: false, first_name: `P${id}`, username: `p${id}` };
  });
  const chats = new Set(who.map((person) => person.id));
  const answered = (): number => peer.sent.filter((message) => chats.has(message.chatId) && NOTE.test(message.text)).length;
  const started = performance.now();
  for (let i = 0; i < count; i++) {
    const person = who[i % who.length]!;
    const n = ++notes;
    peer.queue({ message: { message_id: n, date: Math.floor(Date.now() / 1000), chat: { id: person.id, type: 'private', first_name: person.first_name }, from: person, text: `note-${n}` } });
  }
  while (answered() < count) {
    if (performance.now() - started > timeoutMs) throw new Error(`only ${answered()} of ${count} answered within ${timeoutMs / 1000} s`);
    await sleep(20);
  }
  return performance.now() - started;
}

async function startNodes(url: string | undefined, names: readonly string[]): Promise<TestCluster> {
  const cluster = startCluster({ url, modelUrl: model.baseUrl, channels: `${peer.configSection()}poll_timeout_seconds = 1\nallow = ["*"]\n`, names, failoverSeconds: 3 });
  await Promise.all(cluster.nodes.map((node) => cluster.joined(node, 60_000)));
  const deadline = Date.now() + 30_000;
  while (!cluster.holder() && url !== undefined) {
    if (Date.now() > deadline) throw new Error(`no node took Telegram\n${cluster.tail()}`);
    await sleep(50);
  }
  await burst(4, 2); // warm up: first turns load the agent's modules
  return cluster;
}

/** Inbox → turn started, ms, for every turn the nodes logged. */
async function pickupLatencies(cluster: TestCluster, url: string): Promise<number[]> {
  const { default: pgClient } = await import('pg');
  const client = new pgClient.Client({ connectionString: url });
  await client.connect();
  const received = new Map<number, number>();
  for (const row of (await client.query<{ seq: string; received_at: string }>('SELECT seq, received_at FROM inbox')).rows) received.set(Number(row.seq), Number(row.received_at));
  await client.end();
  const latencies: number[] = [];
  for (const node of cluster.nodes) {
    for (const line of node.stdout().split('\n')) {
      if (!line.includes('"msg":"turn done"')) continue;
      const entry = JSON.parse(line) as { time: number; ms: number; seq: number };
      const at = received.get(entry.seq);
      if (at !== undefined) latencies.push(entry.time - entry.ms - at);
    }
  }
  return latencies.sort((a, b) => a - b);
}

say(`bench:cluster — ${MESSAGES} messages from 40 people, model ${MODEL_MS} ms per turn, PostgreSQL 15 on 127.0.0.1`);
const rates: number[] = [];
let three: TestCluster | undefined;
let threeUrl = '';
try {
  for (const count of [1, 2, 3]) {
    const url = await pg.createDatabase(`bench_${count}`);
    const cluster = await startNodes(url, ['n1', 'n2', 'n3'].slice(0, count));
    const ms = await burst(MESSAGES, 40);
    const rate = (MESSAGES / ms) * 1000;
    rates.push(rate);
    const turns = cluster.nodes.map((node) => (node.stdout().match(/"msg":"turn done"/g) ?? []).length);
    say(`  ${count} node${count > 1 ? 's' : ' '}: ${fmt(rate)} msg/s (${fmt(ms / 1000)} s; turns per node ${turns.join(' / ')}; scaling ×${fmt(rate / rates[0]!, 2)})`);
    if (count === 3) {
      three = cluster;
      threeUrl = url;
    } else await cluster.close();
  }
  const latencies = await pickupLatencies(three!, threeUrl);
  say(`  pickup (inbox → turn started, 3 nodes, ${latencies.length} turns): p50 ${fmt(percentile(latencies, 50), 0)} ms, p99 ${fmt(percentile(latencies, 99), 0)} ms`);

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
  say(`  failover (failover_seconds = 3): Telegram held by another node ${movedAt === undefined ? 'n/a' : `${movedAt - killedAt} ms`} after the kill; a message written at the kill answered after ${fmt(answeredMs, 0)} ms`);
  await three!.close();
  three = undefined;

  // PostgreSQL vs SQLite, per message, one node, a model that answers at once.
  modelDelay = 0;
  for (const [label, url] of [['SQLite', undefined], ['PostgreSQL', await pg.createDatabase('bench_overhead')]] as const) {
    const cluster = await startNodes(url, ['solo']);
    const ms = await burst(200, 20);
    say(`  one node, ${label}: ${fmt(ms / 200, 2)} ms per message (${fmt((200 / ms) * 1000)} msg/s, model at 0 ms)`);
    await cluster.close();
  }
} finally {
  await three?.close();
  await peer.close();
  await model.close();
  pg.stop();
}
