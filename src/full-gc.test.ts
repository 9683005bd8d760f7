/**
 * oldSpaceKeeper: a full collection once the old space has grown past the slack, checked every
 * `every` calls; run in a child process (it changes V8 flags of the process it runs in).
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { it } from 'node:test';

const gcModule = pathToFileURL(join(import.meta.dirname, 'full-gc.ts')).href;

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
  const out = JSON.parse(execFileSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' })) as Record<string, number | string>;
  assert.ok((out.afterFirst as number) > (out.grown as number) - 64 * 1024, `the first call of two checks nothing: ${JSON.stringify(out)}`);
  assert.ok((out.afterSecond as number) < (out.grown as number) - 1024 * 1024, JSON.stringify(out));
  assert.equal(out.gc, 'undefined');
});

it('oldSpaceGuard: collects once the old space grew past the slack; nothing after stop; no gc() exposed', () => {
  const script = `
    import { PerformanceObserver, constants } from 'node:perf_hooks';
    import { runInNewContext } from 'node:vm';
    import { oldSpaceGuard } from ${JSON.stringify(gcModule)};
    // Garbage that reaches the old space: each ~0.5 MB batch is kept across a few scavenges (so
    // promoted), then dropped; the event loop turns between batches, as under traffic, so the
    // guard hears of the scavenges. Counts our (forced) full collections.
    const forced = { count: 0 };
    new PerformanceObserver((list) => {
      for (const entry of list.getEntries()) {
        if (entry.detail.kind === constants.NODE_PERFORMANCE_GC_MAJOR && entry.detail.flags & constants.NODE_PERFORMANCE_GC_FLAGS_FORCED) forced.count++;
      }
    }).observe({ entryTypes: ['gc'] });
    const turn = () => new Promise((resolve) => setImmediate(resolve));
    async function promoteAndDrop() {
      const kept = [];
      for (let batch = 0; batch < 40; batch++) {
        const objects = [];
        for (let i = 0; i < 8000; i++) objects.push({ batch, i, s: 'x' + i });
        kept.push(objects);
        if (kept.length > 4) kept.shift();
        for (let i = 0; i < 20000; i++) ({ i, s: 'y' + i });
        await turn();
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
      return forced.count;
    }
    const stop = oldSpaceGuard(1024 * 1024);
    const guarded = await promoteAndDrop();
    stop();
    const before = forced.count;
    const stopped = (await promoteAndDrop()) - before;
    process.stdout.write(JSON.stringify({ guarded, stopped, gc: runInNewContext('typeof gc') }));
  `;
  const out = JSON.parse(execFileSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' })) as { guarded: number; stopped: number; gc: string };
  assert.ok(out.guarded >= 1, `collected while guarded: ${JSON.stringify(out)}`);
  assert.equal(out.stopped, 0, `nothing collected after stop: ${JSON.stringify(out)}`);
  assert.equal(out.gc, 'undefined');
});

it('oldSpaceGuard: the slack grows with what lived (slackRatio): a larger live heap is collected less often', () => {
  const script = `
    import { PerformanceObserver, constants } from 'node:perf_hooks';
    import { oldSpaceGuard } from ${JSON.stringify(gcModule)};
    const forced = { count: 0 };
    new PerformanceObserver((list) => {
      for (const entry of list.getEntries()) {
        if (entry.detail.kind === constants.NODE_PERFORMANCE_GC_MAJOR && entry.detail.flags & constants.NODE_PERFORMANCE_GC_FLAGS_FORCED) forced.count++;
      }
    }).observe({ entryTypes: ['gc'] });
    const turn = () => new Promise((resolve) => setImmediate(resolve));
    // ~16 MB that stays alive throughout: what lived after each collection
    const ballast = Array.from({ length: 200000 }, (_, i) => ({ i, s: 'ballast-' + i, pad: [i, i + 1, i + 2] }));
    async function promoteAndDrop() {
      const kept = [];
      for (let batch = 0; batch < 300; batch++) {
        const objects = [];
        for (let i = 0; i < 8000; i++) objects.push({ batch, i, s: 'x' + i });
        kept.push(objects);
        if (kept.length > 12) kept.shift();
        for (let i = 0; i < 20000; i++) ({ i, s: 'y' + i });
        await turn();
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    async function collectedWith(ratio) {
      const stop = oldSpaceGuard(1024 * 1024, ratio);
      const before = forced.count;
      await promoteAndDrop();
      stop();
      return forced.count - before;
    }
    const fixed = await collectedWith(0);
    const scaled = await collectedWith(10);
    process.stdout.write(JSON.stringify({ fixed, scaled, ballast: ballast.length }));
  `;
  const out = JSON.parse(execFileSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' })) as { fixed: number; scaled: number };
  assert.ok(out.fixed >= 1, `a 1 MB slack over ~16 MB alive collects: ${JSON.stringify(out)}`);
  assert.equal(out.scaled, 0, `a slack of 10 × what lived (~160 MB) is never reached here: ${JSON.stringify(out)}`);
});
