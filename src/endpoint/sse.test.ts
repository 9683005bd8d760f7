import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { readSse, type SseEvent } from './sse.ts';

/** A body that delivers `chunks` one read at a time. */
function body(chunks: ReadonlyArray<string | Uint8Array>): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  const queue = chunks.map((chunk) => (typeof chunk === 'string' ? encoder.encode(chunk) : chunk));
  return new ReadableStream<Uint8Array>({
    pull(controller) {
      const next = queue.shift();
      if (next === undefined) controller.close();
      else controller.enqueue(next);
    },
  });
}

async function collect(stream: ReadableStream<Uint8Array>): Promise<SseEvent[]> {
  const events: SseEvent[] = [];
  for await (const event of readSse(stream)) events.push(event);
  return events;
}

/** Every way to cut `bytes` in two, plus one byte per chunk. */
function splits(bytes: Uint8Array): Uint8Array[][] {
  const cuts: Uint8Array[][] = [];
  for (let i = 0; i <= bytes.length; i++) cuts.push([bytes.slice(0, i), bytes.slice(i)]);
  cuts.push([...bytes].map((byte) => Uint8Array.of(byte)));
  return cuts;
}

describe('readSse', () => {
  it('reads data and event fields, joins multi-line data, skips comments', async () => {
    const events = await collect(body([': keep-alive\n', 'event: delta\ndata: one\ndata:two\n\n', 'data: {"a":1}\n\n']));
    assert.deepEqual(events, [
      { event: 'delta', data: 'one\ntwo' },
      { event: 'message', data: '{"a":1}' },
    ]);
  });

  it('accepts \\r\\n, \\r and \\n line endings, mixed', async () => {
    const events = await collect(body(['data: a\r\n\r\ndata: b\r\rdata: c\n\ndata: d\r\n\n']));
    assert.deepEqual(
      events.map((e) => e.data),
      ['a', 'b', 'c', 'd'],
    );
  });

  it('gives the same events wherever the chunks are cut, even inside a UTF-8 character or a \\r\\n', async () => {
    const text = 'event: x\r\ndata: héllo 😀 wörld\r\n\r\n: c\r\ndata: [DONE]\r\n\r\n';
    const bytes = new TextEncoder().encode(text);
    const expected = [
      { event: 'x', data: 'héllo 😀 wörld' },
      { event: 'message', data: '[DONE]' },
    ];
    for (const chunks of splits(bytes)) assert.deepEqual(await collect(body(chunks)), expected);
  });

  it('drops an event the stream cuts off, and a blank line with no data', async () => {
    assert.deepEqual(await collect(body(['event: ping\n\n', 'data: whole\n\n', 'data: {"trunc'])), [{ event: 'message', data: 'whole' }]);
    assert.deepEqual(await collect(body(['data: no blank line\n'])), []);
  });

  it('follows the field rules: one optional space, no colon, empty data, unknown fields, id', async () => {
    const events = await collect(body(['data:  two spaces\n\n', 'data\n\n', 'data:\ndata:\n\n', 'retry: 10\nfoo: bar\nid: 7\ndata: x\n\n']));
    assert.deepEqual(events, [
      { event: 'message', data: ' two spaces' },
      { event: 'message', data: '' },
      { event: 'message', data: '\n' },
      { event: 'message', data: 'x', id: '7' },
    ]);
  });

  it('resets the event type after each dispatch', async () => {
    const events = await collect(body(['event: first\ndata: 1\n\ndata: 2\n\n']));
    assert.deepEqual(
      events.map((e) => e.event),
      ['first', 'message'],
    );
  });

  it('strips a leading byte-order mark', async () => {
    assert.deepEqual(await collect(body([Uint8Array.of(0xef, 0xbb), Uint8Array.of(0xbf), 'data: x\n\n'])), [{ event: 'message', data: 'x' }]);
  });

  it('cancels the body when the reader stops early', async () => {
    let cancelled = false;
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(new TextEncoder().encode('data: 1\n\ndata: 2\n\n'));
      },
      cancel() {
        cancelled = true;
      },
    });
    for await (const event of readSse(stream)) {
      assert.equal(event.data, '1');
      break;
    }
    assert.equal(cancelled, true);
  });

  it('passes on a stream error', async () => {
    let pulls = 0;
    const stream = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (pulls++ === 0) controller.enqueue(new TextEncoder().encode('data: 1\n\n'));
        else controller.error(new Error('connection reset'));
      },
    });
    const seen: string[] = [];
    await assert.rejects(async () => {
      for await (const event of readSse(stream)) seen.push(event.data);
    }, /connection reset/);
    assert.deepEqual(seen, ['1']);
  });
});
