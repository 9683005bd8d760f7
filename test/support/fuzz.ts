/**
 * Property-based fuzzing for the parsers that take bytes from outside (issue 13), on fast-check.
 *
 * Every property runs a bounded number of cases so `npm test` stays fast; the environment
 * scales and replays them:
 * - `SWITCHBOARD_FUZZ_RUNS=10` runs ten times the default cases of every property (0.1: a tenth);
 * - `SWITCHBOARD_FUZZ_SEED=<n>` (and `SWITCHBOARD_FUZZ_PATH=<path>`) replays a failure: the
 *   failing test's message names both, with the command line to paste.
 *
 * Each property reports `fuzz <label>: <cases> cases, seed <n>` as a test diagnostic, so the
 * output says how much was fuzzed and with which seed even when everything passed.
 */
import type { TestContext } from 'node:test';
import fc from 'fast-check';

/** Run-count multiplier from SWITCHBOARD_FUZZ_RUNS (default 1). */
export function runScale(env: NodeJS.ProcessEnv = process.env): number {
  const raw = env.SWITCHBOARD_FUZZ_RUNS;
  if (raw === undefined || raw === '') return 1;
  const scale = Number(raw);
  if (!Number.isFinite(scale) || scale <= 0) throw new RangeError(`SWITCHBOARD_FUZZ_RUNS must be a positive number (a multiplier), got ${JSON.stringify(raw)}`);
  return scale;
}

/** The fixed seed from SWITCHBOARD_FUZZ_SEED, or undefined for a fresh one per property. */
export function fixedSeed(env: NodeJS.ProcessEnv = process.env): number | undefined {
  const raw = env.SWITCHBOARD_FUZZ_SEED;
  if (raw === undefined || raw === '') return undefined;
  const seed = Number(raw);
  if (!Number.isSafeInteger(seed)) throw new RangeError(`SWITCHBOARD_FUZZ_SEED must be an integer, got ${JSON.stringify(raw)}`);
  return seed;
}

export interface FuzzOptions {
  /** Cases at scale 1. */
  readonly runs: number;
}

/** Cases run per label in this process (for a summary). */
export const casesRun = new Map<string, number>();

/**
 * Checks `check` against `runs` values of `arbitrary` (sync). `check` fails by throwing (an
 * assertion) or returning false. On failure the error names the seed, the path and how to
 * replay it.
 */
export function fuzz<T>(t: TestContext, label: string, arbitrary: fc.Arbitrary<T>, check: (value: T) => unknown, options: FuzzOptions): void {
  const run = start(label, options);
  try {
    fc.assert(
      fc.property(arbitrary, (value) => {
        run.cases++;
        return check(value) !== false;
      }),
      run.parameters,
    );
  } catch (error) {
    throw run.failed(error);
  } finally {
    run.report(t);
  }
}

/** {@link fuzz} for an async `check`. */
export async function fuzzAsync<T>(t: TestContext, label: string, arbitrary: fc.Arbitrary<T>, check: (value: T) => Promise<unknown>, options: FuzzOptions): Promise<void> {
  const run = start(label, options);
  try {
    await fc.assert(
      fc.asyncProperty(arbitrary, async (value) => {
        run.cases++;
        return (await check(value)) !== false;
      }),
      run.parameters,
    );
  } catch (error) {
    throw run.failed(error);
  } finally {
    run.report(t);
  }
}

function start(label: string, options: FuzzOptions) {
  const seed = fixedSeed() ?? (Math.random() * 0x7fffffff) | 0;
  const path = process.env.SWITCHBOARD_FUZZ_PATH;
  const numRuns = Math.max(1, Math.round(options.runs * runScale()));
  const began = performance.now();
  const run = {
    cases: 0,
    parameters: { seed, numRuns, ...(path ? { path } : {}) } satisfies fc.Parameters<unknown>,
    failed(error: unknown): Error {
      const replay = `SWITCHBOARD_FUZZ_SEED=${seed}${path ? ` SWITCHBOARD_FUZZ_PATH=${path}` : ''} node --test --test-name-pattern=<this test> <this file>`;
      const message = error instanceof Error ? error.message : String(error);
      return new Error(`fuzz ${label} failed (seed ${seed}; replay: ${replay}; the path below narrows it to the shrunk case):\n${message}`, { cause: error });
    },
    report(t: TestContext): void {
      casesRun.set(label, (casesRun.get(label) ?? 0) + run.cases);
      t.diagnostic(`fuzz ${label}: ${run.cases} cases, seed ${seed}, ${Math.round(performance.now() - began)} ms`);
    },
  };
  return run;
}

// ---- arbitraries shared by the parser suites ----

