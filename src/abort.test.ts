import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { deadline } from './abort.ts';

describe('deadline', () => {
  it('aborts with a TimeoutError when the time runs out', async () => {
    const limit = deadline(undefined, 20);
    await new Promise((resolve) => setTimeout(resolve, 60));
    assert.equal(limit.signal.aborted, true);
    assert.equal((limit.signal.reason as Error).name, 'TimeoutError');
  });

  it("aborts with the parent's reason when the parent aborts", () => {
    const parent = new AbortController();
    const limit = deadline(parent.signal, 60_000);
    parent.abort(new Error('shutdown'));
    assert.equal(limit.signal.aborted, true);
    assert.equal((limit.signal.reason as Error).message, 'shutdown');
  });

  it('is aborted at once under an aborted parent', () => {
    const limit = deadline(AbortSignal.abort(new Error('gone')), 60_000);
    assert.equal((limit.signal.reason as Error).message, 'gone');
  });

  it('after dispose, neither the timer nor the parent aborts it, and the parent holds no listener', async () => {
    const parent = new AbortController();
    let listeners = 0;
    const add = parent.signal.addEventListener.bind(parent.signal);
    const remove = parent.signal.removeEventListener.bind(parent.signal);
    parent.signal.addEventListener = ((...args: Parameters<typeof add>) => (listeners++, add(...args))) as typeof add;
    parent.signal.removeEventListener = ((...args: Parameters<typeof remove>) => (listeners--, remove(...args))) as typeof remove;
    const limit = deadline(parent.signal, 20);
    assert.equal(listeners, 1);
    limit.dispose();
    assert.equal(listeners, 0);
    await new Promise((resolve) => setTimeout(resolve, 60));
    parent.abort();
    assert.equal(limit.signal.aborted, false);
  });
});
