/**
 * Soak benchmark: does memory stay flat under traffic? Prints figures, never fails on them.
 *
 *   npm run bench:soak                       50,000 messages as fast as 16 senders go, then 60 s idle
 *   npm run bench:soak -- --messages 5000    a shorter run
 *   npm run bench:soak -- --rate 20 --minutes 20   a steady 20 msg/s for 20 minutes
 *   npm run bench:soak -- --dist /path/to/dist     another build (before/after in one sitting)
 *   npm run bench:soak -- --heap-snapshots 5000,50000   the daemon writes V8 heap snapshots there
 *
 * Runs the compiled daemon (`dist/app/cli.js start`, as users do) with the webhook channel,
 * memory auto-save on and no embeddings, against the fake model endpoint in a process of its
 * own. Signed webhook requests go to 64 conversations; every 5 s it samples the RSS of the
 * daemon and of its whole process tree, the daemon's event-loop lag (p99 / max since the
 * previous sample, from /metrics) and its V8 heap. It writes samples.csv and rss.png to
 * bench-results/soak-<time>/ (not committed) and prints the table the README quotes.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';
import { sign } from '../channels/webhook/signature.ts';
import {
  CLI,
  ROOT,
  children,
  fmt,
  fmtInt,
  percentile,
  processTree,
  readRssMb,
  runBench,
  say,
  sleep,
  startFakeServerProcess,
  stopChild,
  tempDir,
  within,
} from './bench-support.ts';
import { freePort } from '../test/support/net.ts';
import { lineChartPng } from './plot-png.ts';
import { type MapsMb, readMapsMb } from './soak-maps.ts';

const SECRET = 'soak-secret';
const SAMPLE_MS = 5_000;
const READY_TIMEOUT_MS = 20_000;
const REQUEST_TIMEOUT_MS = 60_000;

interface Options {
  readonly messages: number;
  readonly conversations: number;
  readonly senders: number;
  /** Messages per second; 0 = as fast as the senders go. */
  readonly rate: number;
  /** With a rate: how long to send. */
  readonly minutes: number;
  readonly idleSeconds: number;
  /** Extra TOML appended to the daemon's config (e.g. to compare settings). */
  readonly extraConfig: string;
  /** The daemon's entry point (dist/app/cli.js of this checkout unless --dist). */
  readonly cli: string;
  /** Answered counts at which the daemon writes a heap snapshot (SIGUSR2, --heapsnapshot-signal). */
  readonly heapSnapshots: readonly number[];
}

interface Sample {
  readonly seconds: number;
  readonly sent: number;
  readonly rssMb: number;
  /** Anonymous memory (heaps, malloc) — the rest of RSS is file-backed (code, mapped files). */
  readonly anonMb: number;
  readonly treeMb: number;
  readonly heapMb: number;
  /** V8 heap committed (all spaces) and external memory of the main isolate: anon minus these is malloc, workers and SQLite. */
  readonly heapTotalMb: number;
  readonly externalMb: number;
  readonly lagP99Ms: number;
  readonly lagMaxMs: number;
  /** RSS by kind of mapping (soak-maps.ts). */
  readonly maps: MapsMb;
}

function options(): Options {
  const { values } = parseArgs({
    options: {
      messages: { type: 'string', default: '50000' },
      conversations: { type: 'string', default: '64' },
      senders: { type: 'string', default: '16' },
      rate: { type: 'string', default: '0' },
      minutes: { type: 'string', default: '20' },
      idle: { type: 'string', default: '60' },
      config: { type: 'string', default: '' },
      dist: { type: 'string' },
      'heap-snapshots': { type: 'string', default: '' },
    },
  });
  const rate = Number(values.rate);
  return {
    messages: rate > 0 ? Math.round(rate * 60 * Number(values.minutes)) : Number(values.messages),
    conversations: Number(values.conversations),
    senders: Number(values.senders),
    rate,
    minutes: Number(values.minutes),
    idleSeconds: Number(values.idle),
    extraConfig: values.config.replaceAll('\\n', '\n'),
    cli: values.dist === undefined ? CLI : join(resolve(values.dist), 'app', 'cli.js'),
    heapSnapshots: values['heap-snapshots'] === '' ? [] : values['heap-snapshots'].split(',').map(Number),
  };
}

