/**
 * Channel benchmark: prints figures, never fails on speed.
 *
 *   npm run bench:channels      (builds dist/ first)
 *   npm run bench:channels -- slack            (only what involves Slack)
 *   SWITCHBOARD_BENCH_CLI=/other/dist/app/cli.js node scripts/bench-channels.ts slack
 *
 * For every chat channel, each against its test peer (test/peers/: local protocol peers for
 * Telegram, Discord, Slack and Matrix; real ngircd for IRC; real dovecot + postfix for email)
 * and a zero-latency scripted model:
 * 1. reply latency: a person's DM posted on the peer → the bot's reply recorded by the peer
 *    (peer → daemon → model → peer), one after another, p50 / p99 (IRC and email fewer:
 *    IRC servers throttle clients, and IMAP IDLE notifies in ~0.5 s steps);
 * 2. start-up with a group of channels configured: `start` to "ready" (every channel
 *    connected), 5 runs — Telegram + Discord + Slack, Matrix + IRC + email, all six;
 * 3. idle RSS with that group connected, ~3 s after ready.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ChatPeer } from '../test/contracts/chat-channel.ts';
import { startFakeOpenAI } from '../test/fixtures/fake-openai.ts';
import { startDiscordPeer } from '../test/peers/discord.ts';
import { DISCORD_LIFTED } from '../test/peers/discord-ratelimit.ts';
import { startEmailPeer } from '../test/peers/email.ts';
import { startIrcPeer } from '../test/peers/irc.ts';
import { startMatrixPeer, SYNAPSE_EXEMPT } from '../test/peers/matrix.ts';
import { startSlackPeer } from '../test/peers/slack.ts';
import { startTelegramPeer } from '../test/peers/telegram.ts';

const ROOT = join(import.meta.dirname, '..');
// SWITCHBOARD_BENCH_CLI runs another build's CLI against the same peers (before/after comparisons).
const CLI = process.env.SWITCHBOARD_BENCH_CLI ?? (existsSync(join(ROOT, 'dist', 'app', 'cli.js')) ? join(ROOT, 'dist', 'app', 'cli.js') : join(ROOT, 'app', 'cli.ts'));
const STARTS = 5;

/** Each channel's peer and how many DMs its latency run sends. */
const peers: Record<string, { start: () => Promise<ChatPeer>; n: number }> = {
  telegram: { start: startTelegramPeer, n: 200 },
  // Discord's route buckets (5 messages per 5 s per channel) would be what one DM's replies measure: lifted here.
  discord: { start: () => startDiscordPeer({ rateLimits: DISCORD_LIFTED }), n: 200 },
  // Slack's own limit (1 message a second per channel) would be what one DM's replies measure: off here.
  slack: { start: () => startSlackPeer({ rateLimits: 'off' }), n: 200 },
  // A bot account exempted from Synapse's rate limit (its default, 0.2 messages/s, would measure Synapse, not us).
  matrix: { start: () => startMatrixPeer({ rcMessage: SYNAPSE_EXEMPT }), n: 200 },
  irc: { start: startIrcPeer, n: 30 },
  email: { start: startEmailPeer, n: 20 },
};
const groups: Array<[string, string[]]> = [
  ['Slack alone', ['slack']],
  ['Telegram + Discord + Slack', ['telegram', 'discord', 'slack']],
  ['Matrix + IRC + email', ['matrix', 'irc', 'email']],
  ['all six', Object.keys(peers)],
];
const only = process.argv.slice(2);
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

  console.log('reply latency, peer → daemon → zero-latency model → peer (DMs one after another):');
  for (const [name, { start, n }] of Object.entries(peers)) {
    if (only.length > 0 && !only.includes(name)) continue;
    const peer = await start();
    const { child } = await startDaemon(`${base(model.baseUrl)}${peer.configSection()}allow = ["*"]\n`);
    const dm = { kind: 'dm', user: 'alice' } as const;
    const warmup = Math.min(20, Math.ceil(n / 10));
    const times: number[] = [];
    for (let i = 0; i < n + warmup; i++) {
      const before = peer.botMessages(dm).length;
      const t0 = performance.now();
      await peer.post('alice', dm, `ping ${i}`);
      const deadline = Date.now() + 30_000;
      while (peer.botMessages(dm).length === before) {
        if (Date.now() > deadline) throw new Error(`${name}: no reply to ping ${i}`);
        await sleep(1);
      }
      if (i >= warmup) times.push(performance.now() - t0);
    }
    times.sort((a, b) => a - b);
    console.log(`  ${name.padEnd(9)} p50 ${percentile(times, 50).toFixed(1)} ms   p99 ${percentile(times, 99).toFixed(1)} ms   (${n} messages)`);
    await stopDaemon(child);
    await peer.close();
  }

  for (const [label, names] of groups) {
    if (only.length > 0 && !names.every((name) => only.includes(name))) continue;
    console.log(`\n${label} configured, ${STARTS} starts:`);
    const started = await Promise.all(names.map((name) => peers[name]!.start()));
    const config = `${base(model.baseUrl)}${started.map((peer) => `${peer.configSection()}allow = ["*"]\n`).join('')}`;
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
      await sleep(names.includes('irc') ? 2500 : 0); // ngircd keeps a quitting nick briefly
    }
    readies.sort((a, b) => a - b);
    console.log(`  start to ready: median ${percentile(readies, 50).toFixed(0)} ms (min ${readies[0]!.toFixed(0)}, max ${readies.at(-1)!.toFixed(0)})`);
    console.log(`  idle RSS, all connected: ${rss.toFixed(1)} MB`);
    await Promise.all(started.map((peer) => peer.close()));
  }
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
