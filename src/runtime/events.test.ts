/** The runtime's optional `events` hooks: received, sent, turn outcome and time, restarts. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { testLogger } from '../../test/support/log.ts';
import type { Channel, InboundMessage, Push } from '../channel.ts';
import { openDatabase } from '../store/db.ts';
import { sqliteDatabase } from '../store/sqlite-sql.ts';
import { Runtime, type RuntimeEvents } from './runtime.ts';

describe('runtime events', () => {
  it('reports each accepted message, sent reply, finished turn and channel restart', async () => {
    const seen: string[] = [];
    const events: RuntimeEvents = {
      onReceived: (channel) => seen.push(`received ${channel}`),
      onSent: (channel) => seen.push(`sent ${channel}`),
      onTurn: (channel, ms, outcome) => {
        assert.ok(ms >= 0);
        seen.push(`turn ${channel} ${outcome}`);
      },
      onRestart: (channel) => seen.push(`restart ${channel}`),
    };
    let push: Push | undefined;
    let attempts = 0;
    const channel: Channel = {
      name: 'test',
      async listen(p, signal, link) {
        if (++attempts === 1) throw new Error('first connect fails');
        push = p;
        link.ready();
        await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
      },
      async send() {},
    };
    const runtime = new Runtime({
      database: sqliteDatabase(openDatabase(':memory:')),
      log: testLogger(),
      channels: [channel],
      agent: async ({ message }) => {
        if (message.text === 'boom') throw new Error('model down');
        return { reply: `re: ${message.text}`, messages: [] };
      },
      historyTurns: 5,
      maxInFlight: 2,
      maxQueued: 10,
      turnTimeoutMs: 5000,
      shutdownGraceMs: 1000,
      supervisor: { initialBackoffMs: 5, maxBackoffMs: 10, healthyAfterMs: 60_000, stopTimeoutMs: 1000 },
      delivery: { attemptsPerRound: 2, initialBackoffMs: 5, maxBackoffMs: 10 },
      events,
    });
    await runtime.start();
    await runtime.ready;
    const message = (id: string, text: string): InboundMessage => ({ channel: 'test', account: 'a', chat: 'c', id, sender: { id: 'u', name: 'U' }, text, timestamp: Date.now() });
    await push!(message('1', 'hi'));
    await runtime.idle();
    await push!(message('2', 'boom'));
    await push!(message('1', 'hi')); // redelivered: no event
    await runtime.idle();
    await runtime.stop();
    assert.deepEqual(seen, ['restart test', 'received test', 'turn test answered', 'sent test', 'received test', 'turn test failed', 'sent test']);
  });
});
