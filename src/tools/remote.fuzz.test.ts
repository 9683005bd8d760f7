/**
 * Fuzzing the remote-tool WebSocket protocol: any frame a client sends (JSON of any shape,
 * broken JSON, binary) gets exactly one answer — an `error` frame, `tools_registered` or
 * `result_acknowledged` — the connection stays open, and no frame reaches the catch-all
 * ("internal error"), which would mean a field was read without being checked.
 */
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import { WebSocket } from 'ws';
import { anyJson, fuzzAsync, nastyText, payload } from '../../test/support/fuzz.ts';
import { testLogger } from '../../test/support/log.ts';
import type { ToolContext, ToolResult } from '../tool.ts';
import { toolNamePattern } from './sources.ts';
import { createRemoteTools, type RemoteTools } from './remote.ts';

type Frame = Record<string, unknown>;

const toolSpec = payload({
  name: fc.oneof(fc.constantFrom('phone_info', 'phone_x', '1bad', 'current_time', ''), fc.string({ maxLength: 70 })),
  description: nastyText(40),
  parameters: fc.oneof(fc.constant({ type: 'object', properties: {} }), payload({ type: fc.constantFrom('object', 'string'), properties: anyJson })),
});
const frame = fc.oneof(
  { weight: 3, arbitrary: payload({ type: fc.constant('register_tools'), tools: fc.array(fc.oneof(toolSpec, anyJson), { maxLength: 4 }) }) },
  { weight: 3, arbitrary: payload({ type: fc.constantFrom('tool_result', 'tool_error'), id: fc.constantFrom('PENDING', 'nope'), output: anyJson, success: fc.boolean(), error: fc.oneof(nastyText(20), anyJson) }) },
  { weight: 1, arbitrary: payload({ type: fc.oneof(fc.string(), anyJson) }) },
  { weight: 1, arbitrary: anyJson },
);
const wire = fc.oneof(
  { weight: 6, arbitrary: frame.map((value) => ({ text: JSON.stringify(value) ?? 'undefined', binary: false })) },
  { weight: 1, arbitrary: nastyText(50).map((text) => ({ text, binary: false })) },
  { weight: 1, arbitrary: fc.string().map((text) => ({ text, binary: true })) },
);

describe('remote-tool frames (fuzz)', () => {
  let server: Server;
  let remote: RemoteTools;
  let ws: WebSocket;
  const inbox: Frame[] = [];
  const waiting: Array<(frame: Frame) => void> = [];
  const next = (): Promise<Frame> => (inbox.length > 0 ? Promise.resolve(inbox.shift()!) : new Promise((resolve) => waiting.push(resolve)));

  before(async () => {
    remote = createRemoteTools({ log: testLogger(), callTimeoutMs: 5_000, allow: ['phone_*'], reserved: () => ['current_time'], maxToolsPerClient: 8 });
    server = createServer((_request, response) => response.writeHead(404).end());
    server.on('upgrade', (request, socket, head) => remote.route.handle(request, socket, head));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    ws = new WebSocket(`ws://127.0.0.1:${(server.address() as AddressInfo).port}/ws/tools?client=fuzz`);
    ws.on('message', (data) => {
      const parsed = JSON.parse(String(data)) as Frame;
      const waiter = waiting.shift();
      if (waiter) waiter(parsed);
      else inbox.push(parsed);
    });
    await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
  });
  after(async () => {
    ws.close();
    await remote.close();
    await new Promise((resolve) => server.close(resolve));
  });

  it('every frame gets one answer, never the internal-error catch-all, and the connection stays open', async (t) => {
    const context = { signal: new AbortController().signal, log: testLogger() } as ToolContext;
    await fuzzAsync(t, 'remote-tool frame', wire, async ({ text, binary }) => {
      // Now and then a call is in flight, so a tool_result for "PENDING" has something to answer.
      const tool = remote.tools()[0];
      let call: Promise<ToolResult> | undefined;
      let sent = text;
      if (tool && text.includes('PENDING')) {
        call = tool.execute({}, context);
        const request = await next();
        assert.equal(request.type, 'tool_call_request');
        sent = text.replace(/PENDING/g, String(request.id));
      }
      ws.send(binary ? Buffer.from(sent) : sent, { binary });
      const answer = await next();
      assert.ok(['error', 'tools_registered', 'result_acknowledged'].includes(String(answer.type)), JSON.stringify(answer));
      assert.notEqual(answer.error, 'internal error handling this frame', `a frame reached the catch-all: ${sent.slice(0, 300)}`);
      if (call) {
        if (answer.type === 'result_acknowledged') {
          const result = await call;
          assert.ok(result.kind === 'ok' ? typeof result.text === 'string' : result.kind === 'error' && typeof result.message === 'string');
        } else {
          ws.send(JSON.stringify({ type: 'tool_error', id: sent.match(/[0-9a-f-]{36}/)?.[0] ?? '', error: 'cleanup' }));
          await call;
          assert.equal((await next()).type, 'result_acknowledged');
        }
      }
      assert.equal(ws.readyState, WebSocket.OPEN);
      for (const registered of remote.tools()) assert.match(registered.name, toolNamePattern);
    }, { runs: 300 });
  });
});
