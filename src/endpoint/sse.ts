/**
 * A Server-Sent-Events reader over a response body (any async iterable of bytes: the endpoint
 * client's body, a node stream, a web ReadableStream), following the WHATWG
 * "event stream interpretation" rules: lines end in `\r\n`, `\n` or `\r`; `data:` lines of one
 * event are joined with `\n`; lines starting with `:` are comments; a blank line dispatches.
 * Bytes are decoded as a stream, so a chunk may end anywhere, even inside a UTF-8 character or
 * between the `\r` and `\n` of one line ending.
 */

/** One dispatched event. `event` is "message" when the server named none. */
export interface SseEvent {
  readonly event: string;
  readonly data: string;
  /** The last `id:` seen so far (the standard's "last event ID"), when there was one. */
  readonly id?: string;
}

/**
 * Yields the events of `body` as they complete. An event cut off by the end of the stream
 * (no blank line after it) is dropped, as the standard says: it may be a truncated JSON
 * document. Stopping the iteration early ends the body's iteration (`return()`: a web stream is
 * cancelled, the endpoint client's connection closed).
 *
 * @example
 * for await (const { event, data } of readSse(response.body!)) if (data === '[DONE]') break;
 */
export async function* readSse(body: AsyncIterable<Uint8Array>): AsyncGenerator<SseEvent, void, undefined> {
  const reader = body[Symbol.asyncIterator]();
  // Strips one leading byte-order mark, as the standard asks.
  const decoder = new TextDecoder('utf-8');
  const parser = createLineParser();
  let buffer = '';
  // Where the search for the next line end resumes: a long line arriving in many chunks is
  // scanned once, not once per chunk.
  let scanned = 0;
  let finished = false;
  try {
    for (;;) {
      const { done, value } = await reader.next();
      buffer += done ? decoder.decode() : decoder.decode(value, { stream: true });
      let start = 0;
      for (;;) {
        const end = findLineEnd(buffer, Math.max(start, scanned));
        if (end === -1) {
          scanned = buffer.length;
          break;
        }
        // A `\r` at the very end may be the first half of `\r\n`: wait for the next chunk.
        if (buffer[end] === '\r' && end === buffer.length - 1 && !done) {
          scanned = end;
          break;
        }
        const event = parser(buffer.slice(start, end));
        start = end + (buffer[end] === '\r' && buffer[end + 1] === '\n' ? 2 : 1);
        if (event) yield event;
      }
      buffer = buffer.slice(start);
      scanned = Math.max(0, scanned - start);
      if (done) {
        finished = true;
        return;
      }
    }
  } finally {
    if (!finished) await reader.return?.().catch(() => undefined);
  }
}

function findLineEnd(text: string, from: number): number {
  for (let i = from; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 10 || c === 13) return i;
  }
  return -1;
}

/** Feeds one line at a time; returns the event a blank line completes, if any. */
function createLineParser(): (line: string) => SseEvent | undefined {
  let data: string[] = [];
  let event = '';
  let id: string | undefined;
  return (line) => {
    if (line === '') {
      if (data.length === 0) {
        event = '';
        return undefined;
      }
      const dispatched: SseEvent = { event: event || 'message', data: data.join('\n'), ...(id === undefined ? {} : { id }) };
      data = [];
      event = '';
      return dispatched;
    }
    if (line.startsWith(':')) return undefined;
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'data') data.push(value);
    else if (field === 'event') event = value;
    else if (field === 'id' && !value.includes('\0')) id = value;
    // `retry:` and unknown fields are ignored: we never reconnect.
    return undefined;
  };
}
