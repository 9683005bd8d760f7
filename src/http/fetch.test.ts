import assert from 'node:assert/strict';
import type { Socket } from 'node:net';
import type { IncomingMessage } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { startSocketServer, type SocketServer } from '../../test/fixtures/socket-server.ts';
import { createEndpointFetch, type SignalLike } from './fetch.ts';

type TestServer = SocketServer;
/** A server whose handler sees the request as it arrives (the body is the handler's to read). */
const startServer = (): Promise<SocketServer> => startSocketServer({ buffered: false });

const bodyOf = async (request: IncomingMessage): Promise<string> => {
  const parts: Buffer[] = [];
  for await (const part of request) parts.push(part as Buffer);
  return Buffer.concat(parts).toString('utf8');
};

const waitFor = async (check: () => boolean): Promise<void> => {
  for (let i = 0; i < 200 && !check(); i++) await new Promise((resolve) => setTimeout(resolve, 10));
  assert.ok(check(), 'condition not reached within 2 s');
};

/** What the abort-controller polyfill's signal (grammY's) offers: no `reason`, no `throwIfAborted`. */
function polyfillSignal(): { signal: SignalLike; abort(): void } {
  const target = new EventTarget();
  let aborted = false;
  const signal: SignalLike = {
    get aborted() {
      return aborted;
    },
    addEventListener: (type, listener) => target.addEventListener(type, listener),
    removeEventListener: (type, listener) => target.removeEventListener(type, listener),
  };
  return {
    signal,
    abort() {
      aborted = true;
      target.dispatchEvent(new Event('abort'));
    },
  };
}

