import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createMemoryChannel } from '../../test/support/memory-channel.ts';
import { testLogger } from '../../test/support/log.ts';
import { openDatabase } from '../store/db.ts';
import { sqliteDatabase } from '../store/sqlite-sql.ts';
import { Outbox } from '../store/outbox.ts';
import { Delivery } from './delivery.ts';

const options = { attemptsPerRound: 4, initialBackoffMs: 10, maxBackoffMs: 200 };

function setup() {
  const outbox = new Outbox(sqliteDatabase(openDatabase(':memory:')));
  const channel = createMemoryChannel('mem');
  const delivery = new Delivery(outbox, new Map([['mem', channel]]), options, testLogger());
  const add = (text: string, chat = 'c1') => outbox.add({ channel: 'mem', account: 'a', chat, text }, null);
  return { outbox, channel, delivery, add };
}

describe('Delivery (outbox sends)', () => {
  it('sends pending replies of a conversation in order and marks them sent', async () => {
    const { outbox, channel, delivery, add } = setup();
    await add('one');
    await add('two');
    await delivery.deliver('mem:a:c1', new AbortController().signal);
    assert.deepEqual(
      channel.sent.map((m) => m.text),
      ['one', 'two'],
    );
    assert.equal(await outbox.pendingCount(), 0);
    await delivery.deliver('mem:a:c1', new AbortController().signal);
    assert.equal(channel.sent.length, 2, 'nothing is sent twice');
  });

  it('retries a failing send with backoff and sends it exactly once', async () => {
    const { outbox, channel, delivery, add } = setup();
    await add('hello');
    channel.failNext(2);
    const started = Date.now();
    await delivery.deliver('mem:a:c1', new AbortController().signal);
    assert.equal(channel.sendAttempts, 3);
    assert.deepEqual(
      channel.sent.map((m) => m.text),
      ['hello'],
    );
    assert.ok(Date.now() - started >= 20, 'waited between tries');
    assert.equal(await outbox.pendingCount(), 0);
  });

  it("honours the platform's retry-after", async () => {
    const { channel, delivery, add } = setup();
    await add('hello');
    channel.failNext(1, { retryAfterMs: 150 });
    const started = Date.now();
    await delivery.deliver('mem:a:c1', new AbortController().signal);
    assert.ok(Date.now() - started >= 140, `waited ${Date.now() - started} ms`);
    assert.equal(channel.sent.length, 1);
  });

  it('keeps a reply pending (and later ones behind it) when every try of a round fails', async () => {
    const { outbox, channel, delivery, add } = setup();
    await add('first');
    await add('second');
    channel.failNext(4);
    await delivery.deliver('mem:a:c1', new AbortController().signal);
    assert.equal(channel.sent.length, 0);
    assert.equal(await outbox.pendingCount(), 2);
    assert.equal((await outbox.pending('mem:a:c1'))[0]!.attempts, 4);
    await delivery.deliverAll(new AbortController().signal);
    assert.deepEqual(
      channel.sent.map((m) => m.text),
      ['first', 'second'],
    );
  });

  it('gives up on a permanent failure and goes on with the next reply', async () => {
    const { outbox, channel, delivery, add } = setup();
    await add('doomed');
    await add('fine');
    channel.failNext(1, { permanent: true });
    await delivery.deliver('mem:a:c1', new AbortController().signal);
    assert.deepEqual(
      channel.sent.map((m) => m.text),
      ['fine'],
    );
    assert.equal(await outbox.pendingCount(), 0);
  });

  it('never runs two rounds of one conversation at once', async () => {
    const { channel, delivery, add } = setup();
    for (let i = 0; i < 5; i++) await add(`m${i}`);
    const signal = new AbortController().signal;
    await Promise.all([delivery.deliver('mem:a:c1', signal), delivery.deliver('mem:a:c1', signal), delivery.deliverAll(signal)]);
    assert.deepEqual(
      channel.sent.map((m) => m.text),
      ['m0', 'm1', 'm2', 'm3', 'm4'],
    );
  });

  it('stops retrying when its signal aborts, leaving the reply pending', async () => {
    const { outbox, channel, delivery, add } = setup();
    await add('hello');
    channel.failNext(10, { retryAfterMs: 10_000 });
    const abort = new AbortController();
    setTimeout(() => abort.abort(), 30);
    await delivery.deliver('mem:a:c1', abort.signal);
    assert.equal(await outbox.pendingCount(), 1);
  });
  it('a reply sent while the disk is full is remembered as sent and never sent again', async () => {
    const { outbox, channel, add } = setup();
    const full = async (): Promise<never> => {
      throw Object.assign(new Error('database or disk is full'), { code: 'SQLITE_FULL' });
    };
    const reported: string[] = [];
    const delivery = new Delivery(outbox, new Map([['mem', channel]]), options, testLogger(), {
      onWriteFailed: (error, what) => {
        reported.push(`${(error as { code: string }).code}: ${what}`);
        return true;
      },
    });
    await add('one');
    await add('two');
    const markSent = outbox.markSent.bind(outbox);
    outbox.markSent = full;
    await delivery.deliver('mem:a:c1', new AbortController().signal);
    assert.deepEqual(channel.sent.map((m) => m.text), ['one'], 'sent, then order holds: two waits for one to be recorded');
    assert.equal(await outbox.pendingCount(), 2);
    await delivery.deliver('mem:a:c1', new AbortController().signal);
    assert.equal(channel.sent.length, 1, 'not sent again while it cannot be recorded');
    outbox.markSent = markSent;
    await delivery.deliver('mem:a:c1', new AbortController().signal);
    assert.deepEqual(channel.sent.map((m) => m.text), ['one', 'two'], 'one recorded without a second send, then two');
    assert.equal(await outbox.pendingCount(), 0);
    assert.ok(reported.length >= 2 && reported.every((line) => line.startsWith('SQLITE_FULL: record reply')), reported.join('\n'));
  });

  it('never rejects, even when the outbox cannot be read', async () => {
    const { outbox, delivery, add } = setup();
    await add('one');
    outbox.pending = async () => {
      throw new Error('disk I/O error');
    };
    await delivery.deliver('mem:a:c1', new AbortController().signal);
    outbox.pendingConversations = async () => {
      throw new Error('disk I/O error');
    };
    await delivery.deliverAll(new AbortController().signal);
  });
});

