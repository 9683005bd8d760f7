import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import type { TurnHandler, TurnInput } from '../agent/agent.ts';
import type { InboundMessage } from '../channel.ts';
import { ProviderError } from '../provider.ts';
import { openDatabase, type Db } from '../store/db.ts';
import { sqliteDatabase } from '../store/sqlite-sql.ts';
import { createMemoryChannel, type MemoryChannel } from '../../test/support/memory-channel.ts';
import { testLogger } from '../../test/support/log.ts';
import { defaultSupervisorOptions } from './supervisor.ts';
import { Runtime, type RuntimeOptions } from './runtime.ts';

const dir = mkdtempSync(join(tmpdir(), 'sb-runtime-'));
after(() => rmSync(dir, { recursive: true, force: true }));
let dbCount = 0;

const echo: TurnHandler = async ({ message }) => ({
  reply: `re: ${message.text}`,
  messages: [
    { role: 'user', content: message.text },
    { role: 'assistant', content: `re: ${message.text}` },
  ],
});

function makeRuntime(channel: MemoryChannel, agent: TurnHandler, db: Db, overrides: Partial<RuntimeOptions> = {}): Runtime {
  return new Runtime({
    database: sqliteDatabase(db),
    log: testLogger(),
    channels: [channel],
    agent,
    historyTurns: 50,
    maxInFlight: 8,
    maxQueued: 100,
    turnTimeoutMs: 10_000,
    shutdownGraceMs: 2000,
    supervisor: defaultSupervisorOptions,
    delivery: { attemptsPerRound: 3, initialBackoffMs: 5, maxBackoffMs: 20 },
    ...overrides,
  });
}

const freshDb = (): { db: Db; path: string } => {
  const path = join(dir, `rt${++dbCount}.db`);
  return { db: openDatabase(path), path };
};

