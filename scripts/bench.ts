/**
 * Switchboard benchmark: prints figures, never fails on speed.
 *
 *   npm run bench        (builds dist/ first; cold start runs the compiled daemon)
 *   node scripts/bench.ts --start-only   (sections 1 and 2 on the dist/ already built)
 *
 * 1. cold start to "ready": `node dist/app/cli.js start` with a terminal channel and with
 *    Telegram against its local Bot API peer, 10 runs each on a fresh data dir, beside the
 *    same Node's `node -e "console.log(1)"`; plus one on an existing (warm) database
 * 2. idle RSS, private (Anonymous) memory and threads 10 s after ready, both channels
 * 3. per-message overhead (push → send) through an in-process Runtime with a zero-latency
 *    turn handler: no HTTP, no model; real SQLite file
 * 4. throughput at 1 / 8 / 64 conversations (same set-up), and through the real agent and
 *    OpenAI provider against the fake HTTP model (run in its own process, as a real
 *    endpoint would be)
 *
 * Everything runs on 127.0.0.1, every wait is bounded, temp dirs are removed, and the
 * script exits by itself.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { availableParallelism, cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { pino, type Logger } from 'pino';
import type { Channel, InboundMessage, OutboundMessage, Push } from '../src/channel.ts';
import { createAgent, type TurnHandler } from '../src/agent/agent.ts';
import { ApprovalStore } from '../src/agent/approvals.ts';
import { createToolRunner } from '../src/agent/tool-runner.ts';
import { createArgsValidator } from '../src/agent/validate.ts';
import type { Tool } from '../src/tool.ts';
import { createOpenAIProvider } from '../src/providers/openai.ts';
import { defaultDeliveryOptions } from '../src/runtime/delivery.ts';
import { Runtime } from '../src/runtime/runtime.ts';
import { defaultSupervisorOptions } from '../src/runtime/supervisor.ts';
import { openDatabase, type Db } from '../src/store/db.ts';
import { createClockTool } from '../src/tools/clock.ts';
import { sqliteDatabase } from '../src/store/sqlite-sql.ts';
import { startTelegramPeer } from '../test/peers/telegram.ts';
import {
  CLI,
  ROOT,
  children,
  cleanUp,
  fmt,
  fmtInt,
  mean,
  median,
  percentile,
  removeTempDirs,
  runBench,
  say,
  sleep,
  startFakeServerProcess,
  stopChild,
  tempDir,
  within,
} from './bench-support.ts';


const COLD_RUNS = 10;
const READY_TIMEOUT_MS = 20_000;
const IDLE_SETTLE_MS = 10_000;
const OVERHEAD_WARMUP = 200;
const OVERHEAD_N = 2_000;
const THROUGHPUT_N = 10_000;
const HTTP_N = 2_000;
const MESSAGE_TIMEOUT_MS = 10_000;
const RUN_TIMEOUT_MS = 120_000;
const BENCH_TIMEOUT_MS = 10 * 60_000;

// ---------------------------------------------------------------------------------------
// 1 + 2: the compiled daemon, cold start and idle RSS.

/** The config's body: the fake model, JSON logs, and `channel` (a `[channels.…]` section). */
function writeConfig(dir: string, baseUrl: string, channel = '[channels.terminal]\nuser = "bench"\n'): string {
  const file = join(dir, 'switchboard.toml');
  writeFileSync(
    file,
    ['data_dir = "./data"', '', '[log]', 'level = "info"', 'format = "json"', '', '[provider]', 'kind = "openai"', `base_url = "${baseUrl}"`, 'model = "bench"', '', channel].join('\n'),
  );
  return file;
}

interface Started {
  readonly child: ChildProcess;
  /** Spawn → "ready" line, as seen by this process. */
  readonly wallMs: number;
  /** The `startupMs` the ready line carries (measured inside the daemon). */
  readonly startupMs: number | undefined;
}

/**
 * Starts the compiled daemon and waits for its "ready" line: on stderr with the terminal
 * channel, on stdout otherwise. MALLOC_ARENA_MAX=2 as the systemd unit and the Dockerfile set it.
 */