/** Characters that break naive text handling: lone surrogates, joiners, bidi controls, NUL, markup. */
const nastyChars = [
  '\uD800', '\uDBFF', '\uDC00', '\uDFFF', '\u200B', '\u200D', '\u200E', '\u202E', '\u2066', '\uFEFF', '\u0000', '\u0001', '\u0003', '\u007F',
  '\r', '\n', '\r\n', '\t', ' ', '\u00A0', '\u2028', '\u0301', '👍', '👨‍👩‍👧', '🏳️‍🌈', 'ﷺ', '\uE000', '\uE001', '\uFFFD', 'é', 'ß', 'İ', 'ﬃ',
  '*', '**', '_', '__', '~~', '`', '```', '~~~', '#', '>', '<', '&', '&amp;', '[', ']', '(', ')', '|', '\\', '"', "'", ':', '@', '!', '/',
  '<b>', '</b>', '<a href="x">', 'http://x.y/', '\x02', '\x0f', '\x1d',
];

/**
 * One piece of nasty text. Built once: a grapheme arbitrary takes fast-check about a hundred
 * milliseconds to set up, and the suites ask for nasty text in dozens of fields.
 */
const nastyPiece = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom(...nastyChars) },
  { weight: 3, arbitrary: fc.string({ unit: 'binary', maxLength: 8 }) },
  { weight: 2, arbitrary: fc.string({ unit: 'grapheme', maxLength: 8 }) },
  { weight: 2, arbitrary: fc.string({ maxLength: 12 }) },
);

/** Any unicode text, biased to the characters that break text handling (lone surrogates included). */
export function nastyText(maxLength = 200): fc.Arbitrary<string> {
  return fc.array(nastyPiece, { maxLength: Math.max(1, Math.ceil(maxLength / 4)) }).map((parts) => parts.join(''));
}

/** Markdown-ish replies: paragraphs, fences, lists, very long lines, any unicode. */
export function markdownText(): fc.Arbitrary<string> {
  const line = fc.oneof(
    { weight: 4, arbitrary: nastyText(120) },
    { weight: 1, arbitrary: fc.constantFrom('```', '```js', '~~~', '````', '', '- item', '1. one', '> quote', '# Title', '---', '| a | b |') },
    { weight: 1, arbitrary: fc.tuple(fc.constantFrom('a', 'word ', '👍', 'é ', '\uD83D', 'x'), fc.integer({ min: 50, max: 3000 })).map(([unit, n]) => unit.repeat(n)) },
  );
  return fc.array(line, { maxLength: 40 }).map((lines) => lines.join('\n'));
}

/** Any JSON-ish value (what a hostile or broken peer can send), including deep nesting. */
export const anyJson: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 3, arbitrary: fc.jsonValue({ maxDepth: 4 }) },
  { weight: 1, arbitrary: fc.anything({ maxDepth: 3, withNullPrototype: true, withBigInt: false, withBoxedValues: true, withSparseArray: true }) },
);

/**
 * A field of a payload as a broken or hostile peer might send it: usually the valid
 * `arbitrary`, sometimes missing, null, or a value of any type.
 */
export function wobbly<T>(arbitrary: fc.Arbitrary<T>): fc.Arbitrary<T | unknown> {
  return fc.oneof(
    { weight: 8, arbitrary },
    { weight: 1, arbitrary: fc.constant(undefined) },
    { weight: 1, arbitrary: fc.constant(null) },
    { weight: 2, arbitrary: anyJson },
  );
}

/**
 * An object shaped like a real payload, each field {@link wobbly}; missing fields are left
 * out, and now and then unknown keys are added.
 */
export function payload(fields: Readonly<Record<string, fc.Arbitrary<unknown>>>): fc.Arbitrary<Record<string, unknown>> {
  const entries = Object.entries(fields).map(([key, arbitrary]) => fc.tuple(fc.constant(key), wobbly(arbitrary)));
  return fc.tuple(fc.tuple(...entries), fc.dictionary(fc.string({ maxLength: 10 }), anyJson, { maxKeys: 2 })).map(([pairs, extra]) => {
    const object: Record<string, unknown> = { ...extra };
    for (const [key, value] of pairs) if (value !== undefined) object[key] = value;
    return object;
  });
}

/** A valid-shaped payload (no wobble): for the properties about what a good input gives. */
export function exact(fields: Readonly<Record<string, fc.Arbitrary<unknown>>>): fc.Arbitrary<Record<string, unknown>> {
  return fc.record(fields as Record<string, fc.Arbitrary<unknown>>) as fc.Arbitrary<Record<string, unknown>>;
}

/** Errors a parser must never let escape: they mean it read a field it never checked. */
export function isCrash(error: unknown): boolean {
  return error instanceof TypeError || error instanceof RangeError || error instanceof ReferenceError || error instanceof SyntaxError;
}

/** Calls `parse`; rethrows (failing the property) when it crashed instead of returning or throwing a named error. */
export function noCrash<R>(parse: () => R): R | Error {
  try {
    return parse();
  } catch (error) {
    if (isCrash(error) || !(error instanceof Error)) throw error;
    return error;
  }
}
