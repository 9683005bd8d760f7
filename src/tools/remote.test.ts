import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, beforeEach, describe, it } from 'node:test';
import { startFakeOpenAI, type FakeOpenAI, type RecordedRequest } from '../../test/fixtures/fake-openai.ts';
import { testLogger } from '../../test/support/log.ts';
import { connectToolsClient as connectClient } from '../../test/support/remote-tools-client.ts';
import { createAgent } from '../agent/agent.ts';
import { ApprovalStore } from '../agent/approvals.ts';
import { createToolRunner, type ToolRunner } from '../agent/tool-runner.ts';
import { createArgsValidator } from '../agent/validate.ts';
import { createOpenAIProvider } from '../providers/openai.ts';
import { decide } from '../security/autonomy.ts';
import { openDatabase } from '../store/db.ts';
import { sqliteDatabase } from '../store/sqlite-sql.ts';
import type { Tool, ToolContext } from '../tool.ts';
import { createClockTool } from './clock.ts';
import { createRemoteTools, type RemoteTools } from './remote.ts';
import { combineSources, listTools, staticSource, type ToolSource } from './sources.ts';



const deviceInfo = { name: 'device_info', description: 'Model and OS of the phone.', parameters: { type: 'object', properties: { detail: { type: 'string' } } } };
const toolMessages = (request: RecordedRequest): string[] => request.body.messages.filter((m) => m.role === 'tool').map((m) => m.content ?? '');
const message = { channel: 'mem', account: 'a', chat: 'c', id: 'm1', sender: { id: 'u1', name: 'Ada' }, text: 'what phone is this?', timestamp: 0 };

