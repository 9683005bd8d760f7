import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, it } from 'node:test';
import type { Api } from 'grammy';
import type { Update } from 'grammy/types';
import { testLogger } from '../../test/support/log.ts';
import { poll, type PollState } from './poll.ts';

const link = { ready: () => undefined, alive: () => undefined, deaf: () => undefined };

const update = (id: number, chat: number, extra: Record<string, unknown> = {}): Update =>
  ({ update_id: id, message: { message_id: id, date: 0, chat: { id: chat, type: 'private' }, text: `m${id}`, ...extra } }) as unknown as Update;

/** Polls one batch, then stops; `handle` sees each update. */
async function pollOnce(batch: Update[], handle: (update: Update) => Promise<void>): Promise<{ state: PollState; saved: Array<number | undefined>; error: unknown }> {
  const state: PollState = { offset: undefined };
  const saved: Array<number | undefined> = [];
  const stop = new AbortController();
  let asked = 0;
  const api = {
    getUpdates: async () => {
      if (asked++ === 0) return batch;
      stop.abort();
      return [];
    },
  } as unknown as Api;
  let error: unknown;
  await poll({ api, token: 't', timeoutSeconds: 0, server: 'http://127.0.0.1', livenessMs: 60_000, log: testLogger(), state, save: async (offset) => void saved.push(offset), handle }, stop.signal, link).catch((failure: unknown) => (error = failure));
  return { state, saved, error };
}

describe('Telegram long polling: a batch', () => {
  it("handles a chat's updates in order and chats side by side, then confirms the whole batch", async () => {
    const order: string[] = [];
    const { state, saved, error } = await pollOnce([update(1, 10), update(2, 20), update(3, 10), update(4, 20)], async (u) => {
      const text = (u.message as { text: string }).text;
      order.push(`start ${text}`);
      if (u.message!.chat.id === 10) await sleep(30); // a slow store for chat 10
      order.push(`end ${text}`);
    });
    assert.equal(error, undefined);
    assert.ok(order.indexOf('end m1') < order.indexOf('start m3'), `chat 10 in order: ${order.join(', ')}`);
    assert.ok(order.indexOf('end m4') < order.indexOf('end m1'), `chat 20 not held up by chat 10: ${order.join(', ')}`);
    assert.equal(state.offset, 5);
    assert.deepEqual(saved, [5]);
  });

  it('stops a chat at its first failure and confirms only what came before it', async () => {
    const handled: number[] = [];
    const { state, saved, error } = await pollOnce([update(1, 20), update(2, 10), update(3, 20), update(4, 10)], async (u) => {
      if (u.update_id === 2) throw new Error('push refused');
      handled.push(u.update_id);
    });
    assert.match(String(error), /push refused/);
    assert.deepEqual(handled.sort(), [1, 3], 'the failed chat stops; the other goes on');
    assert.equal(state.offset, 2, 'confirmed up to the failure only (what came after is read again, and deduplicated)');
    assert.deepEqual(saved, []);
  });

  it("handles a group's move to a supergroup after everything before it and before everything after it", async () => {
    const order: number[] = [];
    const batch = [update(1, 10), update(2, 30, { migrate_from_chat_id: 10 }), update(3, 30), update(4, 20)];
    await pollOnce(batch, async (u) => {
      if (u.update_id === 1) await sleep(30);
      order.push(u.update_id);
    });
    assert.deepEqual(order.slice(0, 2), [1, 2]);
    assert.deepEqual(order.slice(2).sort(), [3, 4]);
  });
});
