import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Update } from 'grammy/types';
import { handleBatch, orderKey } from './batch.ts';

let nextId = 1;
const text = (chat: number, body: string): Update => ({ update_id: nextId++, message: { message_id: nextId, date: 0, chat: { id: chat, type: 'private', first_name: 'x' }, text: body } }) as Update;
const withPhoto = (chat: number): Update => ({ update_id: nextId++, message: { message_id: nextId, date: 0, chat: { id: chat, type: 'private', first_name: 'x' }, photo: [{ file_id: 'f', file_unique_id: 'u', width: 1, height: 1 }] } }) as Update;
const migrated = (chat: number, to: number): Update => ({ update_id: nextId++, message: { message_id: nextId, date: 0, chat: { id: chat, type: 'group', title: 'g' }, migrate_to_chat_id: to } }) as Update;
const bodyOf = (update: Update): string => update.message?.text ?? `#${update.update_id}`;

/** A handler that records start and end order, and resolves each handle when told to (or after a tick). */
function recorder(fail?: (update: Update) => boolean): { handle: (update: Update) => Promise<void>; log: string[]; running: () => number; most: () => number } {
  const log: string[] = [];
  let running = 0;
  let most = 0;
  return {
    log,
    running: () => running,
    most: () => most,
    handle: async (update) => {
      running++;
      most = Math.max(most, running);
      log.push(`start ${bodyOf(update)}`);
      await new Promise((resolve) => setTimeout(resolve, 2));
      running--;
      log.push(`end ${bodyOf(update)}`);
      if (fail?.(update)) throw new Error(`push refused: ${bodyOf(update)}`);
    },
  };
}

describe('a getUpdates batch: each chat in order, chats side by side', () => {
  it("pushes one chat's updates one after the other, in order, and different chats at once", async () => {
    const updates = [text(1, 'a1'), text(2, 'b1'), text(1, 'a2'), text(3, 'c1'), text(2, 'b2'), text(1, 'a3')];
    const r = recorder();
    const result = await handleBatch(updates, r.handle);
    assert.deepEqual(result, { handled: 6 });
    for (const [first, second] of [['a1', 'a2'], ['a2', 'a3'], ['b1', 'b2']]) {
      assert.ok(r.log.indexOf(`end ${first}`) < r.log.indexOf(`start ${second}`), `${second} started after ${first} ended: ${r.log.join(', ')}`);
    }
    assert.equal(r.most(), 3, 'the three chats ran side by side');
    // the first update of each chat started before any ended (they went out together)
    assert.deepEqual(r.log.slice(0, 3), ['start a1', 'start b1', 'start c1']);
  });

  it('runs at most `limit` at once', async () => {
    const updates = Array.from({ length: 20 }, (_, i) => text(100 + i, `p${i}`));
    const r = recorder();
    assert.deepEqual(await handleBatch(updates, r.handle, 4), { handled: 20 });
    assert.equal(r.most(), 4);
  });

  it("runs a group's move and a message with a file alone: after all before, before all after", async () => {
    const move = migrated(5, -1005);
    const photo = withPhoto(6);
    assert.equal(orderKey(move), undefined);
    assert.equal(orderKey(photo), undefined);
    assert.equal(orderKey(text(7, 'x')), '7');
    const updates = [text(1, 'a1'), text(2, 'b1'), move, text(3, 'c1'), photo, text(4, 'd1')];
    const r = recorder();
    assert.deepEqual(await handleBatch(updates, r.handle), { handled: 6 });
    const at = (entry: string): number => r.log.indexOf(entry);
    const moveName = `#${move.update_id}`;
    const photoName = `#${photo.update_id}`;
    assert.ok(at(`end a1`) < at(`start ${moveName}`) && at(`end b1`) < at(`start ${moveName}`), r.log.join(', '));
    assert.ok(at(`end ${moveName}`) < at('start c1'), r.log.join(', '));
    assert.ok(at('end c1') < at(`start ${photoName}`) && at(`end ${photoName}`) < at('start d1'), r.log.join(', '));
  });

  it("after a failure: nothing more starts, a chat's later update never runs, and only the updates before the failed one count as handled", async () => {
    const updates = [text(1, 'a1'), text(2, 'b1'), text(2, 'b2'), text(1, 'a2'), text(3, 'c1'), text(3, 'c2')];
    const r = recorder((update) => bodyOf(update) === 'b1');
    const result = await handleBatch(updates, r.handle);
    assert.equal(result.handled, 1, 'a1 only: b1 failed, so nothing from it on is confirmed');
    assert.match(String(result.failure), /push refused: b1/);
    assert.ok(!r.log.includes('start b2'), "b1's chat stops at b1");
    // c2 was ready only after b1 failed; a2 (started before) may have run, but is not counted as handled
    assert.ok(!r.log.includes('start c2'), `nothing started after the failure: ${r.log.join(', ')}`);
  });

  it('an empty batch handles nothing', async () => {
    assert.deepEqual(await handleBatch([], () => Promise.reject(new Error('not called'))), { handled: 0 });
  });
});
