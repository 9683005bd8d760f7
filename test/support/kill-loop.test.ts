/** The kill loop's judgement bites: doubles, strays and reordering are caught, the resend window is narrow. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { judge, prng, type KillLoopAdapter, type SentMessage } from './kill-loop.ts';

const sent: SentMessage[] = [1, 2, 3].map((n) => ({ n, conversation: n === 2 ? 'b' : 'a', text: `note-${n}`, startedAt: 0, sentAt: 0 }));
const adapter = (a: string[], b: string[], window?: KillLoopAdapter['resendWindow']): Parameters<typeof judge>[0] => ({
  conversations: ['a', 'b'],
  replies: (conversation) => (conversation === 'a' ? a : b),
  ...(window ? { resendWindow: window } : {}),
});
const times = (a: number[], b: number[] = [1000]): Map<string, number[]> => new Map([['a', a], ['b', b]]);

describe('kill loop judgement', () => {
  it('passes replies that are once each and in order', () => {
    assert.deepEqual(judge(adapter(['got note-1', 'got note-3'], ['got note-2']), sent, [], times([1000, 2000])), { problems: [], forgiven: [] });
  });

  it('catches a double, a reply in the wrong conversation and replies out of order', () => {
    assert.match(judge(adapter(['got note-1', 'got note-1', 'got note-3'], ['got note-2']), sent, [], times([1000, 1100, 2000])).problems.join(), /note-1 answered twice/);
    assert.match(judge(adapter(['got note-1', 'got note-2'], []), sent, [], times([1000, 2000], [])).problems.join(), /answers no message of this conversation/);
    assert.match(judge(adapter(['got note-3', 'got note-1'], ['got note-2']), sent, [], times([1000, 2000])).problems.join(), /out of order: 3, 1/);
    const late = { ...adapter(['got note-3', 'got note-1'], ['got note-2']), lateByPlatform: () => new Set([1]) };
    assert.deepEqual(judge(late, sent, [], times([1000, 2000])).problems, [], 'a message the platform delivered late may be answered after later ones');
    assert.match(judge(adapter(['got note-1', 'got note-3', 'got note-1'], ['got note-2']), sent, [], times([1000, 2000, 3000])).problems.join(), /answered again later, not in a row: 1/);
  });

  it('forgives an adjacent second copy only with a kill inside the resend window', () => {
    const replies = adapter(['got note-1', 'got note-1', 'got note-3'], ['got note-2'], { beforeMs: 300, afterMs: 1500 });
    const seen = times([1000, 3000, 4000]);
    assert.equal(judge(replies, sent, [1200], seen).problems.length, 0);
    assert.equal(judge(replies, sent, [1200], seen).forgiven.length, 1);
    assert.match(judge(replies, sent, [2600], seen).problems.join(), /answered twice/, 'a kill after the window');
    assert.match(judge(replies, sent, [500], seen).problems.join(), /answered twice/, 'a kill before the window');
    assert.match(judge(adapter(['got note-1', 'got note-1', 'got note-3'], ['got note-2']), sent, [1200], seen).problems.join(), /answered twice/, 'no window: never forgiven');
  });

  it('replays a run from its seed', () => {
    const a = prng(42);
    const b = prng(42);
    assert.deepEqual([a(), a(), a()], [b(), b(), b()]);
  });
});
