/**
 * Voice notes: prints figures, never fails on speed.
 *
 *   node scripts/bench-voice.ts
 *   BASELINE=/path/to/other/checkout node scripts/bench-voice.ts   (also starts that checkout, to compare)
 *
 * 1. time a voice turn adds: the transcription request round trip (read the file, multipart POST,
 *    JSON answer) against the scripted transcription server on loopback, for a 30 KB OGG/Opus
 *    note (~10 s of Telegram voice), first call (loads src/media/transcribe.ts) and p50 / p95
 *    over 100 calls. The endpoint's own inference time is not in it: that is the model's.
 * 2. start-up without [transcription]: the daemon (from source, [channels.terminal]) spawn→ready
 *    and idle RSS, and whether src/media/transcribe.ts was loaded (it must not be).
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { mkdir, realpath, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { pino } from 'pino';
import { oggOpusVoice, startFakeWhisper } from '../test/fixtures/fake-whisper.ts';
import { cleanUp, fmt, median, percentile, ROOT, say, tempDir } from './bench-support.ts';
import { startOnce, terminalConfig } from './bench-startup.ts';

const RUNS = 100;

async function roundTrip(): Promise<void> {
  say(`## 1. Transcription round trip against the scripted server (30 KB OGG/Opus, ${RUNS} runs)`);
  const whisper = await startFakeWhisper();
  try {
    const workspace = await realpath(tempDir('voice-ws'));
    await mkdir(join(workspace, 'inbox'), { recursive: true });
    await writeFile(join(workspace, 'inbox', 'voice.oga'), oggOpusVoice(30 * 1024));
    const t0 = performance.now();
    const { createTranscriber } = await import('../src/media/transcribe.ts');
    const transcriber = createTranscriber({ baseUrl: whisper.baseUrl, model: 'whisper-1', timeoutMs: 10_000, workspace, log: pino({ level: 'silent' }) });
    const first = await transcriber.transcribe('inbox/voice.oga', AbortSignal.timeout(10_000));
    const firstMs = performance.now() - t0;
    if (!first.ok) throw new Error(first.reason);
    const times: number[] = [];
    for (let run = 0; run < RUNS; run++) {
      const start = performance.now();
      const result = await transcriber.transcribe('inbox/voice.oga', AbortSignal.timeout(10_000));
      times.push(performance.now() - start);
      if (!result.ok) throw new Error(result.reason);
    }
    times.sort((a, b) => a - b);
    say(`   first call (module load + client + request): ${fmt(firstMs)} ms`);
    say(`   p50 ${fmt(percentile(times, 50))} ms, p95 ${fmt(percentile(times, 95))} ms, max ${fmt(times.at(-1)!)} ms`);
  } finally {
    await whisper.close();
  }
  say();
}

/** A preload that notes every module URL naming media/transcribe. */
function hook(out: string): string {
  const source = `import { registerHooks } from 'node:module'; import { appendFileSync } from 'node:fs';
registerHooks({ load(url, context, next) { if (url.includes('media/transcribe')) appendFileSync(${JSON.stringify(out)}, url + '\\n'); return next(url, context); } });`;
  return `data:text/javascript,${encodeURIComponent(source)}`;
}

async function startVoiceOnce(root: string): Promise<{ wallMs: number; rssMb: number; loaded: boolean }> {
  const dir = tempDir('voice-start');
  const loadedFile = join(dir, 'loaded.txt');
  writeFileSync(loadedFile, '');
  const { wallMs, rssMb } = await startOnce(root, ['--import', hook(loadedFile), join(root, 'app', 'cli.ts'), 'start', '--config', terminalConfig(dir)], 30_000, () => undefined);
  return { wallMs, rssMb, loaded: readFileSync(loadedFile, 'utf8').trim() !== '' };
}

async function startUp(): Promise<void> {
  say('## 2. Start-up without [transcription] (daemon from source, [channels.terminal], 5 runs each, alternating)');
  const roots = [{ label: 'this checkout', root: ROOT }, ...(process.env.BASELINE ? [{ label: `baseline ${process.env.BASELINE}`, root: process.env.BASELINE }] : [])].filter(({ root }) => existsSync(join(root, 'app', 'cli.ts')));
  const runs = new Map(roots.map(({ label }) => [label, [] as Array<Awaited<ReturnType<typeof startVoiceOnce>>>]));
  for (let run = 0; run < 5; run++) for (const { label, root } of roots) runs.get(label)!.push(await startVoiceOnce(root));
  for (const [label, list] of runs) {
    say(`   ${label}: spawn→ready median ${fmt(median(list.map((r) => r.wallMs)))} ms, idle RSS (2 s after ready) median ${fmt(median(list.map((r) => r.rssMb)))} MB, media/transcribe loaded: ${list.some((r) => r.loaded) ? 'YES' : 'no'}`);
  }
  say();
}

try {
  say('# Switchboard voice bench');
  await roundTrip();
  await startUp();
} finally {
  cleanUp();
}
