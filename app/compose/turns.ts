/**
 * Where turns wait and which node sends a reply — the runtime's two ports that differ between
 * one node and a cluster. The mode is chosen once, here and in ./cluster.ts: one node gets the
 * in-memory queue and sends every reply itself; a cluster gets pg-boss and the reply wake-up.
 */
import { createLocalQueue } from '../../src/runtime/local-queue.ts';
import { localReplies, type ReplyRoute } from '../../src/runtime/reply-route.ts';
import type { TurnQueue } from '../../src/runtime/turn-queue.ts';

export interface TurnParts {
  readonly queue: TurnQueue;
  readonly replies: ReplyRoute;
}

/** One node: turns in memory (`concurrency` at once, `maxQueued` waiting before `push` waits). */
export function localTurns(concurrency: number, maxQueued: number): TurnParts {
  return { queue: createLocalQueue({ concurrency, maxQueued }), replies: localReplies };
}
