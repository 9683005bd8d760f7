import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { InboundMessage } from '../channel.ts';
import { openDatabase } from '../store/db.ts';
import { sqliteDatabase } from '../store/sqlite-sql.ts';
import { createScheduleTool } from '../tools/schedule.ts';
import { testLogger } from '../../test/support/log.ts';
import { Scheduler } from './scheduler.ts';
import { ScheduleStore } from './store.ts';

const T0 = Date.parse('2026-11-22T10:00:00Z');

function setup() {
  const store = new ScheduleStore(sqliteDatabase(openDatabase(':memory:')));
  let clock = T0;
  const tool = createScheduleTool({ store, now: () => clock });
  const ctx = {
    conversation: 'telegram:bot:42:7',
    channel: 'telegram',
    senderId: 'ada',
    workspace: '/tmp',
    signal: new AbortController().signal,
    log: testLogger(),
  };
  const pushed: InboundMessage[] = [];
  const seen = new Set<string>();
  const scheduler = new Scheduler({
    store,
    log: testLogger(),
    now: () => clock,
    // plays the inbox: a repeated id is a duplicate
    push: async (message) => {
      if (seen.has(message.id)) return 'duplicate';
      seen.add(message.id);
      pushed.push(message);
      return 'accepted';
    },
  });
  return { store, tool, ctx, pushed, scheduler, setClock: (t: number) => (clock = t) };
}

