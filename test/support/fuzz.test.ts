/** The fuzz helper: a failure names its seed, path and how to replay it; the environment scales and fixes runs. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { casesRun, fixedSeed, fuzz, runScale } from './fuzz.ts';

describe('fuzz helper', () => {
  it('reports a failing property with its seed, its path and the line that replays it', (t) => {
    const quiet = { ...t, diagnostic: () => undefined } as unknown as typeof t;
    assert.throws(
      () => fuzz(quiet, 'always fails past 10', fc.integer(), (n) => n < 10, { runs: 1000 }),
      (error: unknown) => error instanceof Error && /seed -?\d+/.test(error.message) && /path: "[\d:]+"/.test(error.message) && error.message.includes('SWITCHBOARD_FUZZ_SEED=') && /Counterexample: \[10\]/.test(error.message),
    );
    assert.ok((casesRun.get('always fails past 10') ?? 0) > 0);
  });

  it('reads SWITCHBOARD_FUZZ_RUNS as a multiplier and SWITCHBOARD_FUZZ_SEED as an integer, refusing nonsense', () => {
    assert.equal(runScale({}), 1);
    assert.equal(runScale({ SWITCHBOARD_FUZZ_RUNS: '10' }), 10);
    assert.equal(runScale({ SWITCHBOARD_FUZZ_RUNS: '0.5' }), 0.5);
    assert.throws(() => runScale({ SWITCHBOARD_FUZZ_RUNS: 'lots' }), RangeError);
    assert.equal(fixedSeed({}), undefined);
    assert.equal(fixedSeed({ SWITCHBOARD_FUZZ_SEED: '-42' }), -42);
    assert.throws(() => fixedSeed({ SWITCHBOARD_FUZZ_SEED: '1.5' }), RangeError);
  });
});