describe('remote tools over WebSocket', () => {
  let model: FakeOpenAI;
  let server: Server;
  let port: number;
  let remote: RemoteTools;
  let tools: ToolSource;
  let runner: ToolRunner;
  const clock = createClockTool() as unknown as Tool;

  const agent = () =>
    createAgent({
      provider: createOpenAIProvider({ baseUrl: model.baseUrl, model: 'm', timeoutMs: 10_000 }),
      runner,
      approvals: new ApprovalStore(sqliteDatabase(openDatabase(':memory:'))),
      name: 'Bot',
      instructions: '',
      workspace: '/tmp',
      maxToolIterations: 5,
      toolCalling: 'native',
    });
  const turn = (text = message.text) => agent()({ message: { ...message, text }, conversation: 'mem:a:c', turnId: 1, history: [], signal: new AbortController().signal, log: testLogger() });

  before(async () => {
    model = await startFakeOpenAI();
    remote = createRemoteTools({ log: testLogger(), callTimeoutMs: 2_000, allow: ['device_*', 'phone_*', 'shared_*', 'bad_*', 'current_time'], reserved: () => ['current_time'] });
    tools = combineSources([staticSource([clock]), remote]);
    runner = createToolRunner({ tools, validator: createArgsValidator(), decide: () => ({ kind: 'allow' }), alwaysApproved: () => false, timeoutMs: 5_000 });
    server = createServer((_request, response) => response.writeHead(404).end());
    server.on('upgrade', (request, socket, head) => remote.route.handle(request, socket, head));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });
  after(async () => {
    await remote.close();
    await new Promise((resolve) => server.close(resolve));
    await model.close();
  });
  beforeEach(() => {
    model.requests.length = 0;
    model.fallback = (request) => ({ text: `Model saw: ${toolMessages(request).join(' | ')}` });
  });

  it('registers a tool, the model calls it, and the result reaches the model', async () => {
    assert.equal(remote.route.path, '/ws/tools');
    assert.equal(remote.route.auth, 'token');
    const phone = await connectClient(port, 'pixel');
    phone.send({ type: 'register_tools', tools: [deviceInfo] });
    const registered = await phone.next();
    assert.deepEqual(registered, { type: 'tools_registered', count: 1, registered: 1, accepted: ['device_info'], rejected: [] });
    assert.deepEqual(
      listTools(tools).tools.map(({ name, source }) => [name, source]),
      [
        ['current_time', 'built-in'],
        ['device_info', 'remote:pixel'],
      ],
    );

    model.script({ toolCalls: [{ name: 'device_info', arguments: { detail: 'model' } }] });
    const output = turn();
    const request = await phone.next();
    assert.equal(request.type, 'tool_call_request');
    assert.equal(request.name, 'device_info');
    assert.deepEqual(request.args, { detail: 'model' });
    assert.equal(typeof request.id, 'string');
    phone.send({ type: 'tool_result', id: request.id, output: '{"model":"Pixel 8"}', success: true });
    assert.deepEqual(await phone.next(), { type: 'result_acknowledged', id: request.id });
    assert.equal((await output).reply, 'Model saw: {"model":"Pixel 8"}');
    assert.deepEqual(
      model.requests[0]!.body.tools!.map((tool) => tool.function.name),
      ['current_time', 'device_info'],
    );

    // tool_error reaches the model as an error it can read.
    model.script({ toolCalls: [{ name: 'device_info', arguments: {} }] });
    const second = turn();
    const call = await phone.next();
    phone.send({ type: 'tool_error', id: call.id, error: 'Camera permission denied', success: false });
    assert.equal((await phone.next()).type, 'result_acknowledged');
    assert.equal((await second).reply, 'Model saw: Error: Camera permission denied');

    phone.ws.close();
    await waitFor(() => remote.tools().length === 0);
    assert.deepEqual(
      runner.tools.map((tool) => tool.name),
      ['current_time'],
      'the tools are gone from the next turn',
    );
  });

  it('gives the model a timeout error when the client does not answer, and refuses the late answer', async () => {
    const slow = await connectClient(port, 'slow');
    slow.send({ type: 'register_tools', tools: [{ ...deviceInfo, name: 'phone_slow' }] });
    assert.equal((await slow.next()).registered, 1);
    model.script({ toolCalls: [{ name: 'phone_slow', arguments: {} }] });
    const output = turn();
    const request = await slow.next();
    const { reply } = await output;
    assert.match(reply, /^Model saw: Error: phone_slow timed out: the remote client "slow" did not answer within 2 s\.$/);
    slow.send({ type: 'tool_result', id: request.id, output: 'too late' });
    const late = await slow.next();
    assert.equal(late.type, 'error');
    assert.equal(late.id, request.id);
    slow.ws.close();
    await waitFor(() => remote.tools().length === 0);
  });

  it('fails a call in flight cleanly when the client disconnects, and drops its tools at once', async () => {
    const flaky = await connectClient(port, 'flaky');
    flaky.send({ type: 'register_tools', tools: [{ ...deviceInfo, name: 'phone_flaky' }] });
    await flaky.next();
    model.script({ toolCalls: [{ name: 'phone_flaky', arguments: {} }] });
    const started = Date.now();
    const output = turn();
    assert.equal((await flaky.next()).type, 'tool_call_request');
    flaky.ws.terminate();
    const { reply } = await output;
    assert.match(reply, /^Model saw: Error: The remote client "flaky" disconnected before answering/);
    assert.ok(Date.now() - started < 5_000, 'no waiting for the timeout');
    assert.deepEqual(remote.tools(), []);
    // A call prepared before the disconnect (say, waiting for approval) fails as data too.
    const result = await runner.run({ call: { id: 'x', name: 'phone_flaky', arguments: '{}' }, outcome: 'run', args: {} }, ctx());
    assert.equal(result.kind, 'error');
  });

  it('answers malformed frames with a protocol error and keeps the connection', async () => {
    const client = await connectClient(port, 'messy');
    client.ws.send(Buffer.from([1, 2, 3]), { binary: true });
    assert.match(String((await client.next()).error), /binary frames/);
    client.send('{not json');
    assert.match(String((await client.next()).error), /valid JSON/);
    client.send('[1,2]');
    assert.match(String((await client.next()).error), /"type"/);
    client.send({ type: 'launch_missiles' });
    assert.match(String((await client.next()).error), /unknown frame type "launch_missiles"/);
    client.send({ type: 'register_tools', tools: 'all of them' });
    assert.match(String((await client.next()).error), /"tools" array/);
    client.send({ type: 'tool_result', output: 'x' });
    assert.match(String((await client.next()).error), /"id"/);
    client.send({ type: 'tool_result', id: 'nope', output: 'x' });
    assert.match(String((await client.next()).error), /no call with this id/);
    client.send({ type: 'register_tools', tools: [{ ...deviceInfo, name: 'phone_ok' }, 42, { name: 'bad_schema', parameters: { type: 'string' } }, { name: 'bad_desc', description: 7 }] });
    const registered = await client.next();
    assert.deepEqual(registered.accepted, ['phone_ok']);
    assert.deepEqual(
      (registered.rejected as Array<{ reason: string }>).map((r) => r.reason),
      [
        'each tool must be an object with name, description and parameters',
        'parameters must be a JSON Schema object with "type": "object"',
        'the description must be a string',
      ],
    );
    client.ws.close();
    await waitFor(() => remote.tools().length === 0);
  });

  it('rejects names that clash, break the name rules, or are not allowed', async () => {
    const first = await connectClient(port, 'first');
    first.send({ type: 'register_tools', tools: [{ ...deviceInfo, name: 'shared_lamp' }] });
    assert.deepEqual((await first.next()).accepted, ['shared_lamp']);
    const second = await connectClient(port, 'first'); // same requested name: gets a distinct id
    second.send({
      type: 'register_tools',
      tools: [
        { ...deviceInfo, name: 'shared_lamp' },
        { ...deviceInfo, name: 'current_time' },
        { ...deviceInfo, name: 'phone call' },
        { ...deviceInfo, name: 'rm_rf' },
        { ...deviceInfo, name: 'phone_a' },
        { ...deviceInfo, name: 'phone_a' },
      ],
    });
    const registered = await second.next();
    assert.equal(registered.count, 6);
    assert.equal(registered.registered, 1);
    assert.deepEqual(registered.accepted, ['phone_a']);
    assert.deepEqual(registered.rejected, [
      { name: 'shared_lamp', reason: 'another client ("first") already registered this name' },
      { name: 'current_time', reason: 'a built-in or MCP tool already has this name' },
      { name: 'phone call', reason: 'the name must be 1–64 letters, digits, "_" or "-", starting with a letter or "_"' },
      { name: 'rm_rf', reason: "the name is not in the gateway's allowlist for remote tools" },
      { name: 'phone_a', reason: 'the name appears twice in this registration' },
    ]);
    assert.deepEqual(
      listTools(tools).tools.map(({ name, source }) => [name, source]),
      [
        ['current_time', 'built-in'],
        ['shared_lamp', 'remote:first'],
        ['phone_a', `remote:${remote.clients().find((c) => c.tools.includes('phone_a'))!.id}`],
      ],
    );
    first.ws.close();
    second.ws.close();
    await waitFor(() => remote.tools().length === 0);
  });

  it('asks before a remote call in supervised autonomy and refuses it in read-only', async () => {
    const client = await connectClient(port, 'policy');
    client.send({ type: 'register_tools', tools: [{ ...deviceInfo, name: 'phone_torch' }] });
    await client.next();
    const call = { id: 'c1', name: 'phone_torch', arguments: '{}' };
    const supervised = createToolRunner({ tools, validator: createArgsValidator(), decide: (a) => decide('supervised', a), alwaysApproved: () => false, timeoutMs: 1000 });
    const prepared = await supervised.prepare(call, ctx());
    assert.equal(prepared.outcome, 'ask');
    assert.equal(prepared.outcome === 'ask' && prepared.summary, 'remote phone_torch: {}');
    const readOnly = createToolRunner({ tools, validator: createArgsValidator(), decide: (a) => decide('read_only', a), alwaysApproved: () => false, timeoutMs: 1000 });
    assert.equal((await readOnly.prepare(call, ctx())).outcome, 'done');
    client.ws.close();
    await waitFor(() => remote.tools().length === 0);
  });
});

