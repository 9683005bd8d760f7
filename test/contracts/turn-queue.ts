/**
 * The turn-queue contract: what every {@link TurnQueue} promises the runtime, run against each
 * implementation — the local one on p-queue (src/runtime/local-queue.test.ts) and pg-boss on a
 * real PostgreSQL (src/cluster/pg-boss-queue.test.ts) — so neither drifts.
 *
 * The suite keeps its own stand-in for the inbox (what is accepted and not yet done), as the
 * runtime does: `unanswered` reads it at start, and the worker marks a turn done. A "restart" is
 * a new queue on the same store, the old one stopped (or dropped, as a crash drops it).
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import type { Database } from '../../src/store/sql.ts';
import type { QueuedTurn, TurnQueue, TurnWorker } from '../../src/runtime/turn-queue.ts';
import { until } from '../support/wait.ts';

export interface TurnQueueHarness {
  /** Where the accepting transactions run (a shared queue stores its jobs in them). */
  readonly database: Database;
  /** A queue on the harness's store: a node, or the same node after a restart. */
  queue(options: { readonly concurrency: number; readonly maxQueued: number }): Promise<TurnQueue>;
  close(): Promise<void>;
}

const pause = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** A promise with its resolve exposed. */
function gate(): { promise: Promise<void>; open: () => void } {
  let open!: () => void;
  const promise = new Promise<void>((resolve) => (open = resolve));
  return { promise, open };
}

/** The runtime's side: an inbox stand-in, and a worker that records what ran when. */
class Node {
  /** Accepted and not done, by seq (the inbox's queued rows). */
  readonly inbox = new Map<number, QueuedTurn>();
  /** Every turn accepted (done or not), by seq. */
  readonly all = new Map<number, QueuedTurn>();
  readonly started: number[] = [];
  readonly done: number[] = [];
  /** Per conversation, the turns running now. */
  readonly running = new Map<string, number>();
  maxRunning = 0;
  maxRunningOfOneKey = 0;
  /** Turns that wait for their gate before they end. */
  readonly gates = new Map<number, { promise: Promise<void>; open: () => void }>();
  /** Turns that give up (as when cut off at shutdown) when their gate opens. */
  readonly giveUp = new Set<number>();
  #nextSeq = 1;
  #current = 0;

  readonly database: Database;

  constructor(database: Database) {
    this.database = database;
  }

