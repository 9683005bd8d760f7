import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, beforeEach, describe, it } from 'node:test';
import type { EmbeddingProvider } from '../memory.ts';
import { openDatabase } from '../store/db.ts';
import { fakeEmbedding, startFakeEmbeddings, type FakeEmbeddings } from '../../test/fixtures/fake-embeddings.ts';
import { createCachedEmbeddings, EmbeddingCache, embeddingKey } from './embedding-cache.ts';
import { createOpenAIEmbeddings } from './embeddings.ts';

const dir = mkdtempSync(join(tmpdir(), 'sb-embcache-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** A provider that records what it is asked, answering fakeEmbedding vectors. */
function recording(name = 'fake:v1', dims = 8): EmbeddingProvider & { calls: string[][] } {
  const calls: string[][] = [];
  return {
    name,
    calls,
    embed: async (texts) => {
      calls.push([...texts]);
      return texts.map((text) => fakeEmbedding(text, dims));
    },
  };
}

describe('EmbeddingCache', () => {
  it('round-trips vectors exactly and reports misses', () => {
    const cache = new EmbeddingCache(openDatabase(':memory:'));
    const v = Float32Array.from([0.1, -2.5, 3e-8, 0]);
    cache.put('m', ['a'], [v]);
    const [hit, miss] = cache.get('m', ['a', 'b']);
    assert.deepEqual(hit, v);
    assert.equal(miss, undefined);
    assert.deepEqual(cache.get('other-model', ['a']), [undefined], 'the model is part of the key');
    assert.equal(cache.size(), 1);
  });

  it('stores float32 little-endian blobs under a 32-hex-character sha256 key', () => {
    const db = openDatabase(':memory:');
    new EmbeddingCache(db).put('m', ['hello'], [Float32Array.from([1, -1])]);
    const row = db.prepare('SELECT hash, model, dims, vector FROM embedding_cache').get() as { hash: string; model: string; dims: number; vector: Buffer };
    assert.equal(row.hash, embeddingKey('m', 'hello'));
    assert.match(row.hash, /^[0-9a-f]{32}$/);
    assert.equal(row.model, 'm');
    assert.equal(row.dims, 2);
    assert.deepEqual([...row.vector], [0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x80, 0xbf]);
  });

  it('evicts all but the newest N by access: a touched old entry stays', () => {
    const cache = new EmbeddingCache(openDatabase(':memory:'));
    for (const text of ['a', 'b', 'c', 'd', 'e']) cache.put('m', [text], [fakeEmbedding(text, 4)]);
    cache.get('m', ['a']); // now the most recently used
    cache.get('m', ['c', 'zzz']); // a miss touches nothing
    assert.equal(cache.evict(3), 2);
    assert.equal(cache.size(), 3);
    const kept = cache.get('m', ['a', 'b', 'c', 'd', 'e']).map((v) => v !== undefined);
    assert.deepEqual(kept, [true, false, true, false, true]);
    assert.equal(cache.evict(10), 0, 'nothing to evict below the limit');
    assert.equal(cache.evict(0), 3);
    assert.equal(cache.size(), 0);
  });

  it('keeps its entries across a reopen of the database file', () => {
    const path = join(dir, 'reopen.db');
    const first = openDatabase(path);
    new EmbeddingCache(first).put('m', ['kept'], [fakeEmbedding('kept', 16)]);
    first.close();
    const second = openDatabase(path);
    const cache = new EmbeddingCache(second);
    assert.deepEqual(cache.get('m', ['kept']), [fakeEmbedding('kept', 16)]);
    second.close();
  });
});

describe('createCachedEmbeddings', () => {
  it('calls the provider only for misses, and each distinct text once', async () => {
    const provider = recording();
    const cached = createCachedEmbeddings(provider, new EmbeddingCache(openDatabase(':memory:')));
    assert.equal(cached.name, 'fake:v1');
    const first = await cached.embed(['dog', 'cat', 'dog', 'dog']);
    assert.deepEqual(provider.calls, [['dog', 'cat']]);
    assert.deepEqual(first, ['dog', 'cat', 'dog', 'dog'].map((t) => fakeEmbedding(t, 8)));
    assert.notEqual(first[0], first[2], 'repeated texts get their own arrays');

    const second = await cached.embed(['cat', 'bird', 'dog', 'bird']);
    assert.deepEqual(provider.calls[1], ['bird']);
    assert.deepEqual(second, ['cat', 'bird', 'dog', 'bird'].map((t) => fakeEmbedding(t, 8)));

    await cached.embed(['dog', 'bird']);
    assert.equal(provider.calls.length, 2, 'all hits: no call');
  });

  it('does not call the endpoint for cached texts (real HTTP)', async () => {
    const fake: FakeEmbeddings = await startFakeEmbeddings({ dims: 32 });
    try {
      const cached = createCachedEmbeddings(createOpenAIEmbeddings({ baseUrl: fake.baseUrl, model: 'test-embed' }), new EmbeddingCache(openDatabase(':memory:')));
      await cached.embed(['my dog is called Rex', 'I drive a blue car']);
      assert.equal(fake.requestCount, 1);
      await fake.down();
      const again = await cached.embed(['I drive a blue car', 'my dog is called Rex']);
      assert.deepEqual(again, [fakeEmbedding('I drive a blue car', 32), fakeEmbedding('my dog is called Rex', 32)], 'served while the service is down');
      await assert.rejects(cached.embed(['something new']), /unreachable/);
    } finally {
      await fake.close();
    }
  });

  it('misses for another model name, so a model change never reuses old vectors', async () => {
    const cache = new EmbeddingCache(openDatabase(':memory:'));
    const v1 = recording('fake:v1');
    const v2 = recording('fake:v2');
    await createCachedEmbeddings(v1, cache).embed(['hello']);
    await createCachedEmbeddings(v2, cache).embed(['hello']);
    assert.deepEqual(v2.calls, [['hello']]);
    assert.equal(cache.size(), 2);
  });

  it('survives a restart: a reopened database answers without the provider', async () => {
    const path = join(dir, 'restart.db');
    const db = openDatabase(path);
    await createCachedEmbeddings(recording(), new EmbeddingCache(db)).embed(['remember me']);
    db.close();
    const provider = recording();
    const reopened = openDatabase(path);
    const vectors = await createCachedEmbeddings(provider, new EmbeddingCache(reopened)).embed(['remember me']);
    assert.deepEqual(vectors, [fakeEmbedding('remember me', 8)]);
    assert.deepEqual(provider.calls, []);
    reopened.close();
  });

  it('evicts past maxEntries, least recently used first', async () => {
    const cache = new EmbeddingCache(openDatabase(':memory:'));
    const provider = recording();
    const cached = createCachedEmbeddings(provider, cache, { maxEntries: 3 });
    await cached.embed(['a', 'b', 'c']);
    await cached.embed(['a']); // hit: a is now newer than b and c
    await cached.embed(['d']);
    assert.equal(cache.size(), 3);
    assert.deepEqual(
      cache.get('fake:v1', ['a', 'b', 'c', 'd']).map((v) => v !== undefined),
      [true, false, true, true],
    );
  });

  it('evicts on the first write when an earlier run left more than maxEntries', async () => {
    const cache = new EmbeddingCache(openDatabase(':memory:'));
    cache.put('fake:v1', ['1', '2', '3', '4', '5'], ['1', '2', '3', '4', '5'].map((t) => fakeEmbedding(t, 8)));
    await createCachedEmbeddings(recording(), cache, { maxEntries: 100 }).embed(['x']);
    assert.equal(cache.size(), 6);
    await createCachedEmbeddings(recording(), cache, { maxEntries: 2 }).embed(['y']);
    assert.equal(cache.size(), 2);
  });

  it('still embeds when the cache fails, and says so in the log', async () => {
    const db = openDatabase(':memory:');
    const cache = new EmbeddingCache(db);
    const warnings: string[] = [];
    const log = { child: () => log, warn: (_o: unknown, message: string) => void warnings.push(message), debug: () => undefined };
    const cached = createCachedEmbeddings(recording(), cache, { log: log as never });
    db.close();
    assert.deepEqual(await cached.embed(['a']), [fakeEmbedding('a', 8)]);
    assert.equal(warnings.length, 2, warnings.join('; '));
  });

  it('rejects a bad maxEntries at once; 0 turns the cache off', async () => {
    const cache = new EmbeddingCache(openDatabase(':memory:'));
    assert.throws(() => createCachedEmbeddings(recording(), cache, { maxEntries: -1 }), /maxEntries must be a non-negative integer, got -1/);
    const provider = recording();
    const uncached = createCachedEmbeddings(provider, cache, { maxEntries: 0 });
    await uncached.embed(['a', 'a']);
    await uncached.embed(['a']);
    assert.deepEqual(provider.calls, [['a'], ['a']], 'still one call per distinct text');
    assert.equal(cache.size(), 0);
  });
});

describe('createCachedEmbeddings with a shared fake', () => {
  let fake: FakeEmbeddings;
  before(async () => {
    fake = await startFakeEmbeddings({ dims: 16 });
  });
  after(() => fake.close());
  beforeEach(() => void (fake.requests.length = 0));

  it('sends a batch of only the distinct misses', async () => {
    const cached = createCachedEmbeddings(createOpenAIEmbeddings({ baseUrl: fake.baseUrl, model: 'm' }), new EmbeddingCache(openDatabase(':memory:')));
    await cached.embed(['one', 'two']);
    await cached.embed(['two', 'three', 'three', 'one', 'four']);
    assert.deepEqual(
      fake.requests.map((r) => r.input),
      [['one', 'two'], ['three', 'four']],
    );
  });
});
