/**
 * sharp (and libvips with it) is loaded on the first photo, never at start: importing the
 * daemon's composition root and the media modules resolves no `sharp` or `@img/*` package.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { it } from 'node:test';
import { runModuleScript } from '../test/support/child.ts';

const root = join(import.meta.dirname, '..');

it('importing the daemon and the media modules does not load sharp', () => {
  const script = `
    import { registerHooks } from 'node:module';
    const seen = [];
    registerHooks({ resolve(specifier, context, next) { if (/^sharp$|^@img\\//.test(specifier)) seen.push(specifier); return next(specifier, context); } });
    for (const file of ['app/daemon.ts', 'app/compose/provider.ts', 'src/media/image.ts', 'src/media/vision.ts', 'src/media/workspace-images.ts', 'src/agent/agent.ts']) await import(${JSON.stringify(root)} + '/' + file);
    const { createImagePreparer } = await import(${JSON.stringify(root)} + '/src/media/image.ts');
    const preparer = createImagePreparer();
    const before = [...seen];
    await preparer.prepare(Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0, 16]), { longEdge: 64, maxBytes: 1e6, maxImages: 1, maxTotalBytes: 1e6 });
    process.stdout.write(JSON.stringify({ before, after: seen, loaded: preparer.loaded }));
  `;
  const out = runModuleScript<{ before: string[]; after: string[]; loaded: boolean }>(script, { cwd: root });
  assert.deepEqual(out.before, []);
  // The first photo loads it (the check is live: it does see sharp when it comes).
  assert.ok(out.after.includes('sharp'), JSON.stringify(out.after));
  assert.equal(out.loaded, true);
});
