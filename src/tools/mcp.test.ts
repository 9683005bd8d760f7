import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { createEchoServer } from '../../test/fixtures/mcp-echo-tools.ts';
import { after, before, describe, it } from 'node:test';
import { startFakeOpenAI, type FakeOpenAI, type RecordedRequest } from '../../test/fixtures/fake-openai.ts';
import { testLogger } from '../../test/support/log.ts';
import { createAgent } from '../agent/agent.ts';
import { ApprovalStore } from '../agent/approvals.ts';
import { createToolRunner } from '../agent/tool-runner.ts';
import { createArgsValidator } from '../agent/validate.ts';
import { createOpenAIProvider } from '../providers/openai.ts';
import { openDatabase } from '../store/db.ts';
import { sqliteDatabase } from '../store/sqlite-sql.ts';
import type { ToolContext } from '../tool.ts';
import { createMcpTools, exposedName, mapResult, type McpTools } from './mcp.ts';
import { combineSources, listTools, staticSource } from './sources.ts';

const fixture = fileURLToPath(new URL('../../test/fixtures/mcp-echo-server.ts', import.meta.url));
const toolMessages = (request: RecordedRequest): string[] => request.body.messages.filter((m) => m.role === 'tool').map((m) => m.content ?? '');
const ctx = (): ToolContext => ({ conversation: 'mem:a:c', channel: 'mem', senderId: 'u1', workspace: '/tmp', signal: new AbortController().signal, log: testLogger() });

async function waitFor(condition: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 1000 && !condition(); i++) await new Promise((resolve) => setTimeout(resolve, 20));
  assert.ok(condition(), `${what} within 20 s`);
}

describe('MCP servers as tools', () => {
  let model: FakeOpenAI;
  let mcp: McpTools;

  before(async () => {
    model = await startFakeOpenAI();
    mcp = createMcpTools({
      servers: [{ name: 'echo', command: process.execPath, args: [fixture], env: { MCP_ECHO_TAG: 'env-ok' }, timeoutMs: 15_000 }],
      log: testLogger(),
      restart: { initialMs: 100, maxMs: 400 },
    });
    await mcp.start();
  });
  after(async () => {
    await mcp.close();
    await model.close();
  });

  it('lists the server tools under <server>__<tool> with their source', () => {
    assert.deepEqual(mcp.status(), [{ server: 'echo', state: 'ready', tools: 3, restarts: 0 }]);
    const sources = combineSources([staticSource([]), mcp]);
    assert.deepEqual(
      listTools(sources).tools.map(({ name, source }) => [name, source]),
      [
        ['echo__echo', 'mcp:echo'],
        ['echo__fail', 'mcp:echo'],
        ['echo__crash', 'mcp:echo'],
      ],
    );
    const echo = mcp.tools()[0]!;
    assert.equal(echo.description, 'Echoes the text back.');
    assert.equal('$schema' in echo.parameters, false);
    assert.deepEqual(echo.assess!({ text: 'x' }, ctx()), { risk: 'low', mutates: false, summary: 'echo__echo: {"text":"x"}' });
    assert.deepEqual(mcp.tools()[1]!.assess!({}, ctx()), { risk: 'medium', mutates: true, summary: 'echo__fail: {}' });
  });

  it('lets the model call a tool through the agent; the result reaches the model', async () => {
    const runner = createToolRunner({ tools: combineSources([mcp]), validator: createArgsValidator(), decide: () => ({ kind: 'allow' }), alwaysApproved: () => false, timeoutMs: 20_000 });
    const agent = createAgent({
      provider: createOpenAIProvider({ baseUrl: model.baseUrl, model: 'm', timeoutMs: 10_000 }),
      runner,
      approvals: new ApprovalStore(sqliteDatabase(openDatabase(':memory:'))),
      name: 'Bot',
      instructions: '',
      workspace: '/tmp',
      maxToolIterations: 5,
      toolCalling: 'native',
    });
    model.script({ toolCalls: [{ name: 'echo__echo', arguments: { text: 'hello' } }, { name: 'echo__fail', arguments: {} }] });
    model.fallback = (request) => ({ text: `Model saw: ${toolMessages(request).join(' | ')}` });
    const output = await agent({
      message: { channel: 'mem', account: 'a', chat: 'c', id: 'm1', sender: { id: 'u1', name: 'Ada' }, text: 'echo hello', timestamp: 0 },
      conversation: 'mem:a:c',
      turnId: 1,
      history: [],
      signal: new AbortController().signal,
      log: testLogger(),
    });
    assert.equal(output.reply, 'Model saw: echo: hello [env-ok] | Error: the disk is on fire');
    assert.deepEqual(
      model.requests[0]!.body.tools!.map((tool) => tool.function.name),
      ['echo__echo', 'echo__fail', 'echo__crash'],
    );
    // Arguments are validated against the server's schema before the call.
    const invalid = await runner.prepare({ id: 'x', name: 'echo__echo', arguments: '{}' }, ctx());
    assert.equal(invalid.outcome === 'done' && invalid.result.kind === 'error' && invalid.result.message, 'Invalid arguments for echo__echo: missing required argument "text".');
  });

  it('fails a call whose server crashes, then restarts the server and offers its tools again', async () => {
    const crash = mcp.tools().find((tool) => tool.name === 'echo__crash')!;
    const result = await crash.execute({}, ctx());
    assert.equal(result.kind, 'error');
    await waitFor(() => mcp.status()[0]!.restarts >= 1, 'the server was restarted');
    await waitFor(() => mcp.status()[0]!.state === 'ready', 'the server is back');
    const echo = mcp.tools().find((tool) => tool.name === 'echo__echo')!;
    assert.deepEqual(await echo.execute({ text: 'again' }, ctx()), { kind: 'ok', text: 'echo: again [env-ok]' });
  });
});

