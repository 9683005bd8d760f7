/**
 * Photos to the model: prints figures, never fails on speed.
 *
 *   npm run bench:images            (the start-up part needs `npm run build` first: it runs dist/)
 *   BASELINE=/path/to/other/checkout npm run bench:images   (also starts that build, to compare)
 *
 * 1. bytes sent to the model for one photo turn: a 4000×3000 camera JPEG prepared for each
 *    provider's limits (image bytes, base64, and the whole OpenAI request body as the scripted
 *    model received it)
 * 2. time added by preparing (decode, orient, downscale, encode): first image (includes loading
 *    sharp) and p50 / p95 over 20 runs per provider
 * 3. RSS while handling a 20 MB photo: a fresh process, sampled every 5 ms during preparation
 * 4. start-up without photos: the compiled daemon's spawn→ready and idle RSS, and whether
 *    libvips is mapped into it (it must not be: sharp loads on the first photo)
 */
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { pino } from 'pino';
import { createImagePreparer, IMAGE_LIMITS, type ProviderKind } from '../src/media/image.ts';
import { createVisionMemory, createVisionProvider } from '../src/media/vision.ts';
import { createWorkspaceImages } from '../src/media/workspace-images.ts';
import { createOpenAIProvider } from '../src/providers/openai.ts';
import { startFakeOpenAI } from '../test/fixtures/fake-openai.ts';
import { children, cleanUp, fmt, fmtInt, median, percentile, readRssMb, ROOT, say, sleep, tempDir, within } from './bench-support.ts';
import { startOnce, terminalConfig } from './bench-startup.ts';

const RUNS = 20;
const RSS_CHILD_FLAG = '--rss-child';
const kinds: ProviderKind[] = ['openai', 'anthropic', 'gemini'];

/** A 4000×3000 photo at quality 85 (about what a phone writes), and a ~20 MB one. */
async function photos(dir: string): Promise<{ typical: string; large: string }> {
  // Imported here, not at the top: the RSS child must not have sharp loaded before it measures.
  const { cameraJpeg } = await import('../test/support/photos.ts');
  const typical = join(dir, 'typical.jpg');
  const large = join(dir, 'large.jpg');
  await writeFile(typical, await cameraJpeg(4000, 3000, { orientation: 6, quality: 85 }));
  await writeFile(large, await cameraJpeg(7000, 5000, { quality: 95 }));
  return { typical, large };
}

async function bytesSent(typical: string): Promise<void> {
  say('## 1. Bytes sent to the model for one photo turn (4000×3000 JPEG, EXIF orientation 6)');
  const input = readFileSync(typical);
  say(`   photo as received: ${fmtInt(input.length)} bytes`);
  const preparer = createImagePreparer();
  for (const kind of kinds) {
    const result = await preparer.prepare(input, IMAGE_LIMITS[kind]);
    if (!result.ok) throw new Error(`${kind}: ${result.reason}`);
    const base64 = Math.ceil(result.data.length / 3) * 4;
    say(`   ${kind.padEnd(9)} long edge ${IMAGE_LIMITS[kind].longEdge}: ${result.width}×${result.height} ${result.mime}, ${fmtInt(result.data.length)} bytes (${fmtInt(base64)} as base64)`);
  }
  // The whole request, as the scripted OpenAI-compatible model received it.
  const fake = await startFakeOpenAI();
  try {
    const workspace = tempDir('images-ws');
    await mkdir(join(workspace, 'inbox'), { recursive: true });
    writeFileSync(join(workspace, 'inbox', 'photo.jpg'), input);
    let body = 0;
    const inner = createOpenAIProvider({ baseUrl: fake.baseUrl, model: 'bench', timeoutMs: 10_000 });
    const counting = { ...inner, chat: async (request: Parameters<typeof inner.chat>[0], signal: AbortSignal) => ((body = Buffer.byteLength(JSON.stringify(request.messages))), inner.chat(request, signal)) };
    const provider = createVisionProvider(counting, {
      vision: 'auto',
      model: 'bench',
      limits: IMAGE_LIMITS.openai,
      images: createWorkspaceImages({ workspace, preparer: createImagePreparer() }),
      memory: createVisionMemory(),
      log: pino({ level: 'silent' }),
    });
    await provider.chat({ system: 'You are a bench.', tools: [], messages: [{ role: 'user', content: 'what is this plant?', images: [{ type: 'file', path: 'inbox/photo.jpg', name: 'photo.jpg' }] }] }, AbortSignal.timeout(30_000));
    const received = Buffer.byteLength(JSON.stringify(fake.requests[0]!.body));
    say(`   OpenAI request body for that turn: ${fmtInt(received)} bytes (messages ${fmtInt(body)}); a text-only turn: ~${fmtInt(Buffer.byteLength(JSON.stringify({ model: 'bench', messages: [{ role: 'system', content: 'You are a bench.' }, { role: 'user', content: 'what is this plant?' }] })))} bytes`);
  } finally {
    await fake.close();
  }
  say();
}