async function startDaemon(config: string): Promise<Started> {
  const env: NodeJS.ProcessEnv = { ...process.env, MALLOC_ARENA_MAX: '2' };
  delete env.SWITCHBOARD_LOG_LEVEL;
  delete env.SWITCHBOARD_CONFIG;
  const t0 = performance.now();
  // stdin stays an open pipe: the terminal channel just waits on it.
  const child = spawn(process.execPath, [CLI, 'start', '--config', config], { cwd: ROOT, env, stdio: ['pipe', 'pipe', 'pipe'] });
  children.add(child);
  const streams = [createInterface({ input: child.stdout! }), createInterface({ input: child.stderr! })];
  const tail: string[] = [];
  try {
    const { wallMs, startupMs } = await within(
      new Promise<{ wallMs: number; startupMs: number | undefined }>((resolve, reject) => {
        for (const lines of streams) {
          lines.on('line', (line) => {
            tail.push(line);
            if (tail.length > 20) tail.shift();
            let record: { msg?: unknown; startupMs?: unknown };
            try {
              record = JSON.parse(line) as typeof record;
            } catch {
              return;
            }
            if (record.msg === 'ready') {
              resolve({ wallMs: performance.now() - t0, startupMs: typeof record.startupMs === 'number' ? record.startupMs : undefined });
            }
          });
        }
        child.once('exit', (code, signal) => reject(new Error(`daemon exited before ready (code ${code}, signal ${signal})`)));
        child.once('error', reject);
      }),
      READY_TIMEOUT_MS,
      'daemon ready',
    );
    return { child, wallMs, startupMs };
  } catch (error) {
    await stopChild(child, 'SIGKILL');
    throw new Error(`${(error as Error).message}\n  last output lines:\n    ${tail.join('\n    ')}`, { cause: error });
  }
}

/** Node's own floor: `node -e "console.log(1)"`, spawn → the line read, as the daemon's ready is. */
async function nodeSpawnAndPrint(): Promise<number> {
  const t0 = performance.now();
  const child = spawn(process.execPath, ['-e', 'console.log(1)'], { stdio: ['ignore', 'pipe', 'inherit'] });
  children.add(child);
  const ms = await within(
    new Promise<number>((resolve, reject) => {
      createInterface({ input: child.stdout! }).once('line', () => resolve(performance.now() - t0));
      child.once('error', reject);
    }),
    READY_TIMEOUT_MS,
    'node -e',
  );
  await new Promise((resolve) => (child.exitCode === null ? child.once('exit', resolve) : resolve(undefined)));
  children.delete(child);
  return ms;
}

/** What an idle process holds, from /proc/<pid>/smaps_rollup (Rss, Anonymous = private) and status (Threads). */
function idleFigures(pid: number): { rss: number; anon: number; threads: number } {
  const rollup = readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8');
  const kb = (name: string): number => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(rollup)?.[1] ?? Number.NaN) / 1024;
  const threads = Number(/^Threads:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? Number.NaN);
  return { rss: kb('Rss'), anon: kb('Anonymous'), threads };
}

const span = (values: readonly number[]): string => {
  const sorted = [...values].sort((a, b) => a - b);
  return `${fmt(sorted[0]!)} / ${fmt(median(values))} / ${fmt(sorted.at(-1)!)}`;
};

interface Idle {
  readonly rss: number;
  readonly anon: number;
  readonly threads: number;
}

interface ColdStartResult {
  /** Spawn → ready with the terminal channel, each run. */
  readonly wall: number[];
  readonly startup: number[];
  /** Spawn → ready with Telegram against its local peer, each run. */
  readonly telegram: number[];
  /** `node -e "console.log(1)"`, each run. */
  readonly node: number[];
  readonly warmWall: number;
  readonly warmStartup: number | undefined;
  readonly idleTerminal: Idle;
  readonly idleTelegram: Idle;
}