describe('schedule tool and scheduler', () => {
  it('fires a one-shot task once, into the conversation that made it, as the person who made it', async () => {
    const { tool, ctx, pushed, scheduler, setClock, store } = setup();
    const created = await tool.execute({ action: 'create', message: 'Remind Ada to stretch', in_minutes: 30 }, ctx);
    assert.equal(created.kind, 'ok');
    assert.match((created as { text: string }).text, /Scheduled task #1; next run 2026-11-22T10:30:00.000Z/);
    await scheduler.tick();
    assert.equal(pushed.length, 0, 'not due yet');
    setClock(T0 + 31 * 60_000);
    await scheduler.tick();
    await scheduler.tick();
    assert.equal(pushed.length, 1);
    assert.deepEqual([pushed[0]!.channel, pushed[0]!.account, pushed[0]!.chat, pushed[0]!.thread, pushed[0]!.sender.id], ['telegram', 'bot', '42', '7', 'ada']);
    assert.match(pushed[0]!.text, /^\[Scheduled task #1\] Remind Ada to stretch$/);
    assert.deepEqual(await store.list(ctx.conversation), []);
  });

  it('repeats a cron task and survives a "restart" (a new scheduler on the same store)', async () => {
    const { tool, ctx, pushed, store, setClock } = setup();
    await tool.execute({ action: 'create', message: 'Daily summary', cron: '0 9 * * *', timezone: 'Europe/Berlin' }, ctx);
    assert.equal((await store.list(ctx.conversation))[0]!.nextRun, Date.parse('2026-11-23T08:00:00Z'));
    setClock(Date.parse('2026-11-23T08:00:05Z'));
    const restarted = new Scheduler({ store, log: testLogger(), now: () => Date.parse('2026-11-23T08:00:05Z'), push: async (m) => (pushed.push(m), 'accepted') });
    await restarted.tick();
    assert.equal(pushed.length, 1);
    assert.equal((await store.list(ctx.conversation))[0]!.nextRun, Date.parse('2026-11-24T08:00:00Z'));
  });

  it('never fires twice for one due time, even if advancing failed after the push (inbox dedupe)', async () => {
    const { tool, ctx, store, scheduler, setClock, pushed } = setup();
    await tool.execute({ action: 'create', message: 'ping', in_minutes: 1 }, ctx);
    const [task] = await store.list(ctx.conversation);
    setClock(T0 + 120_000);
    await scheduler.tick();
    // simulate a crash before advance: put the task back as it was
    await store.advance({ ...task!, nextRun: -1 }, task!.nextRun);
    await scheduler.tick();
    assert.equal(pushed.length, 1);
  });

  it('waits and retries when the runtime refuses the push (shutting down)', async () => {
    const { tool, ctx, store, setClock } = setup();
    await tool.execute({ action: 'create', message: 'later', in_minutes: 1 }, ctx);
    setClock(T0 + 120_000);
    let attempts = 0;
    const refusing = new Scheduler({ store, log: testLogger(), now: () => T0 + 120_000, push: async () => Promise.reject(new Error(`shutting down ${++attempts}`)) });
    await refusing.tick();
    assert.equal(attempts, 1);
    assert.equal((await store.list(ctx.conversation)).length, 1, 'still scheduled');
  });

  it('lists and cancels only this conversation\'s tasks', async () => {
    const { tool, ctx } = setup();
    await tool.execute({ action: 'create', message: 'a', in_minutes: 5 }, ctx);
    await tool.execute({ action: 'create', message: 'b', cron: '*/15 * * * *' }, ctx);
    const list = await tool.execute({ action: 'list' }, ctx);
    assert.match((list as { text: string }).text, /#1 next .*: a\n#2 next .*cron "\*\/15 \* \* \* \*".*: b/);
    const other = { ...ctx, conversation: 'telegram:bot:99' };
    assert.equal((await tool.execute({ action: 'cancel', id: 1 }, other)).kind, 'error');
    assert.equal((await tool.execute({ action: 'cancel', id: 1 }, ctx)).kind, 'ok');
    assert.match(((await tool.execute({ action: 'list' }, ctx)) as { text: string }).text, /^#2/);
  });

  const bad: Array<[Record<string, unknown>, RegExp]> = [
    [{ action: 'create', in_minutes: 5 }, /needs a message/],
    [{ action: 'create', message: 'x' }, /exactly one of at, in_minutes or cron/],
    [{ action: 'create', message: 'x', in_minutes: 5, cron: '* * * * *' }, /exactly one/],
    [{ action: 'create', message: 'x', cron: 'every tuesday' }, /not a valid cron expression/],
    [{ action: 'create', message: 'x', at: 'tomorrow' }, /not an ISO 8601 date-time/],
    [{ action: 'create', message: 'x', at: '2020-01-01T00:00:00Z' }, /in the past/],
    [{ action: 'create', message: 'x', in_minutes: -5 }, /more than 0/],
    [{ action: 'cancel' }, /needs the task id/],
  ];
  for (const [args, pattern] of bad) {
    it(`refuses ${JSON.stringify(args)} with a clear error`, async () => {
      const { tool, ctx } = setup();
      const result = await tool.execute(args as never, ctx);
      assert.equal(result.kind, 'error');
      assert.match((result as { message: string }).message, pattern);
    });
  }
});

describe('scheduler when the wall clock jumps', () => {
  const HOUR = 3_600_000;
  const DAY = 24 * HOUR;

  it('a step back after a run does not fire the same due time again (cron every 5 minutes)', async () => {
    const { tool, ctx, pushed, store, scheduler, setClock } = setup();
    await tool.execute({ action: 'create', message: 'poll', cron: '*/5 * * * *' }, ctx);
    setClock(T0 + 5 * 60_000 + 1000); // 10:05:01: the 10:05 run is due
    await scheduler.tick();
    assert.equal(pushed.length, 1);
    assert.equal((await store.list(ctx.conversation))[0]!.nextRun, T0 + 10 * 60_000);
    for (const back of [HOUR, DAY]) {
      setClock(T0 + 5 * 60_000 + 1000 - back);
      await scheduler.tick();
      await scheduler.tick();
      assert.equal(pushed.length, 1, `nothing fires after a step back of ${back / HOUR} h: 10:10 is still ahead`);
      assert.equal((await store.list(ctx.conversation))[0]!.nextRun, T0 + 10 * 60_000, 'and the next run stays where it was');
    }
    // The wall clock catches up with 10:10 again: that run fires, once.
    setClock(T0 + 10 * 60_000);
    await scheduler.tick();
    await scheduler.tick();
    assert.deepEqual(pushed.map((m) => m.id), ['schedule:1:' + String(T0 + 5 * 60_000), 'schedule:1:' + String(T0 + 10 * 60_000)]);
  });

  for (const forward of [HOUR, DAY]) {
    it(`a step forward of ${forward / HOUR} h fires a missed cron task once, not once per missed run, and the next run is after the new now`, async () => {
      const { tool, ctx, pushed, store, scheduler, setClock } = setup();
      await tool.execute({ action: 'create', message: 'poll', cron: '*/5 * * * *' }, ctx);
      const now = T0 + forward;
      setClock(now);
      await scheduler.tick();
      await scheduler.tick();
      assert.equal(pushed.length, 1, `${forward / 300_000} runs were missed; one fires`);
      assert.equal(pushed[0]!.timestamp, T0 + 5 * 60_000, 'it carries the due time it was due at');
      assert.equal((await store.list(ctx.conversation))[0]!.nextRun, now + 5 * 60_000, 'the next run is the next slot after the new now');
    });
  }

  it('a step forward past a one-shot task fires it once; a step back afterwards does not bring it back', async () => {
    const { tool, ctx, pushed, store, scheduler, setClock } = setup();
    await tool.execute({ action: 'create', message: 'once', in_minutes: 30 }, ctx);
    setClock(T0 + DAY);
    await scheduler.tick();
    await scheduler.tick();
    setClock(T0);
    await scheduler.tick();
    setClock(T0 + 31 * 60_000);
    await scheduler.tick();
    assert.equal(pushed.length, 1);
    assert.deepEqual(await store.list(ctx.conversation), []);
  });

  it('a step back before a one-shot task is due only delays it (it fires at its wall time)', async () => {
    const { tool, ctx, pushed, scheduler, setClock } = setup();
    await tool.execute({ action: 'create', message: 'once', in_minutes: 30 }, ctx);
    setClock(T0 - HOUR);
    await scheduler.tick();
    assert.equal(pushed.length, 0);
    setClock(T0 + 30 * 60_000);
    await scheduler.tick();
    assert.equal(pushed.length, 1);
  });
});