describe('Runtime', () => {
  it('answers a message in its conversation and gives the next turn the history', async () => {
    const inputs: TurnInput[] = [];
    const channel = createMemoryChannel();
    const runtime = makeRuntime(
      channel,
      async (input) => {
        inputs.push(input);
        return echo(input);
      },
      freshDb().db,
    );
    await runtime.start();
    await runtime.ready;
    assert.equal(await channel.inject({ id: 'm1', text: 'hello' }), 'accepted');
    await channel.waitForSent(1);
    assert.equal(await channel.inject({ id: 'm2', text: 'again' }), 'accepted');
    await channel.waitForSent(2);
    assert.deepEqual(channel.sent[0], { channel: 'mem', account: 'acct', chat: 'chat1', text: 're: hello', replyTo: 'm1' });
    assert.equal(inputs[0]!.conversation, 'mem:acct:chat1');
    assert.deepEqual(inputs[0]!.history, []);
    assert.deepEqual(
      inputs[1]!.history.map((m) => m.content),
      ['hello', 're: hello'],
    );
    await runtime.stop();
    assert.equal(runtime.health().counters.answered, 2);
  });

  it('answers a redelivered message once', async () => {
    const channel = createMemoryChannel();
    let turns = 0;
    const runtime = makeRuntime(
      channel,
      async (input) => {
        turns++;
        return echo(input);
      },
      freshDb().db,
    );
    await runtime.start();
    assert.equal(await channel.inject({ id: 'same', text: 'hi' }), 'accepted');
    assert.equal(await channel.inject({ id: 'same', text: 'hi' }), 'duplicate');
    await runtime.idle();
    assert.equal(await channel.inject({ id: 'same', text: 'hi' }), 'duplicate', 'still a duplicate after the answer');
    await runtime.idle();
    assert.equal(turns, 1);
    assert.equal(channel.sent.length, 1);
    assert.equal(runtime.health().counters.duplicates, 2);
    await runtime.stop();
  });

  it('re-runs a turn cut off by shutdown on the next start, answering exactly once', async () => {
    const { db, path } = freshDb();
    const first = createMemoryChannel();
    const stuck = makeRuntime(first, (input) => new Promise((_, reject) => input.signal.addEventListener('abort', () => reject(input.signal.reason))), db, {
      shutdownGraceMs: 50,
    });
    await stuck.start();
    await first.inject({ id: 'm1', text: 'slow question' });
    await first.inject({ id: 'm2', text: 'queued behind it' });
    await stuck.stop();
    db.close();
    assert.equal(first.sent.length, 0);

    const second = createMemoryChannel();
    const runtime = makeRuntime(second, echo, openDatabase(path));
    await runtime.start();
    await second.waitForSent(2);
    await runtime.idle();
    assert.deepEqual(
      second.sent.map((m) => m.text),
      ['re: slow question', 're: queued behind it'],
    );
    await runtime.stop();
  });

  it('hands a channel that skips interrupted turns what an earlier run left unanswered, instead of answering it late', async () => {
    const { db, path } = freshDb();
    const first = createMemoryChannel();
    const other = createMemoryChannel('other');
    const stuck = makeRuntime(first, (input) => new Promise((_, reject) => input.signal.addEventListener('abort', () => reject(input.signal.reason))), db, {
      shutdownGraceMs: 50,
      channels: [first, other],
    });
    await stuck.start();
    await first.inject({ id: 'm1', text: 'slow question' });
    await first.inject({ id: 'm2', text: 'queued behind it' });
    await other.inject({ id: 'o1', text: 'on another channel' });
    await stuck.stop();
    db.close();

    const skipped: string[][] = [];
    const second = Object.assign(createMemoryChannel(), { skipInterrupted: (messages: readonly InboundMessage[]) => void skipped.push(messages.map((m) => m.text)) });
    const secondOther = createMemoryChannel('other');
    const agentSaw: string[] = [];
    const reopened = openDatabase(path);
    const seeing: TurnHandler = async (input) => {
      agentSaw.push(input.message.text);
      return echo(input);
    };
    const runtime = makeRuntime(second, seeing, reopened, { channels: [second, secondOther] });
    await runtime.start();
    assert.deepEqual(skipped, [['slow question', 'queued behind it']], 'handed over once, in order, before listening');
    await second.inject({ id: 'm3', text: 'a new question' });
    await second.waitForSent(1);
    await secondOther.waitForSent(1);
    await runtime.idle();
    assert.deepEqual(
      second.sent.map((m) => m.text),
      ['re: a new question'],
      'the new question is answered at once, and the old ones not at all',
    );
    assert.deepEqual(agentSaw.sort(), ['a new question', 'on another channel'], 'a channel without the capability has its turn run again');
    const rows = reopened.prepare("SELECT platform_id, status, error FROM inbox WHERE channel = 'mem' ORDER BY seq").all();
    assert.deepEqual(rows, [
      { platform_id: 'm1', status: 'ignored', error: 'interrupted' },
      { platform_id: 'm2', status: 'ignored', error: 'interrupted' },
      { platform_id: 'm3', status: 'done', error: null },
    ]);
    await runtime.stop();
  });

  it('sends a recorded-but-unsent reply after a restart, exactly once, without asking the model again', async () => {
    const { db, path } = freshDb();
    const first = createMemoryChannel();
    first.failNext(3);
    const runtime1 = makeRuntime(first, echo, db);
    await runtime1.start();
    await first.inject({ id: 'm1', text: 'hello' });
    await runtime1.idle();
    assert.equal(first.sent.length, 0);
    await runtime1.stop();
    db.close();

    let turns = 0;
    const second = createMemoryChannel();
    const runtime2 = makeRuntime(
      second,
      async (input) => {
        turns++;
        return echo(input);
      },
      openDatabase(path),
    );
    await runtime2.start();
    await second.waitForSent(1);
    await runtime2.idle();
    assert.equal(turns, 0);
    assert.deepEqual(
      second.sent.map((m) => m.text),
      ['re: hello'],
    );
    assert.equal(runtime2.health().pendingReplies, 0);
    await runtime2.stop();
  });

  it('tells the user when a turn fails, and keeps the failed exchange out of the history', async () => {
    const channel = createMemoryChannel();
    const histories: number[] = [];
    let call = 0;
    const runtime = makeRuntime(
      channel,
      async (input) => {
        histories.push(input.history.length);
        if (++call === 1) throw new ProviderError('HTTP 500', { status: 500 });
        return echo(input);
      },
      freshDb().db,
    );
    await runtime.start();
    await channel.inject({ id: 'm1', text: 'first' });
    await channel.inject({ id: 'm2', text: 'second' });
    await channel.waitForSent(2);
    assert.match(channel.sent[0]!.text, /could not reach the model/);
    assert.equal(channel.sent[1]!.text, 're: second');
    assert.deepEqual(histories, [0, 0]);
    assert.equal(runtime.health().counters.failed, 1);
    await runtime.stop();
  });

  it('apologises when a turn runs past its timeout', async () => {
    const channel = createMemoryChannel();
    const runtime = makeRuntime(
      channel,
      (input) => new Promise((_, reject) => input.signal.addEventListener('abort', () => reject(new Error('aborted')))),
      freshDb().db,
      { turnTimeoutMs: 30 },
    );
    await runtime.start();
    await channel.inject({ id: 'm1', text: 'slow' });
    await channel.waitForSent(1);
    assert.match(channel.sent[0]!.text, /took too long/);
    await runtime.stop();
  });

  it('sends nothing for an empty reply, but still marks the message answered', async () => {
    const channel = createMemoryChannel();
    const runtime = makeRuntime(channel, async () => ({ reply: '', messages: [{ role: 'user', content: 'x' }] }), freshDb().db);
    await runtime.start();
    await channel.inject({ id: 'm1', text: 'x' });
    await runtime.idle();
    assert.equal(channel.sent.length, 0);
    assert.equal(runtime.health().counters.answered, 1);
    await runtime.stop();
  });

  it('makes push wait when too much is queued (backpressure)', async () => {
    const channel = createMemoryChannel();
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const runtime = makeRuntime(
      channel,
      async (input) => {
        await gate;
        return echo(input);
      },
      freshDb().db,
      { maxInFlight: 1, maxQueued: 2 },
    );
    await runtime.start();
    let accepted = 0;
    const pushes = Array.from({ length: 6 }, (_, i) => channel.inject({ id: `m${i}`, text: `t${i}`, chat: `c${i}` }).then(() => accepted++));
    await new Promise((resolve) => setTimeout(resolve, 50));
    assert.equal(accepted, 3, 'one running + two queued; the rest wait');
    assert.equal(runtime.health().queued, 2);
    release();
    await Promise.all(pushes);
    await runtime.idle();
    assert.equal(channel.sent.length, 6);
    await runtime.stop();
  });

  it('runs one turn per conversation at a time but conversations in parallel', async () => {
    const channel = createMemoryChannel();
    const active = new Map<string, number>();
    let parallel = 0;
    let maxParallel = 0;
    const runtime = makeRuntime(
      channel,
      async (input) => {
        const n = (active.get(input.conversation) ?? 0) + 1;
        active.set(input.conversation, n);
        assert.equal(n, 1, 'two turns of one conversation ran at once');
        maxParallel = Math.max(maxParallel, ++parallel);
        await new Promise((resolve) => setTimeout(resolve, 5));
        parallel--;
        active.set(input.conversation, n - 1);
        return echo(input);
      },
      freshDb().db,
      { maxInFlight: 4 },
    );
    await runtime.start();
    for (let i = 0; i < 40; i++) await channel.inject({ id: `m${i}`, text: `${i}`, chat: `c${i % 8}` });
    await runtime.idle();
    assert.equal(channel.sent.length, 40);
    assert.equal(maxParallel, 4);
    for (let c = 0; c < 8; c++) {
      const texts = channel.sent.filter((m) => m.chat === `c${c}`).map((m) => Number(m.text.slice(4)));
      assert.deepEqual(
        texts,
        [...texts].sort((a, b) => a - b),
        `conversation c${c} answered in order`,
      );
    }
    await runtime.stop();
  });

  it('refuses pushes once stopping, so the platform does not get an acknowledgement', async () => {
    const channel = createMemoryChannel();
    const runtime = makeRuntime(channel, echo, freshDb().db);
    await runtime.start();
    await runtime.ready;
    const stopping = runtime.stop();
    await assert.rejects(runtime.push({ channel: 'mem', account: 'a', chat: 'c', id: 'late', sender: { id: 'u' }, text: 'x', timestamp: 0 }), /shutting down/);
    await stopping;
  });

  it('rejects two channels with one name', () => {
    assert.throws(
      () => new Runtime({ ...({} as RuntimeOptions), database: sqliteDatabase(openDatabase(':memory:')), log: testLogger(), channels: [createMemoryChannel('x'), createMemoryChannel('x')], maxInFlight: 1, maxQueued: 1, supervisor: defaultSupervisorOptions }),
      /two channels are named "x"/,
    );
  });
});
