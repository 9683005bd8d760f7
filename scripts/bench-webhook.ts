/**
 * Webhook end to end: signed requests through the gateway to the reply. Prints figures, never fails on them.
 *
 *   npm run bench:webhook                                  3 runs of 4,000 messages after 500 of warm-up
 *   npm run bench:webhook -- --runs 1 --messages 2000     a quicker look
 *   npm run bench:webhook -- --dist /path/to/other/dist   the same against another build (before/after)
 *   npm run bench:webhook -- --cpu-prof                   the daemon writes a .cpuprofile on exit
 *   npm run bench:webhook -- --config '[memory]\nauto_save = false'   extra TOML for the daemon
 *
 * Each run starts the compiled daemon (`dist/app/cli.js start`, with MALLOC_ARENA_MAX=2 as
 * bin/switchboard sets it) with only the webhook channel and the gateway, against the fake model
 * endpoint in a process of its own answering at once. 16 senders post signed requests over
 * 256 conversations and wait for each 200 reply (synchronous reply mode). After the warm-up,
 * it counts messages per second and the request latency p50 / p99. Logging stays at info, as
 * people run it.
 */
import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { Agent, request as httpRequest } from 'node:http';
import { availableParallelism } from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';
import { sign } from '../channels/webhook/signature.ts';
import { CLI, children, fmt, fmtInt, median, percentile, runBench, say, startFakeServerProcess, stopChild, tempDir, within } from './bench-support.ts';
import { freePort } from '../test/support/net.ts';

const SECRET = 'bench-webhook-secret';
const READY_TIMEOUT_MS = 20_000;
const REQUEST_TIMEOUT_MS = 60_000;

interface Options {
  readonly runs: number;
  readonly messages: number;
  readonly warmup: number;
  readonly senders: number;
  readonly conversations: number;
  readonly cli: string;
  readonly cpuProf: boolean;
  /** Extra TOML appended to the daemon's config (e.g. to compare settings). */
  readonly extraConfig: string;
}

interface RunResult {
  readonly msgPerSecond: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly failed: number;
  /** CPU ms per message over the measured phase: the daemon (and its main thread alone), this bench's senders, the fake model. */
  readonly cpu: { readonly daemon: number; readonly main: number; readonly client: number; readonly model: number };
  /** Log lines the daemon wrote per measured message. */
  readonly logLines: number;
}

/** POSTs one signed request to the daemon's /webhook and reads its whole answer; resolves to the status. */
function postSigned(agent: Agent, port: number, key: string, body: string): Promise<number> {
  return new Promise((resolveStatus, reject) => {
    const request = httpRequest(
      { agent, host: '127.0.0.1', port, path: '/webhook', method: 'POST', timeout: REQUEST_TIMEOUT_MS, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), 'idempotency-key': key, 'x-switchboard-signature': sign(SECRET, { key, body }) } },
      (response) => {
        response.on('data', () => {});
        response.on('end', () => resolveStatus(response.statusCode ?? 0));
        response.on('error', reject);
      },
    );
    request.on('timeout', () => request.destroy(new Error('webhook request timed out')));
    request.on('error', reject);
    request.end(body);
  });
}

