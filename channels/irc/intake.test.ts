import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { pino } from 'pino';
import type { InboundMessage, Push } from '../../src/channel.ts';
import { InboundQueue } from './intake.ts';

const message = (n: number): InboundMessage => ({ channel: 'irc', account: 'bot', chat: '#c', id: `m${n}`, sender: { id: 'alice' }, text: `line ${n}`, timestamp: n });

/** A log that keeps the messages it was given. */
function recordingLog(): { log: pino.Logger; lines: string[] } {
  const lines: string[] = [];
  const log = pino({ level: 'warn' }, { write: (line: string) => void lines.push((JSON.parse(line) as { msg: string }).msg) });
  return { log, lines };
}

describe('IRC inbound queue', () => {
  it('pushes in order, one at a time', async () => {
    const pushed: string[] = [];
    let running = 0;
    const push: Push = async (m) => {
      assert.equal(++running, 1);
      await new Promise((resolve) => setTimeout(resolve, 1));
      pushed.push(m.id);
      running--;
      return 'accepted';
    };
    const queue = new InboundQueue({ push, log: pino({ level: 'silent' }), onFailure: () => assert.fail('no failure') });
    for (let n = 0; n < 20; n++) queue.add(message(n));
    await queue.idle();
    assert.deepEqual(pushed, Array.from({ length: 20 }, (_, n) => `m${n}`));
  });

  it('holds at most `max` messages while push waits, drops the rest and says how many', async () => {
    let release!: () => void;
    const blocked = new Promise<void>((resolve) => (release = resolve));
    const pushed: string[] = [];
    const push: Push = async (m) => (await blocked, pushed.push(m.id), 'accepted');
    const { log, lines } = recordingLog();
    const queue = new InboundQueue({ push, log, onFailure: () => assert.fail('no failure'), max: 10 });
    for (let n = 0; n < 100_000; n++) {
      queue.add(message(n));
      assert.ok(queue.waiting <= 10);
    }
    release();
    await queue.idle();
    assert.deepEqual(pushed, Array.from({ length: 10 }, (_, n) => `m${n}`));
    queue.add(message(100_000));
    await queue.idle();
    assert.equal(pushed.at(-1), 'm100000');
    assert.deepEqual(lines, ['10 IRC messages are waiting for the runtime; dropping new ones until there is room', '99990 IRC messages were dropped while the runtime was full']);
  });

  it('holds a message push refuses while listening and offers it again, in order, until it is stored', async () => {
    const pushed: string[] = [];
    let refusals = 2;
    const push: Push = async (m) => {
      if (refusals > 0) {
        refusals--;
        throw new Error('could not accept message: the disk is full');
      }
      pushed.push(m.id);
      return 'accepted';
    };
    const queue = new InboundQueue({ push, log: pino({ level: 'silent' }), signal: new AbortController().signal, onFailure: () => assert.fail('no failure') });
    queue.add(message(1));
    queue.add(message(2));
    await queue.idle();
    assert.deepEqual(pushed, ['m1', 'm2']);
    assert.equal(queue.failure, undefined);
  });

  it('gives a refused message up once the listen stops', async () => {
    const stop = new AbortController();
    const failures: unknown[] = [];
    const queue = new InboundQueue({ push: async () => Promise.reject(new Error('shutting down')), log: pino({ level: 'silent' }), signal: stop.signal, onFailure: (error) => failures.push(error) });
    queue.add(message(1));
    setTimeout(() => stop.abort(), 50);
    await queue.idle();
    assert.equal(failures.length, 1);
  });

  it('stops pushing after push rejects, and reports the error once', async () => {
    const failures: unknown[] = [];
    let calls = 0;
    const queue = new InboundQueue({ push: async () => (calls++, Promise.reject(new Error('shutting down'))), log: pino({ level: 'silent' }), onFailure: (error) => failures.push(error) });
    queue.add(message(1));
    queue.add(message(2));
    await queue.idle();
    assert.equal(calls, 1);
    assert.equal(failures.length, 1);
    assert.match(String(queue.failure), /shutting down/);
    assert.equal(queue.waiting, 0);
  });
});