describe('Delivery.ahead (pending replies read with the commit)', () => {
  it('a round starts from rows read ahead, reads again when another round of the conversation started since, and none is taken while one runs', async () => {
    const database = sqliteDatabase(openDatabase(':memory:'));
    const outbox = new Outbox(database);
    const channel = createMemoryChannel('mem');
    const delivery = new Delivery(outbox, new Map([['mem', channel]]), options, testLogger());
    const signal = new AbortController().signal;
    const add = (text: string) => outbox.add({ channel: 'mem', account: 'a', chat: 'c1', text }, null);

    // used: the round sends what the read ahead saw (a row added after it waits for the next round)
    await add('one');
    const first = delivery.ahead('mem:a:c1')!;
    await first.read(database);
    await add('two');
    await delivery.deliver('mem:a:c1', signal, first);
    assert.deepEqual(channel.sent.map((m) => m.text), ['one']);
    await delivery.deliver('mem:a:c1', signal);
    assert.deepEqual(channel.sent.map((m) => m.text), ['one', 'two']);

    // stale: a round of the conversation ran after the read (and sent 'three'): read again, nothing sent twice
    await add('three');
    const stale = delivery.ahead('mem:a:c1')!;
    await stale.read(database);
    await delivery.deliver('mem:a:c1', signal);
    await add('four');
    await delivery.deliver('mem:a:c1', signal, stale);
    assert.deepEqual(channel.sent.map((m) => m.text), ['one', 'two', 'three', 'four']);

    // while a round runs, no read ahead is taken
    await add('five');
    const running = delivery.deliver('mem:a:c1', signal);
    assert.equal(delivery.ahead('mem:a:c1'), undefined);
    await running;
    assert.deepEqual(channel.sent.map((m) => m.text), ['one', 'two', 'three', 'four', 'five']);
    assert.equal(await outbox.pendingCount(), 0);
  });
});