/** CPU time (user + system) a process (or, with `thread`, one of its threads) has used so far, in ms, from /proc (Linux). */
function cpuMs(pid: number, thread?: number): number {
  try {
    const fields = readFileSync(thread === undefined ? `/proc/${pid}/stat` : `/proc/${pid}/task/${thread}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS;
  } catch {
    return NaN;
  }
}
const CLOCK_TICKS = 100;

function options(): Options {
  const { values } = parseArgs({
    options: {
      runs: { type: 'string', default: '3' },
      messages: { type: 'string', default: '4000' },
      warmup: { type: 'string', default: '500' },
      senders: { type: 'string', default: '16' },
      conversations: { type: 'string', default: '256' },
      dist: { type: 'string' },
      'cpu-prof': { type: 'boolean', default: false },
      config: { type: 'string', default: '' },
    },
  });
  return {
    runs: Number(values.runs),
    messages: Number(values.messages),
    warmup: Number(values.warmup),
    senders: Number(values.senders),
    conversations: Number(values.conversations),
    cli: values.dist === undefined ? CLI : join(resolve(values.dist), 'app', 'cli.js'),
    cpuProf: values['cpu-prof'],
    extraConfig: values.config.replaceAll('\\n', '\n'),
  };
}

function writeConfig(dir: string, modelUrl: string, port: number, extra: string): string {
  const file = join(dir, 'switchboard.toml');
  writeFileSync(
    file,
    ['data_dir = "./data"', '[log]', 'level = "info"', 'format = "json"', '[provider]', 'kind = "openai"', `base_url = "${modelUrl}"`, 'model = "bench"', '[gateway]', `listen = "127.0.0.1:${port}"`, '[channels.webhook]', `secret = "${SECRET}"`, extra, ''].join('\n'),
  );
  return file;
}

async function run(opts: Options, modelUrl: string, modelPid: number, index: number): Promise<RunResult> {
  const port = await freePort();
  const dir = tempDir('webhook');
  const config = writeConfig(dir, modelUrl, port, opts.extraConfig);
  const args = [...(opts.cpuProf ? ['--cpu-prof', `--cpu-prof-dir=${join(process.cwd(), 'bench-results', 'webhook-prof')}`] : []), opts.cli, 'start', '--config', config];
  const child = spawn(process.execPath, args, { cwd: dir, env: { ...process.env, MALLOC_ARENA_MAX: process.env.MALLOC_ARENA_MAX ?? '2', SWITCHBOARD_LOG_LEVEL: undefined }, stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(child);
  child.stderr!.pipe(process.stderr);
  const lines = createInterface({ input: child.stdout! });
  let logLines = 0;
  await within(
    new Promise<void>((resolveReady, reject) => {
      lines.on('line', (line) => {
        logLines++;
        if (line.includes('"msg":"ready"')) resolveReady();
      });
      child.once('exit', (code) => reject(new Error(`daemon exited before ready (code ${code})`)));
    }),
    READY_TIMEOUT_MS,
    'daemon ready',
  );

  // node:http with one kept-alive socket per sender: fetch (undici) cost this bench twice the
  // CPU per request, taken from the same 2 cores as the daemon it measures.
  const agent = new Agent({ keepAlive: true, maxSockets: opts.senders });
  let next = 0;
  let failed = 0;
  const latencies: number[] = [];
  const post = async (n: number, measured: boolean): Promise<void> => {
    const conversation = n % opts.conversations;
    const key = `run${index}-${n}`;
    const body = JSON.stringify({ sender: `person-${conversation}`, conversation: `bench-${conversation}`, text: `message ${n}: how is the weather in town ${conversation} today?` });
    const started = performance.now();
    const status = await postSigned(agent, port, key, body);
    if (status !== 200) failed++;
    else if (measured) latencies.push(performance.now() - started);
  };
  const phase = async (count: number, measured: boolean): Promise<number> => {
    const end = next + count;
    const t0 = performance.now();
    const sender = async (): Promise<void> => {
      while (next < end) await post(next++, measured).catch(() => failed++);
    };
    await Promise.all(Array.from({ length: opts.senders }, sender));
    return (performance.now() - t0) / 1000;
  };
  await phase(opts.warmup, false);
  const linesBefore = logLines;
  // the main thread's id is the process id: the event loop, where the daemon's per-message work queues up
  const before = { daemon: cpuMs(child.pid!), main: cpuMs(child.pid!, child.pid!), client: process.cpuUsage(), model: cpuMs(modelPid) };
  const seconds = await phase(opts.messages, true);
  const client = process.cpuUsage(before.client);
  const per = (ms: number): number => ms / opts.messages;
  const cpu = { daemon: per(cpuMs(child.pid!) - before.daemon), main: per(cpuMs(child.pid!, child.pid!) - before.main), client: per((client.user + client.system) / 1000), model: per(cpuMs(modelPid) - before.model) };
  await new Promise((resolveLines) => setTimeout(resolveLines, 200)); // the last lines still in the pipe
  const lineCount = (logLines - linesBefore) / opts.messages;
  agent.destroy();
  lines.close();
  await stopChild(child, 'SIGTERM');
  latencies.sort((a, b) => a - b);
  return { msgPerSecond: latencies.length / seconds, p50Ms: percentile(latencies, 50), p99Ms: percentile(latencies, 99), failed, cpu, logLines: lineCount };
}

async function main(): Promise<void> {
  const opts = options();
  say('# Switchboard webhook end-to-end benchmark');
  say(`node ${process.version}, ${availableParallelism()} cpus; daemon ${opts.cli}; ${opts.runs} runs × ${fmtInt(opts.messages)} messages after ${fmtInt(opts.warmup)} of warm-up, ${opts.senders} senders, ${opts.conversations} conversations, model at zero latency`);
  const fake = await startFakeServerProcess(import.meta.filename);
  const results: RunResult[] = [];
  try {
    for (let i = 0; i < opts.runs; i++) {
      const result = await run(opts, fake.baseUrl, fake.pid, i);
      results.push(result);
      say(`  run ${i + 1}: ${fmt(result.msgPerSecond)} msg/s  p50 ${fmt(result.p50Ms)} ms  p99 ${fmt(result.p99Ms)} ms  ${result.failed} failed; CPU ms/msg daemon ${fmt(result.cpu.daemon, 2)} (main thread ${fmt(result.cpu.main, 2)}), senders ${fmt(result.cpu.client, 2)}, model ${fmt(result.cpu.model, 2)}; ${fmt(result.logLines, 2)} log lines/msg`);
    }
  } finally {
    await fake.close();
  }
  const rates = results.map((r) => r.msgPerSecond).sort((a, b) => a - b);
  say();
  say(`msg/s min / median / max: ${fmt(rates[0]!)} / ${fmt(median(rates))} / ${fmt(rates.at(-1)!)} (goal >= 500)`);
  say(`latency p50 median ${fmt(median(results.map((r) => r.p50Ms)))} ms, p99 median ${fmt(median(results.map((r) => r.p99Ms)))} ms`);
}

await runBench('bench:webhook', main);