describe('remote tools: how many clients', () => {
  it('closes a client past maxClients with 1013 and takes one again once a place is free', async () => {
    const remote = createRemoteTools({ log: testLogger(), maxClients: 2 });
    const server = createServer((_request, response) => response.writeHead(404).end());
    server.on('upgrade', (request, socket, head) => remote.route.handle(request, socket, head));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    try {
      const first = await connectClient(port, 'one');
      await connectClient(port, 'two');
      await waitFor(() => remote.clients().length === 2);
      const third = await connectClient(port, 'three');
      const [code, reason] = await new Promise<[number, string]>((resolve) => third.ws.once('close', (c, r) => resolve([c, String(r)])));
      assert.equal(code, 1013);
      assert.match(reason, /at most 2 remote-tool clients/);
      assert.deepEqual(remote.clients().map((c) => c.id).sort(), ['one', 'two']);
      first.ws.close();
      await waitFor(() => remote.clients().length === 1);
      await connectClient(port, 'four');
      await waitFor(() => remote.clients().length === 2);
    } finally {
      await remote.close();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});

function ctx(): ToolContext {
  return { conversation: 'mem:a:c', channel: 'mem', senderId: 'u1', workspace: '/tmp', signal: new AbortController().signal, log: testLogger() };
}

async function waitFor(condition: () => boolean): Promise<void> {
  for (let i = 0; i < 200 && !condition(); i++) await new Promise((resolve) => setTimeout(resolve, 10));
  assert.ok(condition(), 'condition not reached in 2 s');
}
