/**
 * The fault walk (issue 22): one message's life through a real channel and its peer, with every
 * database operation of that life failing in turn — each with every fault its engine can raise
 * (src/store/faults.ts) — and afterwards, with the fault gone and with or without a restart,
 * every message answered exactly once. The way SQLite's own tests fail every I/O in turn.
 *
 * A baseline message is sent first with no fault, and its operations recorded: the accept, the
 * turn's reads, its commit, the delivery's marks, the channel's own acknowledgement (a Telegram
 * offset, Discord read positions, a Matrix sync token: channel state in the same database).
 * Then for each of them (as "the k-th operation with this SQL") and each fault a new message
 * goes through with that one operation failing. The outcome table is printed (t.diagnostic) and
 * every row must read `once`, or `twice` where the platform's at-least-once window is named
 * (`atLeastOnce`). The model is a scripted echo: the walk is about the store, not the agent.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import type { TurnHandler } from '../../src/agent/agent.ts';
import type { Channel, ChannelContext } from '../../src/channel.ts';
import type { TurnQueue } from '../../src/runtime/turn-queue.ts';
import { createAttachmentStore } from '../../src/inbound/attachments.ts';
import { Runtime } from '../../src/runtime/runtime.ts';
import { channelState } from '../../src/store/channel-state.ts';
import { ENGINE_FAULTS, withFaults, type FaultyDatabase, type Operation, type StoreFault } from '../../src/store/faults.ts';
import type { Database } from '../../src/store/sql.ts';
import { StorageHealth } from '../../src/store/storage.ts';
import { testLogger } from '../support/log.ts';
import { quiet, until } from '../support/wait.ts';

/** A channel under the walk: built afresh for every runtime, against one peer. */
export interface WalkChannel {
  readonly name: string;
  build(context: ChannelContext): Promise<Channel>;
  /** A person sends `text` to the bot. */
  say(text: string): Promise<void>;
  /** What the bot has posted to that person, in order. */
  replies(): readonly string[];
  /**
   * The platform's acknowledgement of the next message is lost on the way (a Slack ack, the
   * webhook's response, the browser chat's answer to its post): the platform (or sender) then
   * delivers it again. Omitted where the acknowledgement is channel state (a Telegram offset,
   * Discord read positions, a Matrix sync token: walked as database operations) or there is
   * none (IRC).
   */
  loseNextAck?(): void;
  /**
   * Undoes the acknowledgement of the message `text` after it was answered (IMAP: its \Seen flag
   * removed, as when the STORE was lost; the channel then finds it unread and pushes it once
   * more, for the inbox to recognise); `settled` resolves once the channel has acknowledged it again.
   */
  undoAck?(text: string): Promise<{ settled(): Promise<void> }>;
  close(): Promise<void>;
}

/** The store under the walk. */
export interface WalkEngine {
  readonly name: 'sqlite' | 'postgres';
  open(): Promise<{ database: Database; queue?: () => Promise<TurnQueue>; close(): Promise<void> }>;
}

export interface WalkOptions {
  /** Also stop and start the runtime right after each fault (the fault cleared first). @default true */
  readonly restart?: boolean;
  /** Operations (by a pattern of their SQL) where this channel may answer twice, and why (the README names the window). */
  readonly atLeastOnce?: ReadonlyArray<{ readonly sql: RegExp; readonly why: string }>;
  /**
   * Steps where a restart may lose the message because the platform cannot deliver it again
   * (IRC: a line is held in memory while the store refuses it; a stop before it is stored
   * loses it). The README names each.
   */
  readonly lostAtRestart?: ReadonlyArray<{ readonly step: RegExp; readonly why: string }>;
  /** Faults to walk. @default every fault of the engine */
  readonly faults?: readonly StoreFault[];
}

/** What one case came to. */
type Outcome = 'once' | 'twice' | 'lost' | 'more' | 'not reached';

