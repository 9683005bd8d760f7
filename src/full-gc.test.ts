/**
 * oldSpaceKeeper: a full collection once the old space has grown past the slack, checked every
 * `every` calls; run in a child process (it changes V8 flags of the process it runs in).
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { it } from 'node:test';
import { runModuleScript } from '../test/support/child.ts';

const gcModule = pathToFileURL(join(import.meta.dirname, 'full-gc.ts')).href;
const workload = pathToFileURL(join(import.meta.dirname, '..', 'test', 'fixtures', 'gc-workload.ts')).href;

it('collects the old space once it grew past the slack, on the every-th call, and exposes no gc()', () => {
  const script = `
    import { getHeapSpaceStatistics } from 'node:v8';
    import { runInNewContext } from 'node:vm';
    import { oldSpaceKeeper } from ${JSON.stringify(gcModule)};
    const old = () => getHeapSpaceStatistics().find((space) => space.space_name === 'old_space').space_used_size;
    const keep = oldSpaceKeeper(1024 * 1024, 2);
    let junk = [];
    // Kept across many scavenges, so promoted to the old space; then dropped.
    for (let i = 0; i < 200000; i++) junk.push({ i, s: 'x' + i });
    for (let i = 0; i < 200000; i++) ({ i, s: 'y' + i });
    junk = undefined;
    const grown = old();
    keep();
    const afterFirst = old();
    keep();
    const afterSecond = old();
    process.stdout.write(JSON.stringify({ grown, afterFirst, afterSecond, gc: runInNewContext('typeof gc') }));
  `;
  const out = runModuleScript<Record<string, number | string>>(script);
  assert.ok((out.afterFirst as number) > (out.grown as number) - 64 * 1024, `the first call of two checks nothing: ${JSON.stringify(out)}`);
  assert.ok((out.afterSecond as number) < (out.grown as number) - 1024 * 1024, JSON.stringify(out));
  assert.equal(out.gc, 'undefined');
});

it('oldSpaceGuard: collects once the old space grew past the slack; nothing after stop; no gc() exposed', () => {
  const script = `
    import { runInNewContext } from 'node:vm';
    import { oldSpaceGuard } from ${JSON.stringify(gcModule)};
    import { countForced, promoteAndDrop } from ${JSON.stringify(workload)};
    const forced = countForced();
    const stop = oldSpaceGuard(1024 * 1024);
    await promoteAndDrop();
    const guarded = forced.count;
    stop();
    await promoteAndDrop();
    const stopped = forced.count - guarded;
    process.stdout.write(JSON.stringify({ guarded, stopped, gc: runInNewContext('typeof gc') }));
  `;
  const out = runModuleScript<{ guarded: number; stopped: number; gc: string }>(script);
  assert.ok(out.guarded >= 1, `collected while guarded: ${JSON.stringify(out)}`);
  assert.equal(out.stopped, 0, `nothing collected after stop: ${JSON.stringify(out)}`);
  assert.equal(out.gc, 'undefined');
});

it('oldSpaceGuard: the slack grows with what lived (slackRatio): a larger live heap is collected less often', () => {
  const script = `
    import { oldSpaceGuard } from ${JSON.stringify(gcModule)};
    import { countForced, promoteAndDrop } from ${JSON.stringify(workload)};
    const forced = countForced();
    // ~16 MB that stays alive throughout: what lived after each collection
    const ballast = Array.from({ length: 200000 }, (_, i) => ({ i, s: 'ballast-' + i, pad: [i, i + 1, i + 2] }));
    async function collectedWith(ratio) {
      const stop = oldSpaceGuard(1024 * 1024, ratio);
      const before = forced.count;
      await promoteAndDrop(300, 12);
      stop();
      return forced.count - before;
    }
    const fixed = await collectedWith(0);
    const scaled = await collectedWith(10);
    process.stdout.write(JSON.stringify({ fixed, scaled, ballast: ballast.length }));
  `;
  const out = runModuleScript<{ fixed: number; scaled: number }>(script);
  assert.ok(out.fixed >= 1, `a 1 MB slack over ~16 MB alive collects: ${JSON.stringify(out)}`);
  assert.equal(out.scaled, 0, `a slack of 10 × what lived (~160 MB) is never reached here: ${JSON.stringify(out)}`);
});
