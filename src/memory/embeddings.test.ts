import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, beforeEach, describe, it } from 'node:test';
import { ProviderError } from '../provider.ts';
import { cosine, fakeEmbedding, startFakeEmbeddings, type FakeEmbeddings } from '../../test/fixtures/fake-embeddings.ts';
import { createOpenAIEmbeddings } from './embeddings.ts';

describe('createOpenAIEmbeddings', () => {
  let fake: FakeEmbeddings;
  before(async () => {
    fake = await startFakeEmbeddings({ dims: 64 });
  });
  after(() => fake.close());
  beforeEach(async () => {
    fake.requests.length = 0;
    fake.delayMs = 0;
    await fake.up();
  });

  it('embeds texts in order, one vector each, named after the model', async () => {
    const embeddings = createOpenAIEmbeddings({ baseUrl: fake.baseUrl, model: 'test-embed', apiKey: 'sk-test' });
    assert.equal(embeddings.name, 'openai:test-embed');
    const vectors = await embeddings.embed(['my dog is called Rex', 'I drive a blue car']);
    assert.equal(vectors.length, 2);
    assert.ok(vectors.every((v) => v instanceof Float32Array && v.length === 64));
    assert.deepEqual(vectors[0], fakeEmbedding('my dog is called Rex', 64));
    assert.deepEqual(vectors[1], fakeEmbedding('I drive a blue car', 64));
    assert.equal(fake.requests[0]!.model, 'test-embed');
    assert.equal(fake.requests[0]!.headers.authorization, 'Bearer sk-test');
    assert.equal(fake.requests[0]!.dimensions, undefined, 'dimensions are not sent unless set');
  });

  it('splits 150 texts into requests of batchSize, keeping the order', async () => {
    const texts = Array.from({ length: 150 }, (_, i) => `text number ${i}`);
    const vectors = await createOpenAIEmbeddings({ baseUrl: `${fake.baseUrl}/`, model: 'm' }).embed(texts);
    assert.deepEqual(
      fake.requests.map((r) => r.input.length),
      [64, 64, 22],
    );
    assert.deepEqual(
      fake.requests.flatMap((r) => r.input),
      texts,
    );
    assert.equal(vectors.length, 150);
    vectors.forEach((vector, i) => assert.deepEqual(vector, fakeEmbedding(texts[i]!, 64), `vector ${i}`));
  });

  it('orders results by index when the server answers out of order', async () => {
    const peer = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' }).end(
        JSON.stringify({ object: 'list', data: [{ object: 'embedding', index: 1, embedding: [0, 1] }, { object: 'embedding', index: 0, embedding: [1, 0] }] }),
      );
    });
    await new Promise<void>((resolve) => peer.listen(0, '127.0.0.1', resolve));
    try {
      const port = (peer.address() as AddressInfo).port;
      const vectors = await createOpenAIEmbeddings({ baseUrl: `http://127.0.0.1:${port}/v1`, model: 'm' }).embed(['a', 'b']);
      assert.deepEqual(vectors, [Float32Array.from([1, 0]), Float32Array.from([0, 1])]);
    } finally {
      peer.closeAllConnections();
      await new Promise((resolve) => peer.close(resolve));
    }
  });

  it('sends dimensions when set and checks the answer has them', async () => {
    const embeddings = createOpenAIEmbeddings({ baseUrl: fake.baseUrl, model: 'm', dimensions: 16 });
    assert.equal(embeddings.name, 'openai:m@16', 'shortened vectors are cached apart from full-length ones');
    const [vector] = await embeddings.embed(['hello']);
    assert.equal(fake.requests[0]!.dimensions, 16);
    assert.equal(vector!.length, 16);
  });

  it('answers an empty list without calling the endpoint', async () => {
    assert.deepEqual(await createOpenAIEmbeddings({ baseUrl: fake.baseUrl, model: 'm' }).embed([]), []);
    assert.equal(fake.requests.length, 0);
  });

  it('names the endpoint and status when the service answers an error', async () => {
    fake.failNext(1, 500);
    const embeddings = createOpenAIEmbeddings({ baseUrl: fake.baseUrl, model: 'm' });
    await assert.rejects(embeddings.embed(['x']), (error: unknown) => {
      assert.ok(error instanceof ProviderError);
      assert.equal(error.message, `embedding endpoint ${fake.baseUrl}/embeddings answered HTTP 500: scripted failure 500`);
      assert.equal(error.status, 500);
      assert.equal(error.retryable, true);
      return true;
    });
    fake.failNext(1, 401);
    await assert.rejects(embeddings.embed(['x']), (error: unknown) => error instanceof ProviderError && error.code === 'auth' && !error.retryable);
    await fake.down('503');
    await assert.rejects(embeddings.embed(['x']), /answered HTTP 503: service unavailable/);
  });

  it('stops at the first failing batch', async () => {
    fake.failNext(1, 500);
    await assert.rejects(createOpenAIEmbeddings({ baseUrl: fake.baseUrl, model: 'm', batchSize: 2 }).embed(['a', 'b', 'c', 'd']));
    assert.equal(fake.requests.length, 1);
  });

  it('says the endpoint is unreachable when nothing listens', async () => {
    await fake.down();
    await assert.rejects(createOpenAIEmbeddings({ baseUrl: fake.baseUrl, model: 'm' }).embed(['x']), (error: unknown) => {
      assert.ok(error instanceof ProviderError);
      assert.equal(error.message, `embedding endpoint ${fake.baseUrl}/embeddings unreachable: ECONNREFUSED`);
      assert.equal(error.retryable, true);
      return true;
    });
    await fake.up();
    assert.equal((await createOpenAIEmbeddings({ baseUrl: fake.baseUrl, model: 'm' }).embed(['x'])).length, 1, 'works again once up');
  });

  it('gives up after timeoutMs', async () => {
    fake.delayMs = 2_000;
    const started = Date.now();
    await assert.rejects(createOpenAIEmbeddings({ baseUrl: fake.baseUrl, model: 'm', timeoutMs: 100 }).embed(['x']), (error: unknown) => {
      assert.ok(error instanceof ProviderError);
      assert.match(error.message, /embedding endpoint http:\/\/127\.0\.0\.1:\d+\/v1\/embeddings gave no answer within 100 ms/);
      return true;
    });
    assert.ok(Date.now() - started < 1_500);
  });

  it("passes the caller's abort through as is", async () => {
    fake.delayMs = 2_000;
    const controller = new AbortController();
    const pending = createOpenAIEmbeddings({ baseUrl: fake.baseUrl, model: 'm' }).embed(['x'], controller.signal);
    setTimeout(() => controller.abort(), 50);
    await assert.rejects(pending, (error: unknown) => !(error instanceof ProviderError) && (error as Error).name === 'AbortError');
  });

  it('rejects malformed answers: wrong count, mixed lengths, not numbers, not a list', async () => {
    const answers: unknown[] = [];
    const peer = createServer((req, res) => {
      req.resume();
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(answers.shift()));
    });
    await new Promise<void>((resolve) => peer.listen(0, '127.0.0.1', resolve));
    try {
      const baseUrl = `http://127.0.0.1:${(peer.address() as AddressInfo).port}/v1`;
      const one = createOpenAIEmbeddings({ baseUrl, model: 'm' });
      answers.push({ data: [{ index: 0, embedding: [1, 2] }] });
      await assert.rejects(one.embed(['a', 'b']), /answered 1 vectors for 2 inputs/);
      answers.push({ data: [{ index: 0, embedding: [1, 2] }] }, { data: [{ index: 0, embedding: [1, 2, 3] }] });
      await assert.rejects(createOpenAIEmbeddings({ baseUrl, model: 'm', batchSize: 1 }).embed(['a', 'b']), /vectors of different lengths \(2 and 3\)/);
      answers.push({ data: [{ index: 0, embedding: [1] }, { index: 0, embedding: [2] }] });
      await assert.rejects(one.embed(['a', 'b']), /repeated or out-of-range index 0/);
      answers.push({ data: [{ index: 0, embedding: 'AAAA' }] });
      await assert.rejects(one.embed(['a']), /not a list of numbers/);
      answers.push({ error: 'nope' });
      await assert.rejects(one.embed(['a']), /without a `data` list/);
    } finally {
      peer.closeAllConnections();
      await new Promise((resolve) => peer.close(resolve));
    }
  });

  it('validates options eagerly', () => {
    assert.throws(() => createOpenAIEmbeddings({ baseUrl: 'localhost:11434', model: 'm' }), /baseUrl must be an http\(s\) URL, got "localhost:11434"/);
    assert.throws(() => createOpenAIEmbeddings({ baseUrl: 'http://x/v1', model: '' }), /model must be a non-empty string/);
    assert.throws(() => createOpenAIEmbeddings({ baseUrl: 'http://x/v1', model: 'm', batchSize: 0 }), /batchSize must be a positive integer, got 0/);
    assert.throws(() => createOpenAIEmbeddings({ baseUrl: 'http://x/v1', model: 'm', dimensions: 1.5 }), /dimensions must be a positive integer/);
  });
});

describe('fakeEmbedding', () => {
  it('puts texts sharing meaning closer than unrelated ones', () => {
    const dog = fakeEmbedding('my dog is called Rex', 384);
    const puppy = fakeEmbedding("what is my puppy's name", 384);
    const car = fakeEmbedding('I drive a blue car', 384);
    assert.ok(cosine(dog, puppy) > 0.5, `related: ${cosine(dog, puppy)}`);
    assert.ok(cosine(dog, puppy) > cosine(dog, car) + 0.4, `related ${cosine(dog, puppy)} vs unrelated ${cosine(dog, car)}`);
    assert.ok(cosine(fakeEmbedding('see a physician about allergies'), fakeEmbedding('my doctor says I am allergic')) > 0.5);
  });

  it('is deterministic and unit length', () => {
    const a = fakeEmbedding('Hello world', 128);
    assert.deepEqual(a, fakeEmbedding('Hello world', 128));
    assert.ok(Math.abs(Math.hypot(...a) - 1) < 1e-5);
    assert.ok(Math.abs(Math.hypot(...fakeEmbedding('', 128)) - 1) < 1e-5, 'even for an empty text');
  });
});
