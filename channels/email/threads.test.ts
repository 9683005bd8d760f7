import assert from 'node:assert/strict';
import { appendFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { ThreadBook, type ReplyTarget } from './threads.ts';

const alice = 'alice@example.org';
const received = (n: number, chat = `<m${n}@x>`): ReplyTarget => ({ id: `<m${n}@x>`, chat, address: alice, subject: 'Lunch', references: [] });
const lines = (file: string): unknown[] =>
  readFileSync(file, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as unknown);

describe('email thread book', () => {
  let dir: string;
  let file: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'sb-threads-'));
    file = join(dir, 'threads.jsonl');
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('keeps the thread of every mail the bot sent in threads.jsonl, across a restart', () => {
    const before = new ThreadBook(dir);
    before.record(received(1));
    before.recordSent({ id: '<r1@x>', chat: '<m1@x>', to: 'Alice@Example.org' });
    assert.equal(before.sentThread('<r1@x>', alice), '<m1@x>');
    assert.deepEqual(lines(file).at(-1), { kind: 'sent', id: '<r1@x>', chat: '<m1@x>', to: alice }, 'written at once, in the one file');

    const after = new ThreadBook(dir);
    assert.equal(after.sentThread('<r1@x>', alice), '<m1@x>');
    assert.equal(after.sentThread('<r1@x>', 'bob@example.org'), undefined, 'only for the person it went to');
    assert.equal(after.sentThread('<m1@x>', alice), undefined, 'a received mail is not a sent one');
    assert.equal(after.hasThread('<m1@x>'), true);
    assert.equal(after.hasThread('<r1@x>'), false);
    assert.deepEqual(after.byId('<m1@x>'), received(1));
  });

  it('reads files written before sent mail was recorded, and skips lines it cannot read', () => {
    appendFileSync(file, `${JSON.stringify(received(1))}\n{"kind":"sent","id":"<r1@x>","chat":"<m1@x>","to":"${alice}"}\n{"kind":"sent","id":"<cut`);
    appendFileSync(file, `\n{"kind":"later","id":"<z@x>","chat":"<z@x>","address":"${alice}"}\n{"id":"<r2@x>","chat":"<m1@x>"}\n`);
    const book = new ThreadBook(dir);
    assert.deepEqual(book.byId('<m1@x>'), received(1));
    assert.equal(book.sentThread('<r1@x>', alice), '<m1@x>');
    assert.equal(book.byId('<z@x>'), undefined, 'an entry of a kind it does not know');
    assert.equal(book.sentThread('<r2@x>', alice), undefined);
  });

  it('is bounded: keeps the newest `limit` received and sent mails, in memory and in the file', () => {
    const limit = 3;
    const book = new ThreadBook(dir, limit);
    for (let n = 1; n <= 50; n++) {
      book.record(received(n));
      book.recordSent({ id: `<r${n}@x>`, chat: `<m${n}@x>`, to: alice });
      assert.ok(lines(file).length <= 4 * limit, `the file stays small (${lines(file).length} lines after ${n} rounds)`);
    }
    for (let n = 1; n <= 47; n++) assert.equal(book.sentThread(`<r${n}@x>`, alice), undefined, `<r${n}@x> was dropped`);
    for (let n = 48; n <= 50; n++) {
      assert.equal(book.sentThread(`<r${n}@x>`, alice), `<m${n}@x>`);
      assert.ok(book.byId(`<m${n}@x>`));
    }
    const reloaded = new ThreadBook(dir, limit);
    for (let n = 48; n <= 50; n++) assert.equal(reloaded.sentThread(`<r${n}@x>`, alice), `<m${n}@x>`, 'the compacted file keeps the newest sent mails');
    assert.equal(reloaded.sentThread('<r47@x>', alice), undefined);
    assert.ok(reloaded.byId('<m50@x>'));
  });

  it('a sent mail recorded again moves to the newest place', () => {
    const book = new ThreadBook(undefined, 2);
    book.recordSent({ id: '<r1@x>', chat: '<m1@x>', to: alice });
    book.recordSent({ id: '<r2@x>', chat: '<m2@x>', to: alice });
    book.recordSent({ id: '<r1@x>', chat: '<m1@x>', to: alice });
    book.recordSent({ id: '<r3@x>', chat: '<m3@x>', to: alice });
    assert.equal(book.sentThread('<r1@x>', alice), '<m1@x>');
    assert.equal(book.sentThread('<r2@x>', alice), undefined);
  });

  it('refuses a limit that is not a positive integer', () => {
    assert.throws(() => new ThreadBook(undefined, 0), /limit must be a positive integer, got 0/);
  });
});
