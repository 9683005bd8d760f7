/**
 * Remote tools across a cluster: two nodes (two bridges, each with its own remote tools and
 * gateway socket) on one real PostgreSQL. A client connects to node B; node A sees its tools and
 * its calls are routed to B and answered — or time out, or fail when the client or its whole node
 * goes away — and no call row is left behind.
 */
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { startPostgres, type TestPostgres } from '../../test/support/postgres.ts';
import { testLogger } from '../../test/support/log.ts';
import { connectToolsClient as connectClient, type Frame } from '../../test/support/remote-tools-client.ts';
import { until } from '../../test/support/wait.ts';
import { openPostgres } from '../store/postgres/sql.ts';
import type { Database } from '../store/sql.ts';
import type { Tool, ToolContext, ToolResult } from '../tool.ts';
import { createRemoteTools, type RemoteTools } from '../tools/remote.ts';
import { createPeerTools } from '../tools/remote-peers.ts';
import { combineSources, listTools, type ToolSource } from '../tools/sources.ts';
import { NodeRegistry } from './nodes.ts';
import { startRemoteToolBridge, type RemoteToolBridge } from './remote-tools.ts';


interface TestNode {
  readonly name: string;
  readonly db: Database;
  readonly bridge: RemoteToolBridge;
  readonly remote: RemoteTools;
  /** What a turn on this node is offered: its own clients' tools, then the other nodes'. */
  readonly tools: ToolSource;
  readonly port: number;
  /** Stops this node's heartbeat (as if it died). */
  stopBeating(): void;
  close(): Promise<void>;
}

const REPORT_MS = 200;

async function startNode(url: string, name: string, callTimeoutMs = 2000): Promise<TestNode> {
  const log = testLogger();
  const db = await openPostgres({ url, log, maxConnections: 4 });
  const registry = new NodeRegistry(db, REPORT_MS);
  const beat = (): Promise<void> => registry.report({ node: name, version: 'test', startedAt: 0, channels: [], inFlight: 0, turns: 0 });
  await beat();
  const heart = setInterval(() => void beat().catch(() => undefined), REPORT_MS);
  const bridge = await startRemoteToolBridge({ url, database: db, node: name, log, aliveMs: 3 * REPORT_MS, refreshMs: 200 });
  const remote = createRemoteTools({ log, callTimeoutMs, peers: bridge });
  const tools = combineSources([remote, createPeerTools(bridge, { callTimeoutMs })]);
  const server: Server = createServer((_request, response) => response.writeHead(404).end());
  server.on('upgrade', (request, socket, head) => remote.route.handle(request, socket, head));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    name,
    db,
    bridge,
    remote,
    tools,
    port: (server.address() as AddressInfo).port,
    stopBeating: () => clearInterval(heart),
    async close() {
      clearInterval(heart);
      await bridge.close();
      await remote.close();
      await new Promise((resolve) => server.close(resolve));
      await db.close();
    },
  };
}


const battery = { name: 'phone_battery', description: 'Battery level of the phone.', parameters: { type: 'object', properties: { unit: { type: 'string' } } } };

const context = (signal = new AbortController().signal): ToolContext => ({ conversation: 'c', channel: 'mem', senderId: 'u', workspace: '/tmp', signal, log: testLogger() });

function named(source: ToolSource, name: string): Tool | undefined {
  return source.tools().find((tool) => tool.name === name);
}

async function callRows(db: Database): Promise<number> {
  return (await db.get<{ n: number }>('SELECT count(*) AS n FROM remote_tool_calls'))!.n;
}