describe('fetch on the endpoint client (what grammY uses)', () => {
  let server: TestServer;
  before(async () => {
    server = await startServer();
  });
  after(async () => {
    await server.close();
  });

  it('POSTs a JSON body with its headers; json(), ok, status, statusText and headers read the answer; the connection is kept', async () => {
    const seen: Array<{ body: string; type: string | undefined; port: number | undefined }> = [];
    server.handle((request, response) => {
      void bodyOf(request).then((body) => {
        seen.push({ body, type: request.headers['content-type'], port: request.socket.remotePort });
        response.writeHead(200, { 'content-type': 'application/json' });
        response.end('{"ok":true,"result":1}');
      });
    });
    const fetch = createEndpointFetch();
    for (let i = 0; i < 2; i++) {
      const answer = await fetch(`${server.url}/botT/getMe`, { method: 'POST', headers: { 'content-type': 'application/json', connection: 'keep-alive' }, body: `{"n":${i}}`, signal: new AbortController().signal });
      assert.equal(answer.ok, true);
      assert.equal(answer.status, 200);
      assert.equal(answer.statusText, 'OK');
      assert.equal(answer.headers.get('content-type'), 'application/json');
      assert.deepEqual(await answer.json(), { ok: true, result: 1 });
    }
    assert.deepEqual(
      seen.map((s) => s.body),
      ['{"n":0}', '{"n":1}'],
    );
    assert.equal(seen[0]!.type, 'application/json');
    assert.equal(seen[0]!.port, seen[1]!.port, 'the kept-alive connection was reused');
  });

  it('an upload stream is sent chunked as it is read, not gathered first', async () => {
    const arrived: string[] = [];
    let firstArrived: () => void = () => undefined;
    const first = new Promise<void>((resolve) => (firstArrived = resolve));
    let headers: IncomingMessage['headers'] = {};
    server.handle((request, response) => {
      headers = request.headers;
      request.on('data', (part: Buffer) => {
        arrived.push(part.toString('utf8'));
        firstArrived();
      });
      request.on('end', () => response.end(JSON.stringify({ ok: true, result: arrived.join('') })));
    });
    async function* upload(): AsyncGenerator<Uint8Array> {
      yield new TextEncoder().encode('part one;');
      // The second part is made only once the server has the first: a body gathered whole would never arrive.
      await first;
      yield new TextEncoder().encode('part two');
    }
    const answer = await createEndpointFetch()(`${server.url}/botT/sendDocument`, { method: 'POST', headers: { 'content-type': 'multipart/form-data; boundary=x' }, body: upload() });
    assert.deepEqual(await answer.json(), { ok: true, result: 'part one;part two' });
    assert.equal(headers['transfer-encoding'], 'chunked');
    assert.equal(headers['content-length'], undefined);
    assert.ok(arrived.length >= 2, 'the parts arrived one by one');
  });

  it("an abort of grammY's polyfill signal mid-request rejects with an AbortError and closes the socket", async () => {
    let socket: Socket | undefined;
    server.handle((request) => (socket = request.socket)); // holds the request, like a long poll
    const { signal, abort } = polyfillSignal();
    const pending = createEndpointFetch()(`${server.url}/botT/getUpdates`, { method: 'POST', headers: {}, body: '{}', signal });
    await waitFor(() => socket !== undefined);
    abort();
    await assert.rejects(pending, (error: Error) => error.name === 'AbortError');
    await waitFor(() => server.closed.includes(socket!));
  });

  it("a native signal's abort rejects with its reason as it is, and a signal aborted already sends nothing", async () => {
    let requests = 0;
    server.handle(() => requests++);
    const fetch = createEndpointFetch();
    const controller = new AbortController();
    const reason = new Error('stopping');
    const pending = fetch(`${server.url}/botT/getUpdates`, { method: 'POST', body: '{}', signal: controller.signal });
    await waitFor(() => requests === 1);
    controller.abort(reason);
    await assert.rejects(pending, (error) => error === reason);
    const { signal, abort } = polyfillSignal();
    abort();
    await assert.rejects(fetch(`${server.url}/botT/getUpdates`, { method: 'POST', body: '{}', signal }), (error: Error) => error.name === 'AbortError');
    await new Promise((resolve) => setTimeout(resolve, 50));
    assert.equal(requests, 1);
  });

  it("a connection reset before the answer is fetch's TypeError('fetch failed') with the system error as cause", async () => {
    server.handle((request) => request.socket.resetAndDestroy());
    await assert.rejects(createEndpointFetch()(`${server.url}/botT/sendMessage`, { method: 'POST', body: '{}' }), (error: Error) => {
      assert.ok(error instanceof TypeError);
      assert.equal(error.message, 'fetch failed');
      assert.match((error.cause as Error).message, /ECONNRESET|socket hang up/);
      return true;
    });
  });

  it('a body cut off mid-answer rejects json() with TypeError("terminated")', async () => {
    server.handle((_request, response) => {
      response.writeHead(200, { 'content-type': 'application/json', 'content-length': '100' });
      response.write('{"ok":tr', () => response.socket?.destroy());
    });
    const answer = await createEndpointFetch()(`${server.url}/botT/sendMessage`, { method: 'POST', body: '{}' });
    await assert.rejects(answer.json(), (error: Error) => error instanceof TypeError && error.message === 'terminated');
  });

  it('a body that is not JSON (a proxy error page) rejects json() with a SyntaxError naming the status', async () => {
    server.handle((_request, response) => {
      response.writeHead(502, { 'content-type': 'text/html' });
      response.end('<html><body>502 Bad Gateway</body></html>');
    });
    const answer = await createEndpointFetch()(`${server.url}/botT/sendMessage`, { method: 'POST', body: '{}' });
    assert.equal(answer.ok, false);
    assert.equal(answer.statusText, 'Bad Gateway');
    await assert.rejects(answer.json(), (error: Error) => error instanceof SyntaxError && /HTTP 502\) is not JSON/.test(error.message));
  });

  it('refuses what grammY never asks for (a GET) as a fetch failure, before any request', async () => {
    await assert.rejects(createEndpointFetch()(`${server.url}/x`), (error: Error) => error instanceof TypeError && /only POST/.test((error.cause as Error).message));
  });
});
