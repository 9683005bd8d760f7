/**
 * src/media/transcribe.ts is loaded on the first voice note, never at start: importing the
 * daemon's composition root and the agent loads no transcription module.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { it } from 'node:test';
import { runModuleScript } from '../test/support/child.ts';

const root = join(import.meta.dirname, '..');

it('importing the daemon and the agent does not load the transcription client', () => {
  const script = `
    import { registerHooks } from 'node:module';
    const seen = [];
    registerHooks({ load(url, context, next) { if (url.includes('/media/transcribe')) seen.push(url); return next(url, context); } });
    for (const file of ['app/daemon.ts', 'src/agent/agent.ts', 'src/inbound/attachments.ts']) await import(${JSON.stringify(root)} + '/' + file);
    const before = [...seen];
    await import(${JSON.stringify(root)} + '/src/media/transcribe.ts');
    process.stdout.write(JSON.stringify({ before, after: seen }));
  `;
  const out = runModuleScript<{ before: string[]; after: string[] }>(script, { cwd: root });
  assert.deepEqual(out.before, []);
  // The check is live: it does see the module when it is imported.
  assert.equal(out.after.length, 1, JSON.stringify(out.after));
});