/** The steps of a message's life, by their SQL (first match wins). */
const STEPS: ReadonlyArray<readonly [RegExp, string]> = [
  [/^INSERT INTO inbox/, 'accept (inbox insert)'],
  // the pg-boss queue's accept: the inbox insert and the turn's job in one statement (src/cluster/turn-jobs.ts)
  [/^WITH m AS \(\s*INSERT INTO inbox/, 'accept (inbox and job insert)'],
  [/^SELECT seq, conversation, payload, status FROM inbox/, 'turn start (inbox read)'],
  [/channel_state/, 'platform ack (channel state)'],
  [/FROM history/, 'history read'],
  [/FROM conversation_settings|FROM settings/, 'settings read'],
  [/^DELETE FROM drafts/, 'drafts clear'],
  [/FROM drafts/, 'draft read'],
  // on PostgreSQL a turn's commit wraps it in a statement that fails when the message no longer waits (src/store/inbox.ts)
  [/^(WITH finished AS \(\s*)?UPDATE inbox SET status/, 'inbox finish'],
  [/^INSERT INTO history/, 'history append'],
  [/^INSERT INTO outbox/, 'outbox record'],
  [/pgboss|job/i, 'queue'],
  [/^SELECT .*FROM outbox .*conversation = \?/s, 'delivery read'],
  [/^SELECT count\(\*\).*FROM outbox/s, 'pending count'],
  [/^SELECT DISTINCT.*FROM outbox|^SELECT .*FROM outbox .*GROUP BY/s, 'sweep read'],
  [/^UPDATE outbox SET status = 'sent'|^UPDATE outbox SET status = \?/, 'mark sent'],
];

/** A short name for an operation: its step in a message's life. */
export function stepOf(operation: Pick<Operation, 'kind' | 'sql'>): string {
  const sql = operation.sql.trim();
  const step = STEPS.find(([pattern]) => pattern.test(sql))?.[1] ?? sql.replace(/\s+/g, ' ').slice(0, 40);
  return operation.kind === 'commit' ? `commit of ${step}` : step;
}

const echo: TurnHandler = async ({ message }) => {
  const reply = `echo: ${message.text}`;
  return { reply, messages: [{ role: 'user', content: message.text }, { role: 'assistant', content: reply }] };
};

export function runFaultWalk(engine: WalkEngine, make: () => Promise<WalkChannel>, options: WalkOptions = {}): void {
  describe(`fault walk: ${engine.name}`, () => {
    it('answers every message exactly once whichever operation of its life fails, with and without a restart', { timeout: 1_500_000 }, async (t) => {
      const peer = await make();
      const store = await engine.open();
      const dataDir = mkdtempSync(join(tmpdir(), 'sb-walk-'));
      const faulty: FaultyDatabase = withFaults(store.database);
      const log = testLogger();
      let runtime: Runtime | undefined;
      let stopQueue: (() => Promise<void>) | undefined;

      async function start(): Promise<void> {
        const storage = new StorageHealth({ log, dataDir, probeIntervalMs: 50 });
        const context: ChannelContext = {
          name: peer.name,
          log,
          assistantName: 'Testbot',
          attachments: createAttachmentStore({ workspace: join(dataDir, 'workspace') }),
          state: channelState(faulty, peer.name),
          stateDir: '',
          storage,
        };
        const queue = await store.queue?.();
        stopQueue = queue ? () => queue.stop(1000) : undefined;
        runtime = new Runtime({
          database: faulty,
          log,
          channels: [await peer.build(context)],
          agent: echo,
          historyTurns: 4,
          maxInFlight: 4,
          maxQueued: 16,
          turnTimeoutMs: 20_000,
          shutdownGraceMs: 3000,
          supervisor: { initialBackoffMs: 50, maxBackoffMs: 300, healthyAfterMs: 60_000, stopTimeoutMs: 3000 },
          delivery: { attemptsPerRound: 3, initialBackoffMs: 20, maxBackoffMs: 300 },
          sweepIntervalMs: 1000,
          storage,
          ...(queue ? { queue } : {}),
        });
        await runtime.start();
        await runtime.ready;
      }
      async function stop(): Promise<void> {
        await runtime?.stop();
        await stopQueue?.();
        runtime = undefined;
      }
      const count = (text: string): number => peer.replies().filter((reply) => reply === `echo: ${text}`).length;
      const said: string[] = [];
      async function say(text: string): Promise<void> {
        said.push(text);
        await peer.say(text);
      }

      try {
        await start();
        // Warm up (first-use reads, a first sync), then record one fault-free life.
        await say('warm-up');
        await until(() => count('warm-up') === 1, 'the warm-up reply', 20_000);
        await quiet(500);
        faulty.record();
        await say('baseline');
        await until(() => count('baseline') === 1, 'the baseline reply', 20_000);
        await quiet(700); // the acknowledgement (an offset, a sync token) follows the reply
        const life = lifeOf(faulty.operations);
        assert.ok(life.length >= 5, `a message's life has its operations: ${JSON.stringify(life)}`);

        const rows: Array<{ text: string; step: string; fault: StoreFault | 'ACK_LOST'; restart: boolean; outcome: Outcome }> = [];
        const faults = options.faults ?? ENGINE_FAULTS[engine.name];
        for (const restart of options.restart === false ? [false] : [false, true]) {
          for (const point of life) {
            for (const fault of faults) {
              const text = `${restart ? 'r' : 'n'}${point.index} ${fault}`;
              const raised = faulty.raised;
              faulty.record();
              faulty.failOn(point, point.occurrence, fault);
              await say(text);
              const reached = await waitFor(() => faulty.raised > raised, 8000);
              faulty.clear();
              if (reached && restart) {
                await stop();
                await start();
              }
              await waitFor(() => count(text) >= 1, 15_000);
              await runtime!.idle();
              await quiet(250);
              const n = count(text);
              rows.push({ text, step: point.step, fault, restart, outcome: reached ? outcomeOf(n) : 'not reached' });
            }
          }
        }
        if (peer.loseNextAck) {
          for (const restart of options.restart === false ? [false] : [false, true]) {
            const text = `${restart ? 'r' : 'n'}ack lost`;
            peer.loseNextAck();
            await say(text);
            if (restart) {
              await stop();
              await start();
            }
            await waitFor(() => count(text) >= 1, 15_000);
            await runtime!.idle();
            await quiet(500);
            const n = count(text);
            rows.push({ text, step: 'platform ack lost', fault: 'ACK_LOST', restart, outcome: outcomeOf(n) });
          }
        }
        if (peer.undoAck) {
          for (const restart of options.restart === false ? [false] : [false, true]) {
            const text = `${restart ? 'r' : 'n'}ack undone`;
            await say(text);
            await waitFor(() => count(text) >= 1, 15_000);
            if (restart) await stop();
            const undone = await peer.undoAck(text);
            if (restart) await start();
            await undone.settled();
            await runtime!.idle();
            await quiet(1500);
            rows.push({ text, step: 'platform ack lost', fault: 'ACK_LOST', restart, outcome: outcomeOf(count(text)) });
          }
        }
        await quiet(1000);
        t.diagnostic(`${engine.name} × ${peer.name}: ${life.length} operations × ${faults.length} faults × ${options.restart === false ? 1 : 2}`);
        for (const row of rows) t.diagnostic(`${row.step.padEnd(44)} ${row.fault.padEnd(17)} ${row.restart ? 'restart' : 'running'} ${row.outcome}`);
        const allowed = (step: string): boolean => (options.atLeastOnce ?? []).some((window) => window.sql.test(step));
        const mayMiss = (row: { step: string; restart: boolean }): boolean => row.restart && (options.lostAtRestart ?? []).some((window) => window.step.test(row.step));
        const bad = rows.filter((row) => (row.outcome === 'lost' && !mayMiss(row)) || row.outcome === 'more' || (row.outcome === 'twice' && !allowed(row.step)));
        assert.deepEqual(bad, [], `cases answered other than once:\n${bad.map((row) => JSON.stringify(row)).join('\n')}`);
        // Nothing lost along the way either: every message ever said was answered, once (or within the window).
        const counts = said.map((text) => ({ text, n: count(text) }));
        const missed = new Set(rows.filter((row) => row.outcome === 'lost' && mayMiss(row)).map((row) => row.text));
        assert.deepEqual(
          counts.filter((c) => c.n === 0 && !missed.has(c.text)),
          [],
          'every message said was answered (but those a named window lets go)',
        );
      } finally {
        await stop().catch(() => undefined);
        await store.close().catch(() => undefined);
        await peer.close();
        rmSync(dataDir, { recursive: true, force: true });
      }
    });
  });
}

/** How many times a message was answered, as an outcome. */
const outcomeOf = (answers: number): Outcome => (answers === 1 ? 'once' : answers === 0 ? 'lost' : answers === 2 ? 'twice' : 'more');

/** The operations of one life, each as "the k-th operation with this SQL" (background reads of the sweep included). */
function lifeOf(operations: readonly Operation[]): Array<Operation & { occurrence: number; step: string }> {
  const seen = new Map<string, number>();
  return operations.map((operation) => {
    const key = `${operation.kind}\u0000${operation.sql}`;
    const occurrence = (seen.get(key) ?? 0) + 1;
    seen.set(key, occurrence);
    return { ...operation, occurrence, step: `${stepOf(operation)}${occurrence > 1 ? ` #${occurrence}` : ''}` };
  });
}

async function waitFor(condition: () => boolean, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > deadline) return false;
    await quiet(20);
  }
  return true;
}