async function benchColdStart(baseUrl: string): Promise<ColdStartResult> {
  say(`## 1. Cold start to "ready" (${COLD_RUNS} runs each, fresh data dir each, interleaved)`);
  say(`   ${process.execPath} ${CLI} start --config <tmp>/switchboard.toml   (MALLOC_ARENA_MAX=2)`);
  say('   terminal: [channels.terminal], stdin an open pipe; telegram: [channels.telegram] polling the local Bot API peer (test/peers/telegram.ts, flood control off)');
  // The peer runs in this process: its event loop answering the daemon's getMe/getUpdates is part of the figure, as a platform's latency is.
  const peer = await startTelegramPeer({ flood: false });
  const telegramSection = `${peer.configSection()}allow = ["*"]\n`;
  const wall: number[] = [];
  const startup: number[] = [];
  const telegram: number[] = [];
  const node: number[] = [];
  let lastConfig = '';
  try {
    for (let run = 1; run <= COLD_RUNS; run++) {
      node.push(await nodeSpawnAndPrint());
      const config = writeConfig(tempDir('cold'), baseUrl);
      const started = await startDaemon(config);
      const code = await stopChild(started.child, 'SIGTERM');
      wall.push(started.wallMs);
      if (started.startupMs !== undefined) startup.push(started.startupMs);
      const tg = await startDaemon(writeConfig(tempDir('cold-tg'), baseUrl, telegramSection));
      await stopChild(tg.child, 'SIGTERM');
      telegram.push(tg.wallMs);
      say(`   run ${String(run).padStart(2)}: terminal ${fmt(started.wallMs)} ms (startupMs ${started.startupMs ?? 'n/a'}, exit ${code}), telegram ${fmt(tg.wallMs)} ms, node -e ${fmt(node.at(-1)!)} ms`);
      lastConfig = config;
    }
    say(`   spawn→ready, terminal   min / median / max: ${span(wall)} ms`);
    say(`   spawn→ready, telegram   min / median / max: ${span(telegram)} ms`);
    say(`   node -e "console.log(1)" min / median / max: ${span(node)} ms  (the same Node, spawn → line read)`);
    if (startup.length > 0) say(`   startupMs (terminal)    min / median / max: ${span(startup)} ms  (daemon's own figure: runDaemon() → ready)`);

    // Warm: the last run's data dir again (database exists, migrations already applied).
    const warm = await startDaemon(lastConfig);
    await stopChild(warm.child, 'SIGTERM');
    say(`   warm db (existing data dir): ${fmt(warm.wallMs)} ms spawn→ready, startupMs ${warm.startupMs ?? 'n/a'}`);
    say();

    say(`## 2. Idle, ${IDLE_SETTLE_MS / 1000} s after ready (/proc/<pid>/smaps_rollup: Rss, Anonymous = private; /proc/<pid>/status: Threads)`);
    const idleOf = async (label: string, config: string): Promise<Idle> => {
      const idle = await startDaemon(config);
      await sleep(IDLE_SETTLE_MS);
      const figures = idleFigures(idle.child.pid!);
      await stopChild(idle.child, 'SIGTERM');
      say(`   ${label.padEnd(9)} RSS ${fmt(figures.rss)} MB, private ${fmt(figures.anon)} MB, ${figures.threads} threads`);
      return figures;
    };
    const idleTerminal = await idleOf('terminal', writeConfig(tempDir('rss'), baseUrl));
    const idleTelegram = await idleOf('telegram', writeConfig(tempDir('rss-tg'), baseUrl, telegramSection));
    say();
    return { wall, startup, telegram, node, warmWall: warm.wallMs, warmStartup: warm.startupMs, idleTerminal, idleTelegram };
  } finally {
    await peer.close();
  }
}

// ---------------------------------------------------------------------------------------
// 3 + 4: an in-process Runtime with an in-memory channel.

/** A channel that records when each reply is sent; `push` is the one the supervisor hands over. */
interface BenchChannel extends Channel {
  readonly pushed: Promise<Push>;
  /** Called with the inbound id a reply answers and the time it was sent. */
  onSend: (replyTo: string | undefined, at: number) => void;
  sent: number;
}

