import assert from 'node:assert/strict';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { Api, HttpError, InputFile } from 'grammy';
import { createServer } from '../../src/http/node-http.ts';
import { describeError, grammySignal, toSendError } from './errors.ts';
import { botApiFetch } from './transport.ts';

const TOKEN = '123456:SECRET-token';

describe("grammY's Api over botApiFetch (our node:http client)", () => {
  let server: Server;
  let root: string;
  let handler: (request: IncomingMessage, response: ServerResponse) => void = (_request, response) => response.end('{}');
  before(async () => {
    server = createServer((request, response) => handler(request, response));
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    root = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(async () => {
    server.closeAllConnections();
    server.close();
    await once(server, 'close');
  });
  const api = (): Api => new Api(TOKEN, { apiRoot: root, fetch: botApiFetch() });

  it('a JSON call: the payload as JSON to /bot<token>/<method>, the result back', async () => {
    let seen: { url: string | undefined; type: string | undefined; body: string } | undefined;
    handler = (request, response) => {
      const parts: Buffer[] = [];
      request.on('data', (part: Buffer) => parts.push(part));
      request.on('end', () => {
        seen = { url: request.url, type: request.headers['content-type'], body: Buffer.concat(parts).toString('utf8') };
        response.end(JSON.stringify({ ok: true, result: { message_id: 7, date: 0, chat: { id: 1, type: 'private' } } }));
      });
    };
    const message = await api().sendMessage(1, 'hello');
    assert.equal(message.message_id, 7);
    assert.equal(seen?.url, `/bot${TOKEN}/sendMessage`);
    assert.equal(seen?.type, 'application/json');
    assert.deepEqual(JSON.parse(seen!.body), { chat_id: 1, text: 'hello' });
  });

  it('an upload (InputFile from a path) goes out as a chunked multipart stream with the file bytes', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tg-upload-'));
    try {
      const bytes = Buffer.alloc(256 * 1024, 7);
      writeFileSync(join(dir, 'report.pdf'), bytes);
      let seen: { type: string | undefined; encoding: string | undefined; body: Buffer } | undefined;
      handler = (request, response) => {
        const parts: Buffer[] = [];
        request.on('data', (part: Buffer) => parts.push(part));
        request.on('end', () => {
          seen = { type: request.headers['content-type'], encoding: request.headers['transfer-encoding'], body: Buffer.concat(parts) };
          response.end(JSON.stringify({ ok: true, result: { message_id: 8, date: 0, chat: { id: 1, type: 'private' } } }));
        });
      };
      await api().sendDocument(1, new InputFile(join(dir, 'report.pdf'), 'report.pdf'));
      assert.match(seen!.type!, /^multipart\/form-data; boundary=/);
      assert.equal(seen!.encoding, 'chunked');
      assert.ok(seen!.body.includes(bytes), 'the file bytes are in the body');
      assert.ok(seen!.body.includes('filename=report.pdf'));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("a Bot API refusal is grammY's GrammyError as before: 429's retry_after reaches the SendError", async () => {
    handler = (_request, response) => {
      response.writeHead(429, { 'content-type': 'application/json' });
      response.end(JSON.stringify({ ok: false, error_code: 429, description: 'Too Many Requests: retry after 3', parameters: { retry_after: 3 } }));
    };
    const error = await api()
      .sendMessage(1, 'x')
      .then(() => undefined, (caught: unknown) => caught);
    const send = toSendError(error, 'sendMessage', TOKEN);
    assert.equal(send.retryAfterMs, 3000);
    assert.equal(send.permanent, false);
  });

  it('an answer that is not JSON (a proxy error page) is an HttpError, retryable, described with its status and without the token', async () => {
    handler = (_request, response) => {
      response.writeHead(502, { 'content-type': 'text/html' });
      response.end('<html>Bad Gateway</html>');
    };
    const error = await api()
      .sendMessage(1, 'x')
      .then(() => undefined, (caught: unknown) => caught);
    assert.ok(error instanceof HttpError);
    const send = toSendError(error, 'sendMessage', TOKEN);
    assert.equal(send.permanent, false);
    assert.match(send.message, /HTTP 502\) is not JSON/);
    assert.ok(!send.message.includes('SECRET'));
  });

  it("a connection reset is an HttpError whose description names the system error (fetch's cause)", async () => {
    handler = (request) => request.socket.resetAndDestroy();
    const error = await api()
      .sendMessage(1, 'x')
      .then(() => undefined, (caught: unknown) => caught);
    assert.ok(error instanceof HttpError);
    assert.match(describeError(error, TOKEN), /Network request for 'sendMessage' failed!: fetch failed: (read ECONNRESET|socket hang up)/);
  });

  it('a poll aborted by the signal at stop rejects at once, with the signal aborted', async () => {
    handler = () => undefined; // a long poll held open
    const controller = new AbortController();
    const started = performance.now();
    const pending = api().getUpdates({ timeout: 30 }, grammySignal(controller.signal));
    setTimeout(() => controller.abort(), 50);
    await assert.rejects(pending, (error: unknown) => error instanceof HttpError && (error.error as Error).name === 'AbortError');
    assert.ok(performance.now() - started < 2000);
  });
});