  readonly worker: TurnWorker = async (seq, conversation, settle) => {
    if (!this.inbox.has(seq)) return 'done'; // a turn already answered runs again as a no-op
    this.started.push(seq);
    this.#current++;
    const ofKey = (this.running.get(conversation) ?? 0) + 1;
    this.running.set(conversation, ofKey);
    this.maxRunning = Math.max(this.maxRunning, this.#current);
    this.maxRunningOfOneKey = Math.max(this.maxRunningOfOneKey, ofKey);
    try {
      await (this.gates.get(seq)?.promise ?? pause(30));
      if (this.giveUp.has(seq)) return 'retry';
      this.inbox.delete(seq);
      this.done.push(seq);
    } finally {
      this.#current--;
      this.running.set(conversation, (this.running.get(conversation) ?? 1) - 1);
    }
    // As the runtime ends a turn: its records and a shared queue's job in one transaction. The
    // turn counts as ended before it: the conversation's next turn may start at its commit.
    if (settle) {
      await this.database.transaction(async (tx) => {
        await tx.get('SELECT 1 AS one');
        await settle.in(tx);
      });
      settle.committed();
    }
    return 'done';
  };

  readonly unanswered = async (): Promise<readonly QueuedTurn[]> => [...this.inbox.values()].sort((a, b) => a.seq - b.seq);

  /** Accepts one message of `conversation` as push does: reserve, store with its job, then tell the queue it committed. */
  async accept(queue: TurnQueue, conversation: string, options: { hold?: boolean } = {}): Promise<number> {
    const seq = this.#nextSeq++;
    if (options.hold) this.gates.set(seq, gate());
    const turn = { seq, conversation };
    const ticket = await queue.reserve();
    // In the runtime the inbox row commits with the job, so a worker never sees a job before its
    // row. The stand-in is in memory: fill it before the commit, or a worker woken by the job's
    // NOTIFY can run before this function resumes and take the turn for one already answered.
    this.inbox.set(seq, turn);
    this.all.set(seq, turn);
    try {
      await this.database.transaction(async (tx) => {
        await tx.get('SELECT 1 AS one');
        await ticket.enqueue(tx, turn);
      });
    } catch (error) {
      this.inbox.delete(seq);
      this.all.delete(seq);
      throw error;
    }
    ticket.committed(turn);
    return seq;
  }

  release(seq: number): void {
    this.gates.get(seq)?.open();
  }

  /** The turns of `conversation` in `list`, in its order. */
  ofConversation(conversation: string, list: readonly number[]): number[] {
    return list.filter((seq) => this.all.get(seq)?.conversation === conversation);
  }
}

export function turnQueueContract(kind: string, open: () => Promise<TurnQueueHarness>): void {
  describe(`turn-queue contract: ${kind}`, () => {
    const harnesses: TurnQueueHarness[] = [];
    const queues: TurnQueue[] = [];
    after(async () => {
      await Promise.all(queues.map((queue) => queue.stop(0).catch(() => undefined)));
      await Promise.all(harnesses.map((harness) => harness.close()));
    });
    async function setUp(): Promise<{ harness: TurnQueueHarness; node: Node }> {
      const harness = await open();
      harnesses.push(harness);
      return { harness, node: new Node(harness.database) };
    }
    async function started(harness: TurnQueueHarness, node: Node, concurrency: number): Promise<TurnQueue> {
      const queue = await harness.queue({ concurrency, maxQueued: 100 });
      queues.push(queue);
      await queue.start(node.worker, node.unanswered);
      return queue;
    }
    const accept = (node: Node, queue: TurnQueue, conversation: string, options: { hold?: boolean } = {}): Promise<number> => node.accept(queue, conversation, options);

    it('runs the turns of one conversation in order, one at a time, and different conversations in parallel', async () => {
      const { harness, node } = await setUp();
      const queue = await started(harness, node, 4);
      const keys = ['c:a:1', 'c:a:2', 'c:a:3'];
      const accepted: number[] = [];
      for (let round = 0; round < 5; round++) for (const key of keys) accepted.push(await accept(node, queue, key));
      await until(() => node.done.length === accepted.length, `all ${accepted.length} turns done (done: ${node.done.length})`, 30_000);
      for (const key of keys) assert.deepEqual(node.ofConversation(key, node.started), node.ofConversation(key, accepted), `${key} in order`);
      assert.equal(node.maxRunningOfOneKey, 1, 'never two turns of one conversation at once');
      assert.ok(node.maxRunning > 1, `conversations ran in parallel (at most ${node.maxRunning} at once)`);
      await queue.idle();
      assert.equal(queue.busy, false);
      assert.equal(queue.inFlight, 0);
    });

    it('counts the turns running and waiting, and idle() waits for the running ones', async () => {
      const { harness, node } = await setUp();
      const queue = await started(harness, node, 1);
      const first = await accept(node, queue, 'c:a:1', { hold: true });
      const second = await accept(node, queue, 'c:a:1');
      await until(() => node.started.includes(first), 'the first turn started');
      assert.equal(queue.inFlight, 1);
      assert.equal(queue.busy, true);
      // a shared queue counts every few seconds
      await until(() => queue.queued === 1, `one turn waiting (queued: ${queue.queued})`, 15_000);
      let idle = false;
      const idled = queue.idle().then(() => (idle = true));
      await pause(100);
      assert.equal(idle, false, 'idle() waits for the running turn');
      assert.ok(!node.started.includes(second), 'the second turn of the conversation waits for the first');
      node.release(first);
      await until(() => node.done.includes(second), 'the second turn done');
      await idled;
      await until(() => queue.queued === 0 && queue.inFlight === 0, `nothing left (queued: ${queue.queued}, in flight: ${queue.inFlight})`, 15_000);
    });

    it('stops gracefully: a running turn finishes, no new one starts, and the waiting ones run after a restart', async () => {
      const { harness, node } = await setUp();
      const queue = await started(harness, node, 1);
      const running = await accept(node, queue, 'c:a:1', { hold: true });
      const waiting = [await accept(node, queue, 'c:a:1'), await accept(node, queue, 'c:a:1')];
      await until(() => node.started.includes(running), 'the turn started');
      const stopped = queue.stop(5000);
      await pause(100);
      node.release(running);
      await stopped;
      assert.deepEqual(node.done, [running], 'the running turn finished within the grace');
      await pause(300);
      assert.deepEqual(node.started, [running], 'nothing started after stop');
      const next = await started(harness, node, 1);
      await until(() => node.done.length === 3, `the waiting turns ran after the restart (done: ${node.done.join(', ')})`, 30_000);
      assert.deepEqual(node.done, [running, ...waiting]);
      await next.stop(1000);
    });

    it('runs a turn again after a restart when it was cut off, or accepted and never run before a crash', async () => {
      const { harness, node } = await setUp();
      const queue = await started(harness, node, 2);
      const cut = await accept(node, queue, 'c:a:1', { hold: true });
      node.giveUp.add(cut);
      await until(() => node.started.includes(cut), 'the turn started');
      const stopped = queue.stop(5000);
      node.release(cut); // cut off: it ends unanswered
      await stopped;
      assert.deepEqual(node.done, []);
      // accepted on a node that died before it ran anything (never started, then dropped)
      const crashed = await harness.queue({ concurrency: 2, maxQueued: 100 });
      const orphan = await accept(node, crashed, 'c:a:2');
      await crashed.stop(0);
      node.giveUp.delete(cut);
      node.gates.delete(cut);
      const next = await started(harness, node, 2);
      await until(() => node.done.includes(cut) && node.done.includes(orphan), `both ran after the restart (done: ${node.done.join(', ')})`, 30_000);
      assert.equal(node.maxRunningOfOneKey, 1);
      await next.stop(1000);
    });
  });
}