function writeConfig(dir: string, modelUrl: string, port: number, extra: string): string {
  const file = join(dir, 'switchboard.toml');
  writeFileSync(
    file,
    [
      'data_dir = "./data"',
      '[log]',
      'level = "info"',
      'format = "json"',
      '[provider]',
      'kind = "openai"',
      `base_url = "${modelUrl}"`,
      'model = "soak"',
      '[gateway]',
      `listen = "127.0.0.1:${port}"`,
      '[memory]',
      'auto_save = true',
      '[channels.webhook]',
      `secret = "${SECRET}"`,
      extra,
      '',
    ].join('\n'),
  );
  return file;
}

/** The daemon's `switchboard_event_loop_lag_seconds` p99 / max and V8 heap, from /metrics. */
async function scrape(base: string): Promise<{ lagP99Ms: number; lagMaxMs: number; heapMb: number; heapTotalMb: number; externalMb: number }> {
  const text = await (await fetch(`${base}/metrics`, { signal: AbortSignal.timeout(4_000) })).text();
  const value = (pattern: RegExp): number => {
    const match = pattern.exec(text);
    return match ? Number(match[1]) : Number.NaN;
  };
  return {
    lagP99Ms: value(/^switchboard_event_loop_lag_seconds\{stat="p99"\} (\S+)/m) * 1000,
    lagMaxMs: value(/^switchboard_event_loop_lag_seconds\{stat="max"\} (\S+)/m) * 1000,
    heapMb: value(/^(?:switchboard_heap_used_bytes|nodejs_heap_size_used_bytes)(?:\{[^}]*\})? (\S+)/m) / 1024 / 1024,
    heapTotalMb: value(/^nodejs_heap_size_total_bytes(?:\{[^}]*\})? (\S+)/m) / 1024 / 1024,
    externalMb: value(/^nodejs_external_memory_bytes(?:\{[^}]*\})? (\S+)/m) / 1024 / 1024,
  };
}

