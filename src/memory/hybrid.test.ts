import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { mergeHybrid } from './hybrid.ts';

const weights = { vector: 0.7, keyword: 0.3 };

describe('mergeHybrid', () => {
  it('weighs cosine 0.7 and BM25 (normalised by the best) 0.3, each memory once', () => {
    const merged = mergeHybrid(
      [
        { rowid: 1, score: 0.9 },
        { rowid: 2, score: 0.5 },
      ],
      [
        { rowid: 2, score: 8 },
        { rowid: 3, score: 4 },
      ],
      weights,
    );
    const score = new Map(merged.map((hit) => [hit.rowid, hit.score]));
    assert.equal(merged.length, 3);
    assert.ok(Math.abs(score.get(1)! - 0.63) < 1e-9);
    assert.ok(Math.abs(score.get(2)! - (0.35 + 0.3)) < 1e-9);
    assert.ok(Math.abs(score.get(3)! - 0.15) < 1e-9);
    assert.deepEqual(
      merged.map((hit) => hit.rowid),
      [2, 1, 3],
    );
  });

  it('scores one side alone in [0, 1] when the other found nothing', () => {
    assert.deepEqual(mergeHybrid([], [{ rowid: 1, score: 2 }, { rowid: 2, score: 1 }], weights), [
      { rowid: 1, score: 1 },
      { rowid: 2, score: 0.5 },
    ]);
    assert.deepEqual(mergeHybrid([{ rowid: 1, score: 0.8 }], [], weights), [{ rowid: 1, score: 0.8 }]);
    assert.deepEqual(mergeHybrid([], [{ rowid: 1, score: 3 }], { vector: 1, keyword: 0 }), [{ rowid: 1, score: 1 }]);
    assert.deepEqual(mergeHybrid([], [], weights), []);
  });

  it('clamps negative cosine and odd scores into [0, 1]', () => {
    const merged = mergeHybrid([{ rowid: 1, score: -0.4 }, { rowid: 2, score: Number.NaN }], [], weights);
    assert.deepEqual(
      merged.map((hit) => hit.score),
      [0, 0],
    );
  });
});