async function timing(typical: string): Promise<void> {
  say(`## 2. Time added by preparing the photo (${RUNS} runs per provider, after the first)`);
  const input = readFileSync(typical);
  const preparer = createImagePreparer();
  const first = performance.now();
  await preparer.prepare(input, IMAGE_LIMITS.openai);
  say(`   first photo of the process (imports sharp, starts libvips): ${fmt(performance.now() - first)} ms`);
  for (const kind of kinds) {
    const times: number[] = [];
    for (let run = 0; run < RUNS; run++) {
      const t0 = performance.now();
      const result = await preparer.prepare(input, IMAGE_LIMITS[kind]);
      times.push(performance.now() - t0);
      if (!result.ok) throw new Error(result.reason);
    }
    const sorted = [...times].sort((a, b) => a - b);
    say(`   ${kind.padEnd(9)} p50 ${fmt(median(times))} ms, p95 ${fmt(percentile(sorted, 95))} ms, max ${fmt(sorted.at(-1)!)} ms`);
  }
  say('   (within a turn the prepared bytes are cached: the tool loop\'s later model calls and the next turns reuse them)');
  say();
}

/** Child: RSS before, peak during and after preparing `file`. */
async function rssChild(file: string): Promise<void> {
  const rss = (): number => process.memoryUsage.rss() / 1024 / 1024;
  const before = rss();
  const input = readFileSync(file);
  const loaded = rss();
  let peak = loaded;
  const timer = setInterval(() => (peak = Math.max(peak, rss())), 5);
  const preparer = createImagePreparer();
  const t0 = performance.now();
  const result = await preparer.prepare(input, IMAGE_LIMITS.anthropic);
  const ms = performance.now() - t0;
  clearInterval(timer);
  peak = Math.max(peak, rss());
  await sleep(200);
  process.stdout.write(JSON.stringify({ before, loaded, peak, after: rss(), ms, bytes: input.length, ok: result.ok, hwm: readRssMb(process.pid).hwm }));
}

async function rss(large: string): Promise<void> {
  say('## 3. RSS while handling a 20 MB photo (a fresh process; sampled every 5 ms)');
  const child = spawn(process.execPath, [import.meta.filename, RSS_CHILD_FLAG, large], { stdio: ['ignore', 'pipe', 'inherit'] });
  children.add(child);
  let out = '';
  child.stdout!.on('data', (chunk: Buffer) => (out += chunk.toString()));
  await within(new Promise((resolve) => child.once('exit', resolve)), 60_000, 'the RSS child');
  const r = JSON.parse(out) as { before: number; loaded: number; peak: number; after: number; ms: number; bytes: number; ok: boolean; hwm: number };
  say(`   photo: ${fmt(r.bytes / 1024 / 1024)} MB (7000×5000), prepared ${r.ok ? 'ok' : 'REFUSED'} in ${fmt(r.ms)} ms`);
  say(`   RSS: ${fmt(r.before)} MB at start, ${fmt(r.loaded)} MB with the file read, peak ${fmt(r.peak)} MB while preparing (VmHWM ${fmt(r.hwm)} MB), ${fmt(r.after)} MB after`);
  say();
}

async function startImagesOnce(root: string): Promise<{ wallMs: number; rssMb: number; vips: boolean }> {
  const cli = join(root, 'dist', 'app', 'cli.js');
  const { wallMs, rssMb, seen } = await startOnce(root, [cli, 'start', '--config', terminalConfig(tempDir('images-start'))], 20_000, (pid) => /libvips|sharp-linux/.test(readFileSync(`/proc/${pid}/maps`, 'utf8')));
  return { wallMs, rssMb, vips: seen };
}

async function startUp(): Promise<void> {
  say('## 4. Start-up when no photo arrives (compiled daemon, [channels.terminal], 5 runs each)');
  const roots = [{ label: 'this build', root: ROOT }, ...(process.env.BASELINE ? [{ label: `baseline ${process.env.BASELINE}`, root: process.env.BASELINE }] : [])];
  for (const { label, root } of roots) {
    if (!existsSync(join(root, 'dist', 'app', 'cli.js'))) {
      say(`   ${label}: no dist/ (run npm run build there first)`);
      continue;
    }
    const runs = [];
    for (let run = 0; run < 5; run++) runs.push(await startImagesOnce(root));
    say(`   ${label}: spawn→ready median ${fmt(median(runs.map((r) => r.wallMs)))} ms, idle RSS (2 s after ready) median ${fmt(median(runs.map((r) => r.rssMb)))} MB, libvips mapped: ${runs.some((r) => r.vips) ? 'YES' : 'no'}`);
  }
  say();
}

async function main(): Promise<void> {
  if (process.argv[2] === RSS_CHILD_FLAG) return rssChild(process.argv[3]!);
  try {
    say('# Switchboard image bench');
    const dir = tempDir('images');
    const { typical, large } = await photos(dir);
    await startUp();
    await bytesSent(typical);
    await timing(typical);
    await rss(large);
  } finally {
    cleanUp();
  }
}

await main();