async function main(): Promise<void> {
  const opts = options();
  const stamp = new Date().toISOString().replaceAll(':', '-').replace(/\..*/, '');
  const outDir = join(ROOT, 'bench-results', `soak-${stamp}`);
  mkdirSync(outDir, { recursive: true });
  say('# Switchboard soak benchmark');
  say(`node ${process.version}, ${availableParallelism()} cpus; ${fmtInt(opts.messages)} messages, ${opts.conversations} conversations, ${opts.senders} senders, ${opts.rate > 0 ? `${opts.rate} msg/s` : 'as fast as they go'}; then ${opts.idleSeconds} s idle`);
  say(`results: ${outDir}`);

  const fake = await startFakeServerProcess(import.meta.filename);
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const dir = tempDir('soak');
  const config = writeConfig(dir, fake.baseUrl, port, opts.extraConfig);
  // As bin/switchboard, the systemd unit and the image run it (override: MALLOC_ARENA_MAX=… npm run bench:soak).
  const arenas = process.env.MALLOC_ARENA_MAX ?? '2';
  say(`daemon: node ${opts.cli} start, MALLOC_ARENA_MAX=${arenas}`);
  const snapshotArgs = opts.heapSnapshots.length > 0 ? ['--heapsnapshot-signal=SIGUSR2', `--diagnostic-dir=${outDir}`] : [];
  const child = spawn(process.execPath, [...snapshotArgs, opts.cli, 'start', '--config', config], { cwd: dir, env: { ...process.env, MALLOC_ARENA_MAX: arenas, SWITCHBOARD_LOG_LEVEL: undefined }, stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(child);
  child.stderr!.pipe(process.stderr);
  const lines = createInterface({ input: child.stdout! });
  const errorLines: string[] = [];
  await within(
    new Promise<void>((resolve, reject) => {
      lines.on('line', (line) => {
        if (line.includes('"msg":"ready"')) resolve();
        if (/"level":(50|60)/.test(line) && errorLines.length < 20) errorLines.push(line);
      });
      child.once('exit', (code) => reject(new Error(`daemon exited before ready (code ${code})`)));
    }),
    READY_TIMEOUT_MS,
    'daemon ready',
  );
  const pid = child.pid!;
  await sleep(2_000);
  const idleRss = readRssMb(pid).rss;
  const idleMaps = readMapsMb(pid);
  await scrape(base); // resets the lag window
  say(`idle RSS after ready: ${fmt(idleRss)} MB`);

  const samples: Sample[] = [];
  const t0 = performance.now();
  let sent = 0;
  let done = 0;
  let failed = 0;
  const takeSample = async (): Promise<void> => {
    const tree = processTree(pid)
      .filter((p) => p !== fake.pid)
      .reduce((sum, p) => {
        try {
          return sum + readRssMb(p).rss;
        } catch {
          return sum;
        }
      }, 0);
    const metrics = await scrape(base).catch(() => ({ lagP99Ms: Number.NaN, lagMaxMs: Number.NaN, heapMb: Number.NaN, heapTotalMb: Number.NaN, externalMb: Number.NaN }));
    const own = readRssMb(pid);
    const sample = { seconds: (performance.now() - t0) / 1000, sent: done, rssMb: own.rss, anonMb: own.anon, treeMb: tree, ...metrics, maps: readMapsMb(pid) };
    samples.push(sample);
    say(`  ${fmt(sample.seconds, 0).padStart(5)} s  ${fmtInt(done).padStart(7)} answered  RSS ${fmt(sample.rssMb)} MB (anon ${fmt(sample.anonMb)})  tree ${fmt(sample.treeMb)} MB  heap ${fmt(sample.heapMb)} of ${fmt(sample.heapTotalMb)} MB  ext ${fmt(sample.externalMb)} MB  lag p99 ${fmt(sample.lagP99Ms)} ms max ${fmt(sample.lagMaxMs)} ms`);
  };
  await takeSample();
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      await sleep(SAMPLE_MS);
      if (sampling) await takeSample();
    }
  })();

  const post = async (n: number): Promise<void> => {
    const conversation = n % opts.conversations;
    const body = JSON.stringify({ sender: `person-${conversation}`, conversation: `soak-${conversation}`, text: `message ${n}: how is the weather in town ${conversation} today?` });
    const response = await fetch(`${base}/webhook`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': `soak-${n}`, 'x-switchboard-signature': sign(SECRET, { key: `soak-${n}`, body }) },
      body,
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
    });
    await response.arrayBuffer();
    if (response.status === 200) done++;
    else failed++;
    if (opts.heapSnapshots.includes(done)) child.kill('SIGUSR2');
  };
  const sender = async (): Promise<void> => {
    for (;;) {
      const n = sent++;
      if (n >= opts.messages) return;
      if (opts.rate > 0) {
        const due = t0 + (n / opts.rate) * 1000;
        const wait = due - performance.now();
        if (wait > 0) await sleep(wait);
      }
      await post(n).catch(() => failed++);
    }
  };
  await Promise.all(Array.from({ length: opts.senders }, sender));
  const sendSeconds = (performance.now() - t0) / 1000;
  const endIndex = samples.length;
  say(`sent ${fmtInt(opts.messages)} in ${fmt(sendSeconds)} s (${fmtInt(done / sendSeconds)} msg/s answered, ${failed} failed); idling ${opts.idleSeconds} s`);
  await sleep(opts.idleSeconds * 1000);
  sampling = false;
  await sampler;
  await takeSample();
  await stopChild(child, 'SIGTERM');
  await fake.close();

  // Figures.
  const at = (count: number): Sample | undefined => samples.find((s) => s.sent >= count);
  const during = samples.slice(0, endIndex + 1);
  // The issue's yardstick: from the first 5,000 messages on (runs under 10,000: from half of them).
  const afterWarm = samples.filter((s) => s.sent >= Math.min(5_000, opts.messages / 2));
  const warm = afterWarm[0];
  const last = samples.at(-1)!;
  const maxRss = Math.max(...samples.map((s) => s.rssMb));
  const lags = during.map((s) => s.lagP99Ms).filter(Number.isFinite).sort((a, b) => a - b);
  const band = warm ? afterWarm.map((s) => ((s.rssMb - warm.rssMb) / warm.rssMb) * 100) : [];
  writeFileSync(join(outDir, 'samples.csv'), ['seconds,answered,rss_mb,anon_mb,tree_mb,heap_mb,heap_total_mb,external_mb,lag_p99_ms,lag_max_ms', ...samples.map((s) => [s.seconds, s.sent, s.rssMb, s.anonMb, s.treeMb, s.heapMb, s.heapTotalMb, s.externalMb, s.lagP99Ms, s.lagMaxMs].map((v) => fmt(v, 2)).join(','))].join('\n') + '\n');
  const png = lineChartPng({
    title: `SWITCHBOARD SOAK: RSS MB OVER MINUTES, ${fmtInt(opts.messages)} MSGS${opts.rate > 0 ? ` AT ${opts.rate}/S` : ''}`,
    xLabel: 'MIN',
    series: [
      { name: 'TREE', color: [234, 88, 12], points: samples.map((s) => [s.seconds / 60, s.treeMb]) },
      { name: 'RSS', color: [37, 99, 235], points: samples.map((s) => [s.seconds / 60, s.rssMb]) },
      { name: 'HEAP', color: [22, 163, 74], points: samples.map((s) => [s.seconds / 60, s.heapMb]).filter(([, y]) => Number.isFinite(y)) as Array<[number, number]> },
    ],
    marks: [{ x: sendSeconds / 60, label: 'IDLE' }],
  });
  writeFileSync(join(outDir, 'rss.png'), png);
  const row = (label: string, s: Sample | undefined): string =>
    `| ${label} | ${s ? fmt(s.rssMb) : 'n/a'} MB | ${s ? fmt(s.anonMb) : 'n/a'} MB | ${s ? fmt(s.treeMb) : 'n/a'} MB | ${s ? fmt(s.heapMb) : 'n/a'} MB | ${s ? fmt(s.heapTotalMb) : 'n/a'} MB | ${s ? fmt(s.externalMb) : 'n/a'} MB |`;
  say();
  say('## Summary');
  say();
  say('| point | RSS | anon | process tree | V8 heap used | V8 heap committed | external |');
  say('| --- | --- | --- | --- | --- | --- | --- |');
  say(`| idle at start | ${fmt(idleRss)} MB | | | | | |`);
  for (const count of [5_000, 25_000, 50_000].filter((c) => c <= opts.messages)) say(row(`${fmtInt(count)} answered`, at(count)));
  say(row(`end of sending (${fmtInt(done)})`, samples[endIndex]));
  say(row(`after ${opts.idleSeconds} s idle`, last));
  say();
  // Where the growth is: each kind of mapping at idle, at 5,000 and at the highest RSS.
  const highest = samples.reduce((a, b) => (b.rssMb > a.rssMb ? b : a));
  const warmAt = at(Math.min(5_000, opts.messages));
  const kinds: ReadonlyArray<[keyof MapsMb, string]> = [
    ['v8', 'other anonymous (V8 heaps and code of both isolates, stacks)'],
    ['malloc', 'malloc ([heap] and arenas: SQLite, V8 zones, libuv)'],
    ['nodeBinary', 'node binary file pages'],
    ['other', 'other files (libraries, addon)'],
  ];
  say();
  say(`| RSS by mapping | idle | ${fmtInt(warmAt?.sent ?? 0)} answered | highest (${fmtInt(highest.sent)} answered) | highest − idle |`);
  say('| --- | --- | --- | --- | --- |');
  for (const [kind, label] of kinds) say(`| ${label} | ${fmt(idleMaps[kind])} MB | ${warmAt ? fmt(warmAt.maps[kind]) : 'n/a'} MB | ${fmt(highest.maps[kind])} MB | ${fmt(highest.maps[kind] - idleMaps[kind])} MB |`);
  say();
  say(`- RSS band after the first ${fmtInt(warm?.sent ?? 0)} messages: ${fmt(Math.min(...band))} % … +${fmt(Math.max(...band))} % (goal ±5 %)`);
  say(`- max RSS ${fmt(maxRss)} MB = idle + ${fmt(maxRss - idleRss)} MB (goal ≤ +50 MB)`);
  say(`- event-loop lag p99 per 5 s window: median ${fmt(percentile(lags, 50))} ms, worst ${fmt(lags.at(-1) ?? Number.NaN)} ms (goal < 50 ms); worst max ${fmt(Math.max(...during.map((s) => s.lagMaxMs).filter(Number.isFinite)))} ms`);
  say(`- throughput ${fmtInt(done / sendSeconds)} msg/s answered (${fmtInt(done)} of ${fmtInt(opts.messages)}, ${failed} failed)`);
  if (errorLines.length > 0) say(`- daemon error lines (first ${errorLines.length}):\n    ${errorLines.join('\n    ')}`);
  say(`- files: ${join(outDir, 'samples.csv')}, ${join(outDir, 'rss.png')}`);
}

await runBench('bench:soak', main);
