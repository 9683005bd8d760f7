/**
 * The console's chart geometry (console/src/chart-geometry.ts): a single minute of data — the
 * first turn's latency — is drawn as a visible stroke inside the chart, not as a dot cut in half
 * at the right edge (issue 25).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { chartGeometry } from '../console/src/chart-geometry.ts';

const width = 300;
const height = 90;
const minutes = (entries: Record<number, number>): Array<number | undefined> => Array.from({ length: 60 }, (_, i) => entries[i]);

test('one point in the last minute: a stroke at least 8 units wide, wholly inside the chart, at its value', () => {
  const { peak, series } = chartGeometry(width, height, [{ values: minutes({ 59: 1.2 }) }]);
  assert.equal(peak, 1.2);
  const [only] = series;
  assert.equal(only!.points, '', 'no one-point polyline (it draws nothing)');
  assert.equal(only!.lone.length, 1);
  const stroke = only!.lone[0]!;
  assert.ok(stroke.x1 >= 4 && stroke.x2 <= width - 4, `inside the edges: ${JSON.stringify(stroke)}`);
  assert.ok(stroke.x2 - stroke.x1 >= 8, 'wide enough to see');
  assert.ok(stroke.y >= 4 && stroke.y <= height - 4, 'not on the top edge either');
  assert.equal(stroke.value, 1.2);
});

test('the first minute and a lone minute between gaps are strokes too; runs are lines; all inside', () => {
  const { series } = chartGeometry(width, height, [{ values: minutes({ 0: 3, 10: 1, 11: 2, 30: 0 }) }]);
  const [s] = series;
  assert.deepEqual(s!.lone.map((stroke) => stroke.value), [3, 0]);
  for (const stroke of s!.lone) assert.ok(stroke.x1 >= 4 && stroke.x2 <= width - 4 && stroke.y <= height - 4 && stroke.y >= 4, JSON.stringify(stroke));
  const points = s!.points.split(' ').map((point) => point.split(',').map(Number) as [number, number]);
  assert.equal(points.length, 4);
  for (const [x, y] of points) assert.ok(x >= 4 && x <= width - 4 && y >= 4 && y <= height - 4, `${x},${y}`);
});

test('no data at all draws nothing and has a zero peak', () => {
  const { peak, series } = chartGeometry(width, height, [{ values: minutes({}) }, { values: [] }]);
  assert.equal(peak, 0);
  assert.deepEqual(series, [{ points: '', lone: [] }, { points: '', lone: [] }]);
});