describe('MCP over streamable HTTP', () => {
  it('connects to a URL, sends the configured headers, and calls a tool', async () => {
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: () => randomUUID() });
    await createEchoServer().connect(transport);
    const seen: Array<string | undefined> = [];
    const http = createServer((request, response) => {
      seen.push(request.headers.authorization);
      void transport.handleRequest(request, response);
    });
    await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`;
    const mcp = createMcpTools({ servers: [{ name: 'web', url, headers: { authorization: 'Bearer s3cret' }, timeoutMs: 10_000 }], log: testLogger() });
    try {
      await mcp.start();
      assert.equal(mcp.status()[0]!.state, 'ready');
      const echo = mcp.tools().find((tool) => tool.name === 'web__echo')!;
      assert.equal(mcp.origin(echo), 'mcp:web');
      assert.deepEqual(await echo.execute({ text: 'over http' }, ctx()), { kind: 'ok', text: 'echo: over http' });
      assert.ok(seen.length > 0 && seen.every((header) => header === 'Bearer s3cret'));
    } finally {
      await mcp.close();
      await transport.close();
      http.closeAllConnections();
      await new Promise((resolve) => http.close(resolve));
    }
  });
});

describe('MCP helpers', () => {
  it('names tools within every provider rule, uniquely', () => {
    assert.equal(exposedName('files', 'read_file'), 'files__read_file');
    assert.equal(exposedName('9lives', 'get.thing/x'), '_9lives__get_thing_x');
    const long = exposedName('srv', 'x'.repeat(100));
    assert.equal(long.length, 64);
    assert.match(long, /^srv__x+_[0-9a-f]{8}$/);
    const second = exposedName('srv', 'a.b', new Set(['srv__a_b']));
    assert.match(second, /^srv__a_b_[0-9a-f]{8}$/);
  });

  it('maps results: text joined, isError to an error, structured content as JSON', () => {
    assert.deepEqual(mapResult({ content: [{ type: 'text', text: 'a' }, { type: 'image', data: '', mimeType: 'image/png' }, { type: 'text', text: 'b' }] }), {
      kind: 'ok',
      text: 'a\n[image content omitted]\nb',
    });
    assert.deepEqual(mapResult({ content: [{ type: 'text', text: 'nope' }], isError: true }), { kind: 'error', message: 'nope' });
    assert.deepEqual(mapResult({ content: [], structuredContent: { n: 1 } }), { kind: 'ok', text: '{"n":1}' });
  });

  it('keeps retrying a server that cannot start, without holding start-up', async () => {
    const broken = createMcpTools({ servers: [{ name: 'ghost', command: '/nonexistent/mcp-server' }], log: testLogger(), restart: { initialMs: 50, maxMs: 100 } });
    await broken.start();
    assert.deepEqual(broken.tools(), []);
    await waitFor(() => broken.status()[0]!.restarts >= 2, 'two retries');
    assert.match(broken.status()[0]!.lastError ?? '', /ENOENT|nonexistent|spawn/);
    await broken.close();
  });
});
