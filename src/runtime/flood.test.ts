/**
 * The flood gate: after a platform's "wait", no call of any kind reaches that chat (or that
 * channel, for an account-wide limit) until the wait has passed — and a streamed reply still
 * arrives whole.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import type { TurnHandler } from '../agent/agent.ts';
import { canEdit, hasTyping, SendError, type Channel } from '../channel.ts';
import type { ConversationRef } from '../conversation.ts';
import { openDatabase } from '../store/db.ts';
import { sqliteDatabase } from '../store/sqlite-sql.ts';
import { testLogger } from '../../test/support/log.ts';
import { createRichChannel } from '../../test/support/rich-channel.ts';
import { FloodGate, FloodWaitError } from './flood.ts';
import { defaultSupervisorOptions } from './supervisor.ts';
import { Runtime } from './runtime.ts';

const dir = mkdtempSync(join(tmpdir(), 'sb-flood-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const ref = (chat: string): ConversationRef => ({ channel: 'chat', account: 'bot', chat });

/**
 * A platform with Telegram's flood control: a call to a chat inside its wait is answered 429
 * again (and counted: that is what a bot must never do), and the first `floodAt`-th call of a
 * chat starts a wait of `waitMs`.
 */
function floodingChannel(options: { floodAt: number; waitMs: number; scope?: 'chat' | 'channel'; now?: () => number }) {
  const clock = options.now ?? (() => performance.now());
  const calls: Array<{ at: number; kind: string; chat: string; text?: string }> = [];
  const waits = new Map<string, { from: number; until: number }>();
  const keyOf = (chat: string): string => (options.scope === 'channel' ? '*' : chat);
  let count = 0;
  const platform = (kind: string, chat: string, text?: string): void => {
    const at = clock();
    calls.push({ at, kind, chat, ...(text === undefined ? {} : { text }) });
    const until = waits.get(keyOf(chat))?.until ?? 0;
    if (at < until) throw new SendError('429: Too Many Requests (inside the wait)', { retryAfterMs: Math.ceil(until - at), ...(options.scope ? { scope: options.scope } : {}) });
    if (++count === options.floodAt) {
      waits.set(keyOf(chat), { from: at, until: at + options.waitMs });
      throw new SendError(`429: Too Many Requests: retry after ${options.waitMs / 1000}`, { retryAfterMs: options.waitMs, ...(options.scope ? { scope: options.scope } : {}) });
    }
  };
  const { channel, inject: push } = createRichChannel({
    files: false,
    call(call) {
      if (call.kind === 'send' || call.kind === 'draft') platform(call.kind, call.message.chat, call.message.text);
      else if (call.kind === 'typing') platform('typing', call.ref.chat);
      else if (call.kind === 'edit') platform('edit', call.ref.chat, call.text);
    },
  });
  /** Calls that reached the platform while their chat was inside a wait it had announced. */
  const insideWait = (): number =>
    calls.filter((call) => {
      const wait = waits.get(keyOf(call.chat));
      return wait !== undefined && call.at > wait.from && call.at < wait.until;
    }).length;
  const inject = (id: string, text: string) => push({ id, text, sender: { id: 'alice' } });
  return { channel, calls, insideWait, inject };
}

describe('flood gate', () => {
  it('holds every call to a chat inside the wait; typing is skipped, the rest refused without reaching the platform', async () => {
    let now = 0;
    const gate = new FloodGate({ log: testLogger(), now: () => now });
    const { channel, calls } = floodingChannel({ floodAt: 1, waitMs: 3000, now: () => now });
    const gated = gate.wrap(channel);
    assert.ok(canEdit(gated) && hasTyping(gated), 'capabilities are kept');
    assert.equal(gate.wrap(channel), gated, 'one wrapper per channel');
    await assert.rejects(gated.send({ ...ref('c1'), text: 'one' }), (error: unknown) => error instanceof SendError && error.retryAfterMs === 3000);
    now = 1000;
    await assert.rejects(
      (gated as Channel & { edit(r: ConversationRef, id: string, text: string): Promise<void> }).edit(ref('c1'), 'm', 'x'),
      (error: unknown) => error instanceof FloodWaitError && error.retryAfterMs === 2000,
    );
    await (gated as Channel & { typing(r: ConversationRef): Promise<void> }).typing(ref('c1'));
    await gated.send({ ...ref('c2'), text: 'another chat is not held' });
    assert.deepEqual(calls.map((c) => `${c.kind} ${c.chat}`), ['send c1', 'send c2']);
    now = 3001;
    await gated.send({ ...ref('c1'), text: 'after the wait' });
    assert.equal(calls.length, 3);
    assert.equal(gate.remainingMs('chat', 'c1'), 0);
  });

  it("holds every chat of the channel for an account-wide wait (scope 'channel')", async () => {
    let now = 0;
    const gate = new FloodGate({ log: testLogger(), now: () => now });
    const { channel, calls } = floodingChannel({ floodAt: 1, waitMs: 500, scope: 'channel', now: () => now });
    const gated = gate.wrap(channel);
    await assert.rejects(gated.send({ ...ref('c1'), text: 'one' }));
    await assert.rejects(gated.send({ ...ref('c2'), text: 'two' }), FloodWaitError);
    assert.equal(calls.length, 1);
    now = 501;
    await gated.send({ ...ref('c2'), text: 'two' });
    assert.equal(calls.length, 2);
  });

  it('a streamed reply makes no call inside a flood wait, and the final reply still arrives whole', async () => {
    const words = Array.from({ length: 30 }, (_, i) => `word${i}`);
    const agent: TurnHandler = async (input) => {
      for (const word of words) {
        input.onTextDelta?.(`${word} `);
        await new Promise((resolve) => setTimeout(resolve, 25));
      }
      return { reply: words.join(' '), messages: [] };
    };
    // The third call (the draft, then an edit, then this one) is answered "wait 500 ms".
    const platform = floodingChannel({ floodAt: 3, waitMs: 500 });
    const database = sqliteDatabase(openDatabase(join(dir, 'stream.db')));
    const runtime = new Runtime({
      database,
      log: testLogger(),
      channels: [platform.channel],
      agent,
      historyTurns: 10,
      maxInFlight: 2,
      maxQueued: 10,
      turnTimeoutMs: 10_000,
      shutdownGraceMs: 1000,
      supervisor: defaultSupervisorOptions,
      delivery: { attemptsPerRound: 3, initialBackoffMs: 5, maxBackoffMs: 200 },
      policies: new Map([['chat', { allow: ['*'], mentionOnly: false, stream: true }]]),
    });
    await runtime.start();
    await runtime.ready;
    await platform.inject('1', 'talk');
    await runtime.idle();
    await runtime.stop();
    assert.ok(platform.calls.length > 3, 'the platform asked to wait, and the reply went on after it');
    assert.equal(platform.insideWait(), 0, `no call inside the wait: ${JSON.stringify(platform.calls.map((c) => [Math.round(c.at - platform.calls[2]!.at), c.kind]))}`);
    const last = platform.calls.at(-1)!;
    assert.equal(last.kind, 'edit');
    assert.equal(last.text, words.join(' '), 'the final reply arrives whole');
  });
});
