/**
 * Web console benchmark: prints figures, never fails on speed.
 *
 *   npm run bench:console      (builds dist/ and dist/console first)
 *
 * 1. start-up ("start" to "ready") and idle RSS ~2 s after ready, before any request to the
 *    console, with `[gateway] console = false` and `= true` (5 runs each, a Telegram peer and
 *    the scripted model): the console is loaded on its first request, so these should match;
 * 2. the first request (which loads the console) and first paint of the sign-in page in
 *    Debian's chromium on loopback, cold (first request) and warm (a reload);
 * 3. the JavaScript the page loads, gzipped.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { startFakeOpenAI } from '../test/fixtures/fake-openai.ts';
import { startTelegramPeer } from '../test/peers/telegram.ts';
import { freePort } from '../test/support/net.ts';

const ROOT = join(import.meta.dirname, '..');
const CLI = join(ROOT, 'dist', 'app', 'cli.js');
const RUNS = 7;
const say = (line: string): void => void process.stdout.write(`${line}\n`);
const median = (values: number[]): number => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

const model = await startFakeOpenAI();
const peer = await startTelegramPeer();

interface Started {
  readonly port: number;
  /** The ready line's startupMs (from runDaemon's start). */
  readonly startupMs: number;
  /** From spawning the process to the ready line (Node's own start and the imports included). */
  readonly wallMs: number;
  readonly rssMb: number;
  readonly pid: number;
  stop(): Promise<void>;
}

async function start(consoleOn: boolean): Promise<Started> {
  const dir = mkdtempSync(join(tmpdir(), 'sb-bench-console-'));
  const port = await freePort();
  const file = join(dir, 'switchboard.toml');
  writeFileSync(
    file,
    `data_dir = "./data"\n[provider]\nkind = "openai"\nbase_url = "${model.baseUrl}"\nmodel = "m"\n[log]\nformat = "json"\n[gateway]\nlisten = "127.0.0.1:${port}"\ntoken = "bench-token-0123456789abcdef"\nconsole = ${consoleOn}\n${peer.configSection()}allow = ["*"]\n`,
  );
  const spawned = performance.now();
  const child = spawn(process.execPath, [CLI, 'start', '--config', file], { env: { ...process.env, MALLOC_ARENA_MAX: '2' }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  const startupMs = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no ready line:\n${out}`)), 20_000);
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      const ready = /"msg":"ready"/.test(out) ? /"startupMs":(\d+)/.exec(out) : null;
      if (ready) {
        clearTimeout(timer);
        resolve(Number(ready[1]));
      }
    });
    child.stderr.resume();
  });
  const wallMs = Math.round(performance.now() - spawned);
  await new Promise((resolve) => setTimeout(resolve, 2000));
  const rssMb = Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${child.pid}/status`, 'utf8'))?.[1] ?? 0) / 1024;
  return {
    port,
    startupMs,
    wallMs,
    rssMb,
    pid: child.pid!,
    stop: async () => {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

say(`console benchmark (Node ${process.version}, ${RUNS} runs each, alternating)`);
const runs = new Map<boolean, Started[]>([[false, []], [true, []]]);
for (let i = 0; i < RUNS; i++) {
  for (const consoleOn of [false, true]) {
    const daemon = await start(consoleOn);
    runs.get(consoleOn)!.push(daemon);
    await daemon.stop();
  }
}
for (const [consoleOn, list] of runs) {
  const times = list.map((r) => r.startupMs);
  say(
    `  console = ${String(consoleOn).padEnd(5)}  start to ready: median ${median(times)} ms (${times.join(', ')}), process spawn to ready median ${median(list.map((r) => r.wallMs))} ms;` +
      ` idle RSS before any request: median ${median(list.map((r) => r.rssMb)).toFixed(1)} MB`,
  );
}

const daemon = await start(true);
try {
  const { chromium } = await import('playwright-core');
  const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox'] });
  const page = await browser.newPage();
  const paint = async (): Promise<number> => {
    await page.waitForFunction(() => performance.getEntriesByName('first-contentful-paint').length > 0);
    return page.evaluate(() => performance.getEntriesByName('first-contentful-paint')[0]!.startTime);
  };
  const started = performance.now();
  await page.goto(`http://127.0.0.1:${daemon.port}/`);
  const cold = await paint();
  const firstLoad = performance.now() - started;
  await page.locator('#token').waitFor();
  const warm: number[] = [];
  for (let i = 0; i < 5; i++) {
    await page.reload();
    warm.push(await paint());
    await page.locator('#token').waitFor();
  }
  say(`  first paint on loopback: cold (the request that loads the console) ${cold.toFixed(0)} ms, navigation done ${firstLoad.toFixed(0)} ms; warm median ${median(warm).toFixed(0)} ms`);
  await browser.close();
  say(`  daemon RSS with the console loaded and a page open: ${(Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${daemon.pid}/status`, 'utf8'))?.[1] ?? 0) / 1024).toFixed(1)} MB`);
} finally {
  await daemon.stop();
}
const assets = join(ROOT, 'dist', 'console', 'assets');
const js = readdirSync(assets).filter((name) => name.endsWith('.js')).reduce((sum, name) => sum + gzipSync(readFileSync(join(assets, name)), { level: 9 }).length, 0);
say(`  JavaScript gzipped: ${(js / 1024).toFixed(1)} KB (budget 120 KB)`);
await peer.close();
await model.close();
