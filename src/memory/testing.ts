/**
 * Test and benchmark helpers for the SQLite memory: a deterministic embedding provider
 * (hashed bag of words), a switchable wrapper that simulates an outage, and a fast way to
 * fill a database with memories that already have embeddings.
 */
import { randomUUID } from 'node:crypto';
import { pino } from 'pino';
import type { Logger } from '../log.ts';
import type { EmbeddingProvider } from '../memory.ts';
import type { Db } from '../store/db.ts';
import { signBits, toBlob } from '../vectors.ts';

const stopwords = new Set('a an and are at be did do does for from has have i in is it me my of on or that the this to was what when where which who with you your'.split(' '));

/** Lower-cased words, a crude plural/verb stem, stopwords dropped. */
function words(text: string): string[] {
  return (text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [])
    .filter((word) => !stopwords.has(word))
    .map((word) => (word.length > 4 && word.endsWith('ing') ? word.slice(0, -3) : word.length > 3 && word.endsWith('s') && !word.endsWith('ss') ? word.slice(0, -1) : word));
}

function fnv1a(text: string, seed = 0x811c9dc5): number {
  let hash = seed;
  for (let i = 0; i < text.length; i++) hash = Math.imul(hash ^ text.charCodeAt(i), 0x01000193) >>> 0;
  return hash;
}

export interface HashedEmbeddingsOptions {
  /** @default 256 */
  readonly dims?: number;
  /** @default 'test:hashed-bow' */
  readonly name?: string;
  /** Words embedded as another word (`{ automobile: 'car' }`), so a vector can match what keywords cannot. */
  readonly synonyms?: Readonly<Record<string, string>>;
}

/** Deterministic embeddings: each word adds ±1 at a hashed position; L2-normalised. */
export function hashedEmbeddings(options: HashedEmbeddingsOptions = {}): EmbeddingProvider {
  const dims = options.dims ?? 256;
  const synonyms = options.synonyms ?? {};
  const embedOne = (text: string): Float32Array => {
    const vector = new Float32Array(dims);
    for (const raw of words(text)) {
      const word = synonyms[raw] ?? raw;
      const hash = fnv1a(word);
      vector[hash % dims]! += (hash >>> 31) === 1 ? 1 : -1;
      vector[fnv1a(word, 0x9747b28c) % dims]! += 0.5;
    }
    return normalise(vector);
  };
  return { name: options.name ?? `test:hashed-bow-${dims}`, embed: async (texts) => texts.map(embedOne) };
}

/** A provider that can be taken down, slowed or made to hang, and counts what it embedded. */
export interface SwitchableEmbeddings extends EmbeddingProvider {
  down: boolean;
  /** Every request waits this long first. */
  delayMs: number;
  /** Requests never answer (until aborted). */
  hang: boolean;
  calls: number;
  texts: number;
}

export function switchable(inner: EmbeddingProvider): SwitchableEmbeddings {
  const provider: SwitchableEmbeddings = {
    name: inner.name,
    down: false,
    delayMs: 0,
    hang: false,
    calls: 0,
    texts: 0,
    async embed(texts, signal) {
      provider.calls++;
      if (provider.delayMs > 0 || provider.hang) {
        await new Promise<void>((resolve, reject) => {
          const timer = provider.hang ? undefined : setTimeout(resolve, provider.delayMs);
          signal?.addEventListener('abort', () => (clearTimeout(timer), reject(signal.reason)), { once: true });
        });
      }
      if (provider.down) throw new Error('connect ECONNREFUSED 127.0.0.1:9 (test outage)');
      provider.texts += texts.length;
      return inner.embed(texts, signal);
    },
  };
  return provider;
}

/** A seeded PRNG (mulberry32) in [0, 1). */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A random unit vector (Gaussian components via Box–Muller). */
export function randomUnitVector(dims: number, random: () => number): Float32Array {
  const vector = new Float32Array(dims);
  for (let i = 0; i < dims; i++) vector[i] = Math.sqrt(-2 * Math.log(random() || 1e-12)) * Math.cos(2 * Math.PI * random());
  return normalise(vector);
}

function normalise(vector: Float32Array): Float32Array {
  let sum = 0;
  for (const x of vector) sum += x * x;
  const norm = Math.sqrt(sum) || 1;
  for (let i = 0; i < vector.length; i++) vector[i]! /= norm;
  return vector;
}

