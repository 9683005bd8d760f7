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
