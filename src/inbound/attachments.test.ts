import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { createAttachmentStore } from './attachments.ts';

const workspace = mkdtempSync(join(tmpdir(), 'sb-att-'));
after(() => rmSync(workspace, { recursive: true, force: true }));

describe('attachment store', () => {
  const store = createAttachmentStore({ workspace, maxBytes: 1000 });

  it('saves a file under inbox/<channel>/<message>/ with a safe name', async () => {
    const saved = await store.save({ channel: 'tg', messageId: '42:7', kind: 'file', name: '../../etc/passwd', mime: 'text/plain', download: async () => new TextEncoder().encode('hi') });
    assert.equal(saved.path, 'inbox/tg/42_7/passwd');
    assert.equal(saved.size, 2);
    assert.equal(readFileSync(join(workspace, saved.path), 'utf8'), 'hi');
  });

  it('never saves under a name of dots and spaces (" .." is not "..")', async () => {
    for (const [i, name] of [' ..', '.. ', ' . ', '. .', '\t..', ' ../x'].entries()) {
      const saved = await store.save({ channel: 'tg', messageId: `dots-${i}`, kind: 'file', name, download: async () => new TextEncoder().encode('hi') });
      assert.ok(saved.path, `${JSON.stringify(name)} saved: ${JSON.stringify(saved)}`);
      assert.match(saved.path, new RegExp(`^inbox/tg/dots-${i}/[^/]*[^/.\\s][^/]*$`), JSON.stringify(name));
    }
  });

  it('tells a failure with paths relative to the workspace', async () => {
    const saved = await store.save({ channel: 'tg', messageId: 'rel', kind: 'file', name: 'z.bin', download: async () => Promise.reject(new Error(`EACCES: open '${join(workspace, 'inbox', 'z.bin')}' (in ${workspace})`)) });
    assert.ok(!saved.note!.includes(workspace), saved.note);
    assert.match(saved.note!, /open 'inbox\/z\.bin' \(in \.\)/);
  });

  it('names a nameless photo from its type, streams chunks', async () => {
    async function* chunks() {
      yield new Uint8Array([1, 2]);
      yield new Uint8Array([3]);
    }
    const saved = await store.save({ channel: 'tg', messageId: '8', kind: 'photo', mime: 'image/jpeg', download: async () => chunks() });
    assert.equal(saved.name, 'photo.jpg');
    assert.equal(saved.size, 3);
  });

  it('describes but does not download a file over the limit (announced or actual), and survives a failed download', async () => {
    let called = false;
    const big = await store.save({ channel: 'tg', messageId: '9', kind: 'video', name: 'v.mp4', size: 5000, download: async () => ((called = true), new Uint8Array()) });
    assert.equal(called, false);
    assert.match(big.note!, /over the 1 KB limit/);
    const lying = await store.save({ channel: 'tg', messageId: '10', kind: 'file', name: 'x.bin', size: 10, download: async () => new Uint8Array(5000) });
    assert.equal(lying.path, undefined);
    assert.match(lying.note!, /limit/);
    const broken = await store.save({ channel: 'tg', messageId: '11', kind: 'file', name: 'y.bin', download: async () => Promise.reject(new Error('HTTP 500')) });
    assert.match(broken.note!, /HTTP 500/);
  });
});