/** A provider answering random unit vectors (for benchmarks; the name should match seeded rows). */
export function randomEmbeddings(name: string, dims: number, seed = 7): EmbeddingProvider {
  const random = seededRandom(seed);
  return { name, embed: async (texts) => texts.map(() => randomUnitVector(dims, random)) };
}

const common = 'the user likes to and a is of prefers their has about with for on works lives in remembers'.split(' ');
const syllables = 'ka lo mi ra ne to su vi pe da fo gu ri ze mo la ti no be'.split(' ');

/** A sentence of `length` words: common words mixed with a Zipf-ish draw from 8000 made-up ones. */
export function randomSentence(random: () => number, length = 14): string {
  const out: string[] = [];
  for (let i = 0; i < length; i++) {
    if (random() < 0.35) {
      out.push(common[Math.floor(random() * common.length)]!);
      continue;
    }
    let n = Math.floor(Math.pow(random(), 2.5) * 8000);
    let word = '';
    do {
      word += syllables[n % syllables.length];
      n = Math.floor(n / syllables.length);
    } while (n > 0);
    out.push(word);
  }
  return out.join(' ');
}

export interface SeedOptions {
  readonly count: number;
  /** Vector length; 0 = text only. */
  readonly dims: number;
  /** Embedding model name recorded on the rows and in memory_meta. */
  readonly model: string;
  /** Owners, as [scope, owner]; rows go round-robin. @default [['person', 'test:u1']] */
  readonly owners?: readonly (readonly [string, string])[];
  readonly seed?: number;
}

/** Inserts `count` memories with random text and unit vectors straight into the table (fast). */
export function seedMemories(db: Db, options: SeedOptions): void {
  const random = seededRandom(options.seed ?? 1);
  const owners = options.owners ?? [['person', 'test:u1']];
  const insert = db.prepare(
    `INSERT INTO memories (id, key, content, category, scope, owner, embedding, embedding_bits, embedding_model, created_at, updated_at)
     VALUES (?, ?, ?, 'core', ?, ?, ?, ?, ?, ?, ?)`,
  );
  const now = Date.now();
  db.transaction(() => {
    for (let i = 0; i < options.count; i++) {
      const [scope, owner] = owners[i % owners.length]!;
      const vector = options.dims > 0 ? randomUnitVector(options.dims, random) : undefined;
      insert.run(
        randomUUID(),
        `seed-${i}`,
        randomSentence(random),
        scope,
        owner,
        vector === undefined ? null : toBlob(vector),
        vector === undefined ? null : Buffer.from(signBits(vector)),
        vector === undefined ? null : options.model,
        now,
        now,
      );
    }
    if (options.dims > 0) {
      const meta = db.prepare('INSERT INTO memory_meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value');
      meta.run('embedding_model', options.model);
      meta.run('embedding_dims', String(options.dims));
    }
  })();
}

/** Polls `condition` every 10 ms until it holds; rejects naming `what` after `timeoutMs`. */
export async function waitFor(what: string, condition: () => boolean | Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!(await condition())) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** A logger keeping its records (level as a name) for assertions. */
export function capturingLogger(): { log: Logger; records: { level: string; msg: string; [key: string]: unknown }[] } {
  const records: { level: string; msg: string; [key: string]: unknown }[] = [];
  const log = pino(
    { level: 'debug', formatters: { level: (label) => ({ level: label }) } },
    { write: (line: string) => void records.push(JSON.parse(line) as (typeof records)[number]) },
  );
  return { log, records };
}

/** Queries that must be taken as plain text by keyword search (FTS5 syntax, wildcards, odd scripts, huge). */
export const hostileQueries: readonly string[] = [
  '"',
  '""',
  'say "hello',
  'NEAR(a b)',
  'NEAR(dog cat, 2)',
  '*',
  'dog*',
  '^start',
  'AND OR NOT',
  'dog AND',
  'content:dog',
  'key:x col:y',
  '(dog OR',
  ')))(((',
  '{key content}: dog',
  '- + : ; \\ / %',
  '100% _under_ \\back',
  '🙂🐶',
  '🐶 dog',
  '我的狗叫什么名字',
  '犬の名前',
  '\u0000\u0001 dog',
  '',
  '   ',
  'x'.repeat(10_240),
  'dog '.repeat(2600),
  Array.from({ length: 3000 }, (_, i) => `w${i}`).join(' '),
];
