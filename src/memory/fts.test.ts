import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { openDatabase, type Db } from '../store/db.ts';
import { ftsQuery, KeywordSearch, likePattern, queryTokens } from './fts.ts';
import { hostileQueries } from './testing.ts';

const alice = { person: 'tg:alice', conversation: 'tg:bot:1' };
const bob = { person: 'tg:bob', conversation: 'tg:bot:2' };

function database(rows: readonly [content: string, scope: string, owner: string][]): Db {
  const db = openDatabase(':memory:');
  const insert = db.prepare(`INSERT INTO memories (id, key, content, scope, owner, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)`);
  rows.forEach(([content, scope, owner], i) => insert.run(`id${i}`, `k${i}`, content, scope, owner, i, i));
  return db;
}

describe('query building', () => {
  it('quotes every token (doubling inner quotes) and OR-joins them', () => {
    assert.deepEqual(queryTokens('  NEAR(a  b)  say "hi" dog Dog  '), ['NEAR(a', 'b)', 'say', '"hi"', 'dog']);
    assert.equal(ftsQuery(['NEAR(a', 'say"hi', 'col:x']), '"NEAR(a" OR "say""hi" OR "col:x"');
  });

  it('caps tokens at 32, each at 64 characters', () => {
    const tokens = queryTokens(Array.from({ length: 100 }, (_, i) => `t${i}`).join(' ') + ' ' + 'y'.repeat(500));
    assert.equal(tokens.length, 32);
    assert.equal(queryTokens('y'.repeat(500))[0]!.length, 64);
  });

  it('escapes LIKE wildcards', () => {
    assert.equal(likePattern('100%_a\\b'), '%100\\%\\_a\\\\b%');
  });
});

describe('KeywordSearch', () => {
  const db = database([
    ['My dog Rex likes chasing frisbees', 'person', 'tg:alice'],
    ['Bob has a dog called Bruno', 'person', 'tg:bob'],
    ['The group meets at the dog park on Sundays', 'conversation', 'tg:bot:1'],
    ['Office dogs are welcome on Fridays', 'shared', ''],
    ['我喜欢喝乌龙茶', 'person', 'tg:alice'],
    ['Discount is 100% for staff', 'shared', ''],
    ['The 🐶 emoji means dog', 'shared', ''],
  ]);
  const search = new KeywordSearch(db);

  it("ranks by BM25, stemmed, among the caller's, the conversation's and shared memories only", () => {
    const result = search.search('dog', alice, 10);
    assert.equal(result.mode, 'fts');
    const contents = result.hits.map((hit) => db.prepare('SELECT content FROM memories WHERE rowid = ?').pluck().get(hit.rowid));
    assert.ok(contents.includes('My dog Rex likes chasing frisbees'));
    assert.ok(contents.includes('Office dogs are welcome on Fridays'), 'porter: dogs → dog');
    assert.ok(!contents.includes('Bob has a dog called Bruno'), "never another person's memory");
    assert.ok(result.hits.every((hit) => hit.score > 0));
    assert.equal(search.search('Bruno', alice, 10).hits.length, 0);
    assert.equal(search.search('Bruno', bob, 10).hits.length, 1);
    assert.equal(search.search('park', bob, 10).hits.length, 0, 'another conversation');
  });

  it('falls back to LIKE for unspaced scripts and symbol-only queries', () => {
    const tea = search.search('乌龙茶', alice, 10);
    assert.equal(tea.mode, 'like');
    assert.equal(tea.hits.length, 1);
    assert.equal(search.search('乌龙茶', bob, 10).hits.length, 0);
    const emoji = search.search('🐶', alice, 10);
    assert.equal(emoji.mode, 'like');
    assert.equal(emoji.hits.length, 1);
  });

  it('takes no hostile query as syntax, and never throws', () => {
    for (const query of hostileQueries) {
      const result = search.search(query, alice, 10);
      assert.equal(result.error, undefined, `FTS5 rejected ${JSON.stringify(query.slice(0, 40))}`);
    }
    assert.equal(search.search('%', alice, 10).hits.length, 0, 'a bare % matches nothing');
    assert.equal(search.search('100%', alice, 10).hits.length, 1);
  });

  it('drops words found in most memories of a large corpus (BM25 gives them ~0 anyway)', () => {
    const pruning = new KeywordSearch(db, { pruneFrom: 4 });
    assert.equal(pruning.search('dog', alice, 10).mode, 'none', '"dog" is in 5 of 7');
    const result = pruning.search('dog frisbees', alice, 10);
    assert.equal(result.mode, 'fts');
    assert.equal(result.hits.length, 1);
    const budgeted = new KeywordSearch(db, { pruneFrom: 4, budget: 1 });
    assert.equal(budgeted.search('frisbees park', alice, 10).hits.length, 1, 'the rarest word always; the next would exceed the budget');
    assert.equal(new KeywordSearch(db, { pruneFrom: 4, budget: 2 }).search('frisbees park', alice, 10).hits.length, 2);
  });
});