function createBenchChannel(): BenchChannel {
  let givePush!: (push: Push) => void;
  const pushed = new Promise<Push>((resolve) => (givePush = resolve));
  const channel: BenchChannel = {
    name: 'bench',
    pushed,
    sent: 0,
    onSend: () => undefined,
    async listen(push: Push, signal: AbortSignal, link): Promise<void> {
      givePush(push);
      link.ready();
      if (signal.aborted) return;
      await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
    },
    async send(message: OutboundMessage): Promise<void> {
      const at = performance.now();
      channel.sent++;
      channel.onSend(message.replyTo, at);
    },
  };
  return channel;
}

const zeroLatencyAgent: TurnHandler = async ({ message }) => ({
  reply: 'ok',
  messages: [
    { role: 'user', content: message.text },
    { role: 'assistant', content: 'ok' },
  ],
});

const silentLog = (): Logger => pino({ level: 'silent' });

interface Rig {
  readonly runtime: Runtime;
  readonly channel: BenchChannel;
  readonly push: Push;
  readonly db: Db;
  close(): Promise<void>;
}

async function startRig(label: string, agent: TurnHandler, log: Logger = silentLog()): Promise<Rig> {
  const db = openDatabase(join(tempDir(label), 'switchboard.db'), { durability: 'normal' });
  const channel = createBenchChannel();
  const runtime = new Runtime({
    database: sqliteDatabase(db),
    log,
    channels: [channel],
    agent,
    historyTurns: 50,
    maxInFlight: 64,
    maxQueued: 1000,
    turnTimeoutMs: 300_000,
    shutdownGraceMs: 10_000,
    supervisor: defaultSupervisorOptions,
    delivery: defaultDeliveryOptions,
  });
  await runtime.start();
  await within(runtime.ready, READY_TIMEOUT_MS, 'runtime ready');
  const push = await channel.pushed;
  return {
    runtime,
    channel,
    push,
    db,
    close: async () => {
      await within(runtime.stop(), RUN_TIMEOUT_MS, 'runtime stop');
      db.close();
    },
  };
}

let messageCounter = 0;
function message(chat: string, text: string): InboundMessage {
  const id = `m${++messageCounter}`;
  return { channel: 'bench', account: 'bench', chat, id, sender: { id: `u-${chat}`, name: chat }, text, timestamp: Date.now() };
}

interface OverheadResult {
  readonly p50: number;
  readonly p99: number;
  readonly mean: number;
  readonly max: number;
}

async function benchOverhead(): Promise<OverheadResult> {
  say(`## 3. Per-message overhead, zero-latency turn handler (push → send, one at a time)`);
  const rig = await startRig('overhead', zeroLatencyAgent);
  try {
    const one = async (chat: string, i: number): Promise<number> => {
      const msg = message(chat, `hello ${i}`);
      const sent = new Promise<number>((resolve) => {
        rig.channel.onSend = (replyTo, at) => {
          if (replyTo === msg.id) resolve(at);
        };
      });
      const t0 = performance.now();
      const result = await rig.push(msg);
      if (result !== 'accepted') throw new Error(`push returned ${result}`);
      const at = await within(sent, MESSAGE_TIMEOUT_MS, `reply to ${msg.id}`);
      return at - t0;
    };
    for (let i = 0; i < OVERHEAD_WARMUP; i++) await one('warmup', i);
    const latencies: number[] = [];
    for (let i = 0; i < OVERHEAD_N; i++) latencies.push(await one('alice', i));
    const sorted = latencies.sort((a, b) => a - b);
    const result = { p50: percentile(sorted, 50), p99: percentile(sorted, 99), mean: mean(sorted), max: sorted.at(-1)! };
    say(`   N = ${OVERHEAD_N} (after ${OVERHEAD_WARMUP} warm-up), one conversation, history_turns 50, SQLite file, durability normal`);
    say(`   p50 ${fmt(result.p50, 3)} ms   p99 ${fmt(result.p99, 3)} ms   mean ${fmt(result.mean, 3)} ms   max ${fmt(result.max, 2)} ms`);
    say();
    return result;
  } finally {
    await rig.close();
  }
}

