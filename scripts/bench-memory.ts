/**
 * Memory figures (prints numbers; never fails on speed):
 *  1. recall latency p50/p99 at 10k and 100k memories with 384- and 1536-dimension random
 *     unit embeddings (seeded straight into the table), hybrid and keyword-only, and the
 *     longest event-loop stall while recalling (gap between setInterval(…, 1) ticks);
 *  2. store throughput, text only and with (instant, fake) embeddings until all are indexed.
 * Databases are seeded in a worker thread, so the measuring thread's heap stays small.
 * Run: npm run bench:memory
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { pino } from 'pino';
import { createSqliteMemory, type SqliteMemory } from '../src/memory/sqlite.ts';
import { randomEmbeddings, randomSentence, seededRandom, seedMemories, waitFor } from '../src/memory/testing.ts';
import type { EmbeddingProvider, MemoryWho } from '../src/memory.ts';
import { openDatabase } from '../src/store/db.ts';

interface SeedJob {
  readonly path: string;
  readonly count: number;
  readonly dims: number;
  readonly model: string;
}

const who: MemoryWho = { person: 'tg:alice', conversation: 'tg:bot:alice' };
/** Alice's memories, shared ones and two other people's, round-robin: she sees half. */
const owners: [string, string][] = [
  ['person', who.person],
  ['shared', ''],
  ['person', 'tg:bob'],
  ['person', 'tg:carol'],
];
const log = pino({ level: 'silent' });

function seed(job: SeedJob): Promise<void> {
  return new Promise((resolve, reject) => {
    const worker = new Worker(new URL(import.meta.url), { workerData: job });
    worker.once('message', () => resolve());
    worker.once('error', reject);
  });
}

const percentile = (sorted: readonly number[], p: number): number => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
const ms = (value: number): string => `${value.toFixed(1)} ms`;

async function measureRecall(memory: SqliteMemory, queries: readonly string[]): Promise<{ p50: number; p99: number; stall: number }> {
  for (const query of queries.slice(0, 20)) await memory.recall(query, who); // warm-up (JIT, word statistics)
  const times: number[] = [];
  let stall = 0;
  let last = performance.now();
  const ticker = setInterval(() => {
    const now = performance.now();
    stall = Math.max(stall, now - last);
    last = now;
  }, 1);
  for (const query of queries) {
    const started = performance.now();
    await memory.recall(query, who, { limit: 5 });
    times.push(performance.now() - started);
  }
  clearInterval(ticker);
  times.sort((a, b) => a - b);
  return { p50: percentile(times, 50), p99: percentile(times, 99), stall };
}

async function recallFigures(dir: string): Promise<void> {
  const random = seededRandom(99);
  const queries = Array.from({ length: 300 }, () => randomSentence(random, 3 + Math.floor(random() * 6)));
  console.log('recall (limit 5; Alice sees half the memories; 300 queries of 3–8 words)');
  for (const dims of [384, 1536]) {
    for (const count of [10_000, 100_000]) {
      const path = join(dir, `recall-${count}-${dims}.db`);
      const model = `bench:random-${dims}`;
      let started = performance.now();
      await seed({ path, count, dims, model });
      const seeded = performance.now() - started;
      const db = openDatabase(path);
      for (const mode of ['hybrid', 'keyword-only'] as const) {
        if (mode === 'keyword-only' && dims !== 384) continue; // the same as for 384
        const embeddings: EmbeddingProvider | undefined = mode === 'hybrid' ? randomEmbeddings(model, dims) : undefined;
        started = performance.now();
        const memory = createSqliteMemory({ db, path, log, ...(embeddings ? { embeddings } : {}) });
        await waitFor('the recall index', async () => (await memory.indexed()) === (mode === 'hybrid' ? count : 0), 300_000);
        const loaded = performance.now() - started;
        const figures = await measureRecall(memory, queries);
        await memory.close();
        console.log(
          `  ${String(count).padStart(7)} × ${String(dims).padStart(4)}  ${mode.padEnd(12)}  p50 ${ms(figures.p50).padStart(8)}  p99 ${ms(figures.p99).padStart(8)}  ` +
            `longest stall ${ms(figures.stall).padStart(7)}  (index loaded in ${ms(loaded)}${mode === 'hybrid' ? `, seeded in ${(seeded / 1000).toFixed(1)} s` : ''})`,
        );
      }
      db.close();
      rmSync(path, { force: true });
      rmSync(`${path}-wal`, { force: true });
      rmSync(`${path}-shm`, { force: true });
    }
  }
}

async function storeFigures(dir: string): Promise<void> {
  const count = 5000;
  const random = seededRandom(5);
  const texts = Array.from({ length: count }, () => randomSentence(random, 14));
  console.log(`store (${count} memories, one await at a time)`);
  for (const mode of ['text only', 'with embeddings'] as const) {
    const path = join(dir, `store-${mode === 'text only' ? 'text' : 'embed'}.db`);
    const embeddings = mode === 'text only' ? undefined : randomEmbeddings('bench:store-384', 384);
    const memory = createSqliteMemory({ db: openDatabase(path), path, log, ...(embeddings ? { embeddings } : {}) });
    const started = performance.now();
    for (const [i, content] of texts.entries()) await memory.store({ content, key: `k${i}`, scope: 'person' }, who);
    const stored = performance.now() - started;
    let line = `  ${mode.padEnd(16)} ${Math.round(count / (stored / 1000))} memories/s stored`;
    if (embeddings !== undefined) {
      await waitFor('embeddings', async () => (await memory.indexed()) === count, 300_000);
      line += `, ${Math.round(count / ((performance.now() - started) / 1000))} memories/s embedded and indexed (instant fake provider, batches of 64)`;
    }
    await memory.close();
    console.log(line);
  }
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'sb-bench-memory-'));
  try {
    await recallFigures(dir);
    await storeFigures(dir);
    console.log('target: recall p50 < 10 ms at 100k × 384, no stall above 20 ms');
  } catch (error) {
    console.log(`benchmark failed: ${error instanceof Error ? error.stack : String(error)}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

// Last, so every const above is initialised: this file is also the seeding worker.
if (!isMainThread) {
  const job = workerData as SeedJob;
  const db = openDatabase(job.path);
  seedMemories(db, { count: job.count, dims: job.dims, model: job.model, owners });
  db.close();
  parentPort!.postMessage('done');
} else {
  await main();
}