describe('remote tools across a cluster (PostgreSQL bridge)', () => {
  let server: TestPostgres;
  let url: string;
  let a: TestNode;
  let b: TestNode;

  before(async () => {
    server = await startPostgres();
    url = await server.createDatabase();
    a = await startNode(url, 'a');
    b = await startNode(url, 'b');
  });
  after(async () => {
    await a?.close();
    await b?.close();
    server?.stop();
  });

  it('shows a tool registered on node B to node A, and refuses its name to another client on A', async () => {
    const phone = await connectClient(b.port, 'phone');
    phone.send({ type: 'register_tools', tools: [battery] });
    assert.equal((await phone.next()).registered, 1);
    await until(() => named(a.tools, 'phone_battery') !== undefined, 'node A to list the tool');
    const listed = listTools(a.tools).tools;
    assert.deepEqual(
      listed.map(({ name, source, description, parameters }) => ({ name, source, description, parameters })),
      [{ name: 'phone_battery', source: 'remote:phone@b', description: battery.description, parameters: battery.parameters }],
    );
    assert.deepEqual(b.bridge.tools(), [], 'a node does not list its own clients as peers');

    const other = await connectClient(a.port, 'tablet');
    other.send({ type: 'register_tools', tools: [battery] });
    const refused = await other.next();
    assert.deepEqual(refused.rejected, [{ name: 'phone_battery', reason: 'another client ("phone" on node "b") already registered this name' }]);
    other.ws.close();

    phone.ws.close();
    await until(() => a.tools.tools().length === 0, 'node A to drop the tool once the client left');
  });

  it('routes a call from A to the client on B and returns its answer, leaving no call row', async () => {
    const phone = await connectClient(b.port, 'phone');
    phone.send({ type: 'register_tools', tools: [battery] });
    await phone.next();
    await until(() => named(a.tools, 'phone_battery') !== undefined, 'node A to list the tool');
    phone.ws.on('message', (data) => {
      const frame = JSON.parse(String(data)) as Frame;
      if (frame.type === 'tool_call_request') phone.send({ type: 'tool_result', id: frame.id, output: `81 ${(frame.args as { unit: string }).unit}` });
    });
    const tool = named(a.tools, 'phone_battery')!;
    assert.deepEqual(await tool.execute({ unit: 'percent' }, context()), { kind: 'ok', text: '81 percent' });
    assert.equal(tool.assess?.({}, context()).risk, 'medium', 'judged like a local remote tool');

    // The routed round trip, measured (printed, not asserted).
    const times: number[] = [];
    for (let i = 0; i < 50; i++) {
      const started = performance.now();
      const result = await tool.execute({ unit: `u${i}` }, context());
      times.push(performance.now() - started);
      assert.deepEqual(result, { kind: 'ok', text: `81 u${i}` });
    }
    const local: number[] = [];
    for (let i = 0; i < 50; i++) {
      const started = performance.now();
      await named(b.tools, 'phone_battery')!.execute({ unit: 'x' }, context());
      local.push(performance.now() - started);
    }
    times.sort((x, y) => x - y);
    local.sort((x, y) => x - y);
    process.stderr.write(
      `# remote-tool call over 50 calls: routed A→B p50 ${times[25]!.toFixed(1)} ms, p90 ${times[45]!.toFixed(1)} ms, max ${times[49]!.toFixed(1)} ms; ` +
        `direct on B p50 ${local[25]!.toFixed(1)} ms\n`,
    );
    assert.equal(await callRows(a.db), 0, 'every answered call row is deleted');
    phone.ws.close();
    await until(() => a.tools.tools().length === 0, 'the tool gone');
  });

  it('gives A the same timeout error when the client never answers, and cleans up', async () => {
    const quick = await startNode(url, 'quick', 500);
    const phone = await connectClient(b.port, 'silent');
    try {
      phone.send({ type: 'register_tools', tools: [{ ...battery, name: 'phone_silent' }] });
      await phone.next();
      await until(() => named(quick.tools, 'phone_silent') !== undefined, 'node quick to list the tool');
      const started = Date.now();
      const result = await named(quick.tools, 'phone_silent')!.execute({}, context());
      assert.deepEqual(result, { kind: 'error', message: 'phone_silent timed out: the remote client "silent" did not answer within 0.5 s.' });
      assert.ok(Date.now() - started < 1500, 'no longer than the timeout');
      // B stops waiting at the caller's deadline too: its client call ends, and no row is left.
      await until(() => b.bridge.inFlight().serving === 0, 'node B to give up the call');
      await until(() => b.remote.clients().every((client) => client.inFlight === 0), 'the client call on B to end');
      // the caller deletes its row once the insert is done (the delete cannot overtake it)
      await until(async () => (await callRows(a.db)) === 0, 'no call row left');
    } finally {
      phone.ws.close();
      await quick.close();
    }
  });

  it('fails a routed call in flight when the client disconnects', async () => {
    const phone = await connectClient(b.port, 'flaky');
    phone.send({ type: 'register_tools', tools: [{ ...battery, name: 'phone_flaky' }] });
    await phone.next();
    await until(() => named(a.tools, 'phone_flaky') !== undefined, 'node A to list the tool');
    const started = Date.now();
    const pending = named(a.tools, 'phone_flaky')!.execute({}, context());
    assert.equal((await phone.next()).type, 'tool_call_request');
    phone.ws.terminate();
    assert.deepEqual(await pending, { kind: 'error', message: 'The remote client "flaky" disconnected before answering; the call did not complete.' });
    assert.ok(Date.now() - started < 1500, 'no waiting for the timeout');
    await until(() => a.tools.tools().length === 0, 'the tool gone from A');
    assert.equal(await callRows(a.db), 0);
  });

  it('a cancelled turn ends its routed call at once', async () => {
    const phone = await connectClient(b.port, 'lazy');
    phone.send({ type: 'register_tools', tools: [{ ...battery, name: 'phone_lazy' }] });
    await phone.next();
    await until(() => named(a.tools, 'phone_lazy') !== undefined, 'node A to list the tool');
    const controller = new AbortController();
    const pending = named(a.tools, 'phone_lazy')!.execute({}, context(controller.signal));
    await phone.next();
    controller.abort();
    assert.deepEqual(await pending, { kind: 'error', message: 'phone_lazy was cancelled.' });
    // B stops waiting for its client too: a late answer is refused there, as on one node.
    await until(() => b.remote.clients().every((client) => client.inFlight === 0) && b.bridge.inFlight().serving === 0, 'node B to drop the cancelled call', 1000);
    assert.equal(await callRows(a.db), 0);
    phone.ws.close();
    await until(() => a.tools.tools().length === 0, 'the tool gone from A');
  });

  it('stops listing a dead node\'s tools, fails the calls waiting on it, and a restart clears its rows', async () => {
    const doomed = await startNode(url, 'doomed');
    const phone = await connectClient(doomed.port, 'orphan');
    phone.send({ type: 'register_tools', tools: [{ ...battery, name: 'phone_orphan' }] });
    await phone.next();
    await until(() => named(a.tools, 'phone_orphan') !== undefined, 'node A to list the tool');
    // The node "dies": no more heartbeats, and nothing answers (its client is silent).
    const pending = named(a.tools, 'phone_orphan')!.execute({}, context());
    await phone.next();
    doomed.stopBeating();
    const started = Date.now();
    assert.deepEqual(await pending, { kind: 'error', message: 'The remote client "orphan" disconnected before answering; the call did not complete.' });
    const gone = Date.now() - started;
    assert.equal(named(a.tools, 'phone_orphan'), undefined, 'its tools are no longer offered');
    assert.ok(gone < 3 * REPORT_MS + 1500, `gone within three missed reports and a refresh (${gone} ms)`);
    // The rows are still there (a crashed node cleans nothing) until it starts again under its name.
    assert.equal((await a.db.get<{ n: number }>("SELECT count(*) AS n FROM remote_tools WHERE node = 'doomed'"))!.n, 1);
    const again = await startRemoteToolBridge({ url, database: a.db, node: 'doomed', log: testLogger(), aliveMs: 3 * REPORT_MS });
    assert.equal((await a.db.get<{ n: number }>("SELECT count(*) AS n FROM remote_tools WHERE node = 'doomed'"))!.n, 0);
    await again.close();
    phone.ws.close();
    await doomed.close();
    assert.equal(await callRows(a.db), 0);
  });

  it('removes a node\'s tools when it leaves', async () => {
    const leaving = await startNode(url, 'leaving');
    const phone = await connectClient(leaving.port, 'brief');
    phone.send({ type: 'register_tools', tools: [{ ...battery, name: 'phone_brief' }] });
    await phone.next();
    await until(() => named(a.tools, 'phone_brief') !== undefined, 'node A to list the tool');
    await leaving.close();
    await until(() => named(a.tools, 'phone_brief') === undefined, 'node A to drop the tool at once', 1000);
  });

  it('keeps answering through the live remote tools when a reload builds new ones and discards them', async () => {
    const phone = await connectClient(b.port, 'steady');
    phone.send({ type: 'register_tools', tools: [{ ...battery, name: 'phone_steady' }] });
    await phone.next();
    phone.ws.on('message', (data) => {
      const frame = JSON.parse(String(data)) as Frame;
      if (frame.type === 'tool_call_request') phone.send({ type: 'tool_result', id: frame.id, output: 'steady' });
    });
    await until(() => named(a.tools, 'phone_steady') !== undefined, 'node A to list the tool');
    // A reload on B builds another set of remote tools on the same bridge, then throws it away.
    const discarded = createRemoteTools({ log: testLogger(), peers: b.bridge });
    await discarded.close();
    assert.deepEqual(await named(a.tools, 'phone_steady')!.execute({}, context()), { kind: 'ok', text: 'steady' });
    phone.ws.close();
    await until(() => named(a.tools, 'phone_steady') === undefined, 'the tool gone');
  });

  it('sweeps call rows a dead caller left, a minute after their deadline', async () => {
    await a.db.run("INSERT INTO remote_tool_calls (id, caller, node, client, name, args, created_at, deadline) VALUES ('old', 'gone', 'b', 'x', 'y', '{}', 0, 0)");
    await a.db.run("INSERT INTO remote_tool_calls (id, caller, node, client, name, args, created_at, deadline, taken_at) VALUES ('recent', 'gone', 'elsewhere', 'x', 'y', '{}', ?, ?, 1)", [Date.now(), Date.now()]);
    const sweeper = await startRemoteToolBridge({ url, database: a.db, node: 'sweeper', log: testLogger(), aliveMs: 3 * REPORT_MS, refreshMs: 50 });
    try {
      let left: string[] = [];
      for (let tries = 0; tries < 40; tries++) {
        left = (await a.db.all<{ id: string }>('SELECT id FROM remote_tool_calls ORDER BY id')).map((row) => row.id);
        if (!left.includes('old')) break;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      assert.deepEqual(left, ['recent'], 'only the row past its deadline and the grace is swept');
    } finally {
      await sweeper.close();
      await a.db.run("DELETE FROM remote_tool_calls WHERE id = 'recent'");
    }
  });

  it('answers with the disconnect error when a call reaches a node whose client just left', async () => {
    // A call stored for a client B no longer has (it left between A's listing and the call).
    const result: ToolResult = await new Promise((resolve) => {
      void a.bridge.call({ node: 'b', client: 'nobody', name: 'phone_none', description: '', parameters: {} }, {}, { timeoutMs: 2000, signal: new AbortController().signal }).then((outcome) => {
        resolve(outcome.kind === 'answered' ? outcome.result : { kind: 'error', message: outcome.kind });
      });
    });
    assert.ok(result.kind === 'error');
    assert.match(result.message, /^(The remote client "nobody" has disconnected; phone_none is no longer available\.|disconnected)$/);
  });
});
