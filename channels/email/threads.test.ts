import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { channelState, type ChannelState } from '../../src/store/channel-state.ts';
import { sqliteFile, testChannelState } from '../../test/support/channel-state.ts';
import { ThreadBook, type ReplyTarget } from './threads.ts';

const alice = 'alice@example.org';
const received = (n: number, chat = `<m${n}@x>`): ReplyTarget => ({ id: `<m${n}@x>`, chat, address: alice, subject: 'Lunch', references: [] });
const stored = async (state: ChannelState, prefix: string): Promise<string[]> => (await state.list(prefix)).map((entry) => entry.key);

describe('email thread book', () => {
  let dir: string;
  let file: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'sb-threads-'));
    file = join(dir, 'threads.jsonl');
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('keeps the thread of every mail the bot sent in the channel state, across a restart', async () => {
    const state = testChannelState('email');
    const before = new ThreadBook({ state });
    await before.record(received(1));
    await before.recordSent({ id: '<r1@x>', chat: '<m1@x>', to: 'Alice@Example.org' });
    assert.equal(before.sentThread('<r1@x>', alice), '<m1@x>');
    assert.deepEqual(JSON.parse((await state.get('s:<r1@x>'))!), { kind: 'sent', id: '<r1@x>', chat: '<m1@x>', to: alice }, 'stored at once');

    const after = new ThreadBook({ state });
    await after.reload();
    assert.equal(after.sentThread('<r1@x>', alice), '<m1@x>');
    assert.equal(after.sentThread('<r1@x>', 'bob@example.org'), undefined, 'only for the person it went to');
    assert.equal(after.sentThread('<m1@x>', alice), undefined, 'a received mail is not a sent one');
    assert.equal(after.hasThread('<m1@x>'), true);
    assert.equal(after.hasThread('<r1@x>'), false);
    assert.deepEqual(after.byId('<m1@x>'), received(1));
  });

  it('imports threads.jsonl of an earlier version once (old lines too, skipping what it cannot read), and renames it', async () => {
    writeFileSync(file, `${JSON.stringify(received(1))}\n{"kind":"sent","id":"<r1@x>","chat":"<m1@x>","to":"${alice}"}\n{"kind":"sent","id":"<cut`);
    writeFileSync(file, `\n{"kind":"later","id":"<z@x>","chat":"<z@x>","address":"${alice}"}\n{"id":"<r2@x>","chat":"<m1@x>"}\n`, { flag: 'a' });
    const state = testChannelState('email');
    const book = new ThreadBook({ state, legacyDir: dir });
    await book.ready();
    assert.deepEqual(book.byId('<m1@x>'), received(1));
    assert.equal(book.sentThread('<r1@x>', alice), '<m1@x>');
    assert.equal(book.byId('<z@x>'), undefined, 'an entry of a kind it does not know');
    assert.equal(book.sentThread('<r2@x>', alice), undefined);
    assert.equal(existsSync(file), false);
    assert.equal(existsSync(`${file}.imported`), true);
    assert.deepEqual(await stored(state, ''), ['r:<m1@x>', 's:<r1@x>']);
    const again = new ThreadBook({ state, legacyDir: dir });
    await again.ready();
    assert.equal(again.sentThread('<r1@x>', alice), '<m1@x>', 'read from the store the next time');
  });

  it('is bounded: keeps the newest `limit` received and sent mails, in memory and in the store', async () => {
    const limit = 3;
    const state = testChannelState('email');
    const book = new ThreadBook({ state, limit });
    for (let n = 1; n <= 50; n++) {
      await book.record(received(n));
      await book.recordSent({ id: `<r${n}@x>`, chat: `<m${n}@x>`, to: alice });
      assert.ok((await stored(state, '')).length <= 2 * limit, `the store stays small after ${n} rounds`);
    }
    for (let n = 1; n <= 47; n++) assert.equal(book.sentThread(`<r${n}@x>`, alice), undefined, `<r${n}@x> was dropped`);
    for (let n = 48; n <= 50; n++) {
      assert.equal(book.sentThread(`<r${n}@x>`, alice), `<m${n}@x>`);
      assert.ok(book.byId(`<m${n}@x>`));
    }
    const reloaded = new ThreadBook({ state, limit });
    await reloaded.reload();
    for (let n = 48; n <= 50; n++) assert.equal(reloaded.sentThread(`<r${n}@x>`, alice), `<m${n}@x>`, 'the store keeps the newest sent mails');
    assert.equal(reloaded.sentThread('<r47@x>', alice), undefined);
    assert.ok(reloaded.byId('<m50@x>'));
    const smaller = new ThreadBook({ state, limit: 1 });
    await smaller.reload();
    assert.deepEqual(await stored(state, ''), ['r:<m50@x>', 's:<r50@x>'], 'a lower limit prunes the store at the next start');
  });

  it('a sent mail recorded again moves to the newest place, also in the store', async () => {
    const state = testChannelState('email');
    const book = new ThreadBook({ state, limit: 2 });
    await book.recordSent({ id: '<r1@x>', chat: '<m1@x>', to: alice });
    await book.recordSent({ id: '<r2@x>', chat: '<m2@x>', to: alice });
    await book.recordSent({ id: '<r1@x>', chat: '<m1@x>', to: alice });
    await book.recordSent({ id: '<r3@x>', chat: '<m3@x>', to: alice });
    assert.equal(book.sentThread('<r1@x>', alice), '<m1@x>');
    assert.equal(book.sentThread('<r2@x>', alice), undefined);
    assert.deepEqual(await stored(state, 's:'), ['s:<r1@x>', 's:<r3@x>']);
  });

  it('keeps a Message-ID too long to be a key under its digest', async () => {
    const state = testChannelState('email');
    const long = `<${'x'.repeat(2000)}@x>`;
    await new ThreadBook({ state }).record({ ...received(1), id: long });
    const book = new ThreadBook({ state });
    await book.reload();
    assert.equal(book.byId(long)?.address, alice);
  });

  it('a new owner on another node finds the threads the last owner recorded', async () => {
    const path = join(dir, 'switchboard.db');
    const [nodeA, nodeB] = [sqliteFile(path), sqliteFile(path)];
    try {
      const owner = new ThreadBook({ state: channelState(nodeA, 'email') });
      await owner.record(received(1));
      await owner.recordSent({ id: '<r1@x>', chat: '<m1@x>', to: alice });
      const next = new ThreadBook({ state: channelState(nodeB, 'email') });
      await next.reload();
      assert.equal(next.byChat('<m1@x>')?.id, '<m1@x>');
      assert.equal(next.sentThread('<r1@x>', alice), '<m1@x>', 'a reply to the old owner\'s mail stays in its thread');
    } finally {
      await Promise.all([nodeA.close(), nodeB.close()]);
    }
  });

  it('refuses a limit that is not a positive integer', () => {
    assert.throws(() => new ThreadBook({ limit: 0 }), /limit must be a positive integer, got 0/);
  });
});
