/**
 * Channel benchmark: prints figures, never fails on speed.
 *
 *   npm run bench:channels      (builds dist/ first)
 *
 * For Telegram, Discord and Slack, each against its local test peer (test/peers/) and a
 * zero-latency scripted model:
 * 1. reply latency: a person's DM posted on the peer → the bot's reply recorded by the peer
 *    (peer → daemon → model → peer), 200 messages one after another, p50 / p99;
 * 2. start-up with all three configured: `start` to "ready" (every channel connected), 5 runs;
 * 3. idle RSS with all three connected, ~3 s after ready.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ChatPeer } from '../test/contracts/chat-channel.ts';
import { startFakeOpenAI } from '../test/fixtures/fake-openai.ts';
import { startDiscordPeer } from '../test/peers/discord.ts';
import { startSlackPeer } from '../test/peers/slack.ts';
import { startTelegramPeer } from '../test/peers/telegram.ts';

const ROOT = join(import.meta.dirname, '..');
const CLI = existsSync(join(ROOT, 'dist', 'app', 'cli.js')) ? join(ROOT, 'dist', 'app', 'cli.js') : join(ROOT, 'app', 'cli.ts');
const LATENCY_N = 200;
const STARTS = 5;

const peers: Record<string, () => Promise<ChatPeer>> = { telegram: startTelegramPeer, discord: startDiscordPeer, slack: startSlackPeer };
const children = new Set<ChildProcess>();
const dirs: string[] = [];
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

function percentile(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

async function startDaemon(config: string): Promise<{ child: ChildProcess; readyMs: number }> {
  const dir = mkdtempSync(join(tmpdir(), 'switchboard-bench-ch-'));
  dirs.push(dir);
  const file = join(dir, 'switchboard.toml');
  writeFileSync(file, config);
  const started = performance.now();
  const child = spawn(process.execPath, [CLI, 'start', '--config', file], { env: { ...process.env, TEST_MODEL_KEY: 'sk-bench', SWITCHBOARD_LOG_LEVEL: 'info' }, stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(child);
  let out = '';
  child.stderr!.on('data', () => undefined);
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`daemon not ready in 30 s:\n${out.slice(-3000)}`)), 30_000);
    child.stdout!.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      if (/"msg":"ready"/.test(out)) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.on('exit', (code) => reject(new Error(`daemon exited (${code}) before ready:\n${out.slice(-3000)}`)));
  });
  return { child, readyMs: performance.now() - started };
}

async function stopDaemon(child: ChildProcess): Promise<void> {
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  await exited;
  children.delete(child);
}

const base = (modelUrl: string): string =>
  `data_dir = "./data"\n[log]\nformat = "json"\n[agent]\nname = "Bench"\n[provider]\nkind = "openai"\nbase_url = "${modelUrl}"\nmodel = "bench"\napi_key = "\${TEST_MODEL_KEY}"\n[memory]\nbackend = "none"\n`;

async function main(): Promise<void> {
  const model = await startFakeOpenAI();
  console.log(`Switchboard channel benchmark — ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, Node ${process.version}\n`);

  console.log(`reply latency, peer → daemon → zero-latency model → peer (${LATENCY_N} DMs one after another):`);
  for (const [name, start] of Object.entries(peers)) {
    const peer = await start();
    const { child } = await startDaemon(`${base(model.baseUrl)}${peer.configSection()}allow = ["*"]\n`);
    const dm = { kind: 'dm', user: 'alice' } as const;
    const times: number[] = [];
    for (let i = 0; i < LATENCY_N + 20; i++) {
      const before = peer.botMessages(dm).length;
      const t0 = performance.now();
      await peer.post('alice', dm, `ping ${i}`);
      const deadline = Date.now() + 10_000;
      while (peer.botMessages(dm).length === before) {
        if (Date.now() > deadline) throw new Error(`${name}: no reply to ping ${i}`);
        await new Promise((resolve) => setImmediate(resolve));
      }
      if (i >= 20) times.push(performance.now() - t0); // the first 20 warm up
    }
    times.sort((a, b) => a - b);
    console.log(`  ${name.padEnd(9)} p50 ${percentile(times, 50).toFixed(1)} ms   p99 ${percentile(times, 99).toFixed(1)} ms`);
    await stopDaemon(child);
    await peer.close();
  }

  console.log(`\nall three configured (Telegram + Discord + Slack), ${STARTS} starts:`);
  const all = await Promise.all(Object.values(peers).map((start) => start()));
  const config = `${base(model.baseUrl)}${all.map((peer) => `${peer.configSection()}allow = ["*"]\n`).join('')}`;
  const readies: number[] = [];
  let rss = 0;
  for (let run = 0; run < STARTS; run++) {
    const { child, readyMs } = await startDaemon(config);
    readies.push(readyMs);
    if (run === STARTS - 1) {
      await sleep(3000);
      const status = readFileSync(`/proc/${child.pid}/status`, 'utf8');
      rss = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0) / 1024;
    }
    await stopDaemon(child);
  }
  readies.sort((a, b) => a - b);
  console.log(`  start to ready: median ${percentile(readies, 50).toFixed(0)} ms (min ${readies[0]!.toFixed(0)}, max ${readies.at(-1)!.toFixed(0)})`);
  console.log(`  idle RSS, all three connected: ${rss.toFixed(1)} MB`);
  await Promise.all(all.map((peer) => peer.close()));
  await model.close();
}

const cleanup = (): void => {
  for (const child of children) child.kill('SIGKILL');
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
};
main()
  .catch((error: unknown) => {
    console.error(error);
    process.exitCode = 1;
  })
  .finally(() => {
    cleanup();
    setTimeout(() => process.exit(), 100).unref();
  });