interface ThroughputResult {
  readonly perSecond: number;
  readonly ms: number;
}

/** Pushes `n` messages round-robin over `conversations` chats (awaiting backpressure) and times first push → last send. */
async function throughput(label: string, agent: TurnHandler, conversations: number, n: number, log?: Logger): Promise<ThroughputResult> {
  const rig = await startRig(label, agent, log);
  try {
    let sent = 0;
    let lastSendAt = 0;
    let allSent!: () => void;
    const done = new Promise<void>((resolve) => (allSent = resolve));
    rig.channel.onSend = (_replyTo, at) => {
      sent++;
      lastSendAt = at;
      if (sent === n) allSent();
    };
    const chats = Array.from({ length: conversations }, (_, i) => `chat${i}`);
    const messages = Array.from({ length: n }, (_, i) => message(chats[i % conversations]!, `message ${i}`));
    const heapBefore = process.memoryUsage().heapUsed;
    const t0 = performance.now();
    const producing = (async () => {
      for (const msg of messages) {
        const result = await rig.push(msg);
        if (result !== 'accepted') throw new Error(`push returned ${result}`);
      }
    })();
    await within(Promise.all([producing, done]), RUN_TIMEOUT_MS, `${label}: ${n} replies`);
    const ms = lastSendAt - t0;
    const heapAfter = process.memoryUsage().heapUsed;
    const { counters } = rig.runtime.health();
    const perSecond = (n / ms) * 1000;
    say(
      `   ${label.padEnd(34)} ${fmtInt(perSecond).padStart(7)} msg/s   (${n} msgs in ${fmt(ms, 0)} ms; answered ${counters.answered}, failed ${counters.failed}, sent ${counters.sent}; heapUsed ${(heapAfter >= heapBefore ? '+' : '')}${fmt((heapAfter - heapBefore) / 2 ** 20)} MB, no forced GC)`,
    );
    if (counters.failed > 0 || counters.answered !== n) say(`   ! ${label}: expected ${n} answered and 0 failed`);
    return { perSecond, ms };
  } finally {
    await rig.close();
  }
}

interface ThroughputResults {
  readonly byConversations: Map<number, ThroughputResult>;
  readonly logged: ThroughputResult;
  readonly http: ThroughputResult;
}

async function benchThroughput(baseUrl: string): Promise<ThroughputResults> {
  say(`## 4. Throughput (max_in_flight 64, max_queued 1000, push awaits backpressure; first push → last send)`);
  const byConversations = new Map<number, ThroughputResult>();
  for (const conversations of [1, 8, 64]) {
    byConversations.set(conversations, await throughput(`${conversations} conversation${conversations === 1 ? '' : 's'}, zero-latency`, zeroLatencyAgent, conversations, THROUGHPUT_N));
  }
  // The daemon logs a "turn done" line per message at info level: its cost, to /dev/null.
  const infoLog = pino({ level: 'info', base: { pid: process.pid } }, pino.destination({ dest: '/dev/null', sync: true }));
  const logged = await throughput('8 conversations, info JSON logs', zeroLatencyAgent, 8, THROUGHPUT_N, infoLog);

  const approvals = new ApprovalStore(sqliteDatabase(openDatabase(':memory:')));
  const agent = createAgent({
    provider: createOpenAIProvider({ baseUrl, model: 'bench', timeoutMs: 30_000 }),
    runner: createToolRunner({
      tools: [createClockTool() as unknown as Tool],
      validator: createArgsValidator(),
      decide: () => ({ kind: 'allow' }),
      alwaysApproved: () => false,
      timeoutMs: 60_000,
    }),
    approvals,
    name: 'Switchboard',
    instructions: '',
    workspace: tmpdir(),
    maxToolIterations: 10,
    toolCalling: 'native',
  });
  const http = await throughput('8 conversations, through HTTP model', agent, 8, HTTP_N);
  say('   (HTTP model: real agent + OpenAI provider → fake chat-completions server in a separate process, zero model latency)');
  say();
  return { byConversations, logged, http };
}

