/**
 * The memory contract: what every shared-store memory backend promises (SQLite on one node,
 * PostgreSQL in a cluster), run by src/memory/memory.contract.test.ts against both. `open`
 * gives an empty memory, with or without embeddings.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { EmbeddingProvider, Memory, MemoryWho } from '../../src/memory.ts';
import { hashedEmbeddings } from '../../src/memory/testing.ts';

export interface MemoryUnderTest {
  readonly memory: Memory & { deleteOlderThan(category: string, beforeMs: number): number | Promise<number> };
  close(): Promise<void>;
}

const ada: MemoryWho = { person: 'telegram:ada', conversation: 'telegram:bot:1' };
const bob: MemoryWho = { person: 'telegram:bob', conversation: 'telegram:bot:2' };

export function memoryContract(engine: string, open: (embeddings?: EmbeddingProvider) => Promise<MemoryUnderTest>): void {
  const each = (name: string, body: (memory: MemoryUnderTest['memory']) => Promise<void>, embeddings?: EmbeddingProvider): void => {
    it(name, async () => {
      const opened = await open(embeddings);
      try {
        await body(opened.memory);
      } finally {
        await opened.close();
      }
    });
  };

  describe(`memory contract: ${engine}`, () => {
    each('stores, replaces by key, gets and lists', async (memory) => {
      const first = await memory.store({ key: 'coffee', content: 'Ada drinks her coffee black', scope: 'person' }, ada);
      assert.equal(first.owner, 'telegram:ada');
      const again = await memory.store({ key: 'coffee', content: 'Ada now drinks oat milk flat whites', scope: 'person' }, ada);
      assert.equal(again.id, first.id, 'the same key is the same memory');
      assert.equal((await memory.get('coffee', ada))?.content, 'Ada now drinks oat milk flat whites');
      assert.equal(await memory.get('coffee', bob), undefined, "never another person's");
      await memory.store({ content: 'The office moved to the harbour building', scope: 'shared' }, bob);
      assert.equal(await memory.count(), 2);
      assert.equal(await memory.count({ scope: 'shared' }), 1);
      assert.deepEqual(
        (await memory.list({ owner: 'telegram:ada' })).map((entry) => entry.key),
        ['coffee'],
      );
      await assert.rejects(memory.store({ content: '   ', scope: 'person' }, ada), /needs some content/);
    });

    each('recalls by keywords the caller\'s own, the conversation\'s and shared memories — never another person\'s', async (memory) => {
      await memory.store({ content: 'Ada is allergic to peanuts', scope: 'person' }, ada);
      await memory.store({ content: 'Bob is allergic to shellfish', scope: 'person' }, bob);
      await memory.store({ content: 'The team lunch is on Fridays, no peanuts allowed', scope: 'shared' }, bob);
      const forAda = await memory.recall('what is Ada allergic to? peanuts', ada, { limit: 5 });
      assert.ok(forAda.length >= 1);
      assert.equal(forAda[0]!.content, 'Ada is allergic to peanuts');
      assert.ok(forAda.every((entry) => entry.owner !== 'telegram:bob' || entry.scope === 'shared'));
      assert.ok(forAda.every((entry) => typeof entry.score === 'number' && entry.score > 0 && entry.score <= 1));
      const forBob = await memory.recall('allergic', bob);
      assert.deepEqual(
        forBob.map((entry) => entry.content),
        ['Bob is allergic to shellfish'],
      );
      assert.deepEqual(await memory.recall('   ', ada), []);
      assert.deepEqual(await memory.recall('zebra quantum', ada), []);
      assert.deepEqual(await memory.recall('" OR 1=1 -- (peanuts', bob).then((list) => list.map((e) => e.scope)), ['shared'], 'hostile query text is only words');
    });

    each('forgets by key for its owner, by id or key for the operator, and refuses an ambiguous key', async (memory) => {
      await memory.store({ key: 'pet', content: 'Ada has a cat', scope: 'person' }, ada);
      const bobs = await memory.store({ key: 'pet', content: 'Bob has a dog', scope: 'person' }, bob);
      assert.equal(await memory.forget('pet', { person: 'telegram:eve', conversation: 'x' }), false);
      await assert.rejects(memory.forget('pet', 'operator'), /belongs to 2 memories/);
      assert.equal(await memory.forget(bobs.id, 'operator'), true);
      assert.equal(await memory.forget('pet', ada), true);
      assert.equal(await memory.count(), 0);
      assert.deepEqual(await memory.recall('cat dog', ada), []);
    });

    each('expires a category by age', async (memory) => {
      await memory.store({ content: 'talked about the weather', scope: 'conversation', category: 'conversation' }, ada);
      await memory.store({ content: 'Ada lives in Lisbon', scope: 'person' }, ada);
      assert.equal(await memory.deleteOlderThan('conversation', Date.now() + 1000), 1);
      assert.equal(await memory.count(), 1);
    });

    each(
      'with embeddings, recalls what no keyword matches',
      async (memory) => {
        await memory.store({ content: 'Ada drives an automobile to work', scope: 'person' }, ada);
        await memory.store({ content: 'Bob drives a car to work', scope: 'person' }, bob);
        // a backend may embed in the background: give it a moment
        let found = await memory.recall('car', ada, { limit: 3 });
        for (let tries = 0; found[0]?.content !== 'Ada drives an automobile to work' && tries < 50; tries++) {
          await new Promise((resolve) => setTimeout(resolve, 100));
          found = await memory.recall('car', ada, { limit: 3 });
        }
        assert.equal(found[0]?.content, 'Ada drives an automobile to work');
        assert.ok(found.every((entry) => entry.owner === 'telegram:ada'));
      },
      hashedEmbeddings({ synonyms: { automobile: 'car' } }),
    );
  });
}