// ---------------------------------------------------------------------------------------

async function main(): Promise<void> {
  const watchdog = setTimeout(() => {
    process.stderr.write(`bench: still running after ${BENCH_TIMEOUT_MS / 1000} s; giving up\n`);
    cleanUp();
    process.exit(1);
  }, BENCH_TIMEOUT_MS);
  watchdog.unref();

  say('# Switchboard benchmark');
  say(`node ${process.version} (${process.execPath}), ${availableParallelism()} cpus available (${cpus().length} reported; ${cpus()[0]?.model ?? 'unknown cpu'}), ${process.platform}/${process.arch}`);
  say();

  const fake = await startFakeServerProcess(import.meta.filename);
  try {
    const cold = await benchColdStart(fake.baseUrl);
    // `--start-only`: sections 1 and 2 (start and idle), the figures issue 29's targets 1 and 2 name.
    const startOnly = process.argv.includes('--start-only');
    const overhead = startOnly ? undefined : await benchOverhead();
    const tp = startOnly ? undefined : await benchThroughput(fake.baseUrl);

    const rate = (c: number): string => fmtInt(tp?.byConversations.get(c)?.perSecond ?? Number.NaN);
    say('## Summary');
    say();
    say(`node ${process.version}, ${availableParallelism()} cpus`);
    say();
    say('| figure | value | target |');
    say('| --- | --- | --- |');
    say(`| cold start to ready, terminal (median of ${COLD_RUNS}) | ${fmt(median(cold.wall))} ms (min ${fmt(Math.min(...cold.wall))}, max ${fmt(Math.max(...cold.wall))}) | ≤ 90 ms |`);
    say(`| cold start to ready, Telegram against its peer (median) | ${fmt(median(cold.telegram))} ms (min ${fmt(Math.min(...cold.telegram))}, max ${fmt(Math.max(...cold.telegram))}) | ≤ 150 ms |`);
    say(`| node -e "console.log(1)", the same Node (median) | ${fmt(median(cold.node))} ms | the floor |`);
    say(`| startupMs reported by daemon (median) | ${cold.startup.length > 0 ? median(cold.startup) : 'n/a'} ms | |`);
    say(`| cold start, warm db | ${fmt(cold.warmWall)} ms (startupMs ${cold.warmStartup ?? 'n/a'}) | |`);
    const idle = (figures: Idle): string => `RSS ${fmt(figures.rss)} MB, private ${fmt(figures.anon)} MB, ${figures.threads} threads`;
    say(`| idle ${IDLE_SETTLE_MS / 1000} s after ready, terminal | ${idle(cold.idleTerminal)} | RSS ≤ 60, private ≤ 20 MB |`);
    say(`| idle ${IDLE_SETTLE_MS / 1000} s after ready, Telegram | ${idle(cold.idleTelegram)} | RSS ≤ 60, private ≤ 20 MB |`);
    if (overhead && tp) {
      say(`| overhead p50 / p99 | ${fmt(overhead.p50, 3)} / ${fmt(overhead.p99, 3)} ms (mean ${fmt(overhead.mean, 3)}) | p50 < 2 ms |`);
      say(`| throughput 1 / 8 / 64 conversations | ${rate(1)} / ${rate(8)} / ${rate(64)} msg/s | ≥ 1000 |`);
      say(`| throughput 8 conversations, info logging | ${fmtInt(tp.logged.perSecond)} msg/s | |`);
      say(`| throughput 8 conversations, through HTTP model | ${fmtInt(tp.http.perSecond)} msg/s | |`);
    }
  } finally {
    await fake.close();
    for (const child of [...children]) await stopChild(child, 'SIGKILL');
    removeTempDirs();
    clearTimeout(watchdog);
  }
}

await runBench('bench', main);
