/**
 * Remote tools in a cluster (issue 14): two daemons on one PostgreSQL with a Telegram peer and
 * the scripted model. A remote-tool client connects to n1's gateway only (n2 has no gateway at
 * all); the turns run on whichever node the queue picks, and every one of them calls the
 * client's tool and gets its answer — the turns on n2 through a call routed to n1.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { lastUserText } from './fixtures/fake-openai.ts';
import { clusterSuite, startCluster } from './support/cluster.ts';
import { freePort } from './support/net.ts';
import { until } from './support/wait.ts';

const NOTE = /note-(\d+)/;
const token = 'cluster-tools-token-0123456789';

describe('cluster: remote tools', () => {
  const suite = clusterSuite();

  it('a client on n1 serves the turns of every node', async (t) => {
    const url = await suite.pg.createDatabase();
    const gateway = `127.0.0.1:${await freePort()}`;
    // Each note: the suite.model asks for the phone's battery, then answers with what the tool said.
    suite.model.fallback = (request) => {
      const note = NOTE.exec(lastUserText(request))?.[1] ?? '?';
      const last = request.body.messages.at(-1)!;
      if (last.role === 'tool') return { text: `note-${note}: ${last.content ?? ''}` };
      return { toolCalls: [{ name: 'phone_battery', arguments: { note } }] };
    };
    suite.cluster = startCluster({
      url,
      modelUrl: suite.model.baseUrl,
      names: ['n1', 'n2'],
      // only n1 has a gateway (the client connects there); remote tools are medium risk: full autonomy runs them without asking the person
      channels: (name) =>
        `${name === 'n1' ? `[gateway]\nlisten = "${gateway}"\ntoken = "${token}"\n[gateway.remote_tools]\ncall_timeout_seconds = 10\n` : ''}[security]\nautonomy = "full"\n${suite.peer.configSection()}poll_timeout_seconds = 1\nallow = ["*"]\n`,
    });
    const { nodes } = suite.cluster;
    try {
      await Promise.all(nodes.map((node) => suite.cluster!.joined(node)));
    } catch (error) {
      throw new Error(`${(error as Error).message}\n${suite.cluster.tail()}`, { cause: error });
    }

    const phone = new WebSocket(`ws://${gateway}/ws/tools?client=phone`, { headers: { authorization: `Bearer ${token}` } } as unknown as string[]);
    const frames: Array<Record<string, unknown>> = [];
    phone.addEventListener('message', (event) => {
      const frame = JSON.parse(String(event.data)) as Record<string, unknown>;
      frames.push(frame);
      if (frame.type === 'tool_call_request') phone.send(JSON.stringify({ type: 'tool_result', id: frame.id, output: `battery at 81% (asked for note-${(frame.args as { note: string }).note})` }));
    });
    await new Promise((resolve, reject) => (phone.addEventListener('open', resolve, { once: true }), phone.addEventListener('error', reject, { once: true })));
    phone.send(JSON.stringify({ type: 'register_tools', tools: [{ name: 'phone_battery', description: 'Battery level of the phone', parameters: { type: 'object', properties: { note: { type: 'string' } } } }] }));
    await until(() => frames.some((f) => f.type === 'tools_registered'), 'tools_registered');
    // n2 reads the registry on notice (and every 2 s): give it that moment before the turns start.
    await new Promise((resolve) => setTimeout(resolve, 2500));

    const people = Array.from({ length: 16 }, (_, i) => ({ id: 7000 + i, is_bot: false, first_name: `P${i}`, username: `p${i}` }));
    for (const [n, person] of people.entries()) {
      suite.peer.queue({ message: { message_id: n + 1, date: Math.floor(Date.now() / 1000), chat: { id: person.id, type: 'private', first_name: person.first_name }, from: person, text: `note-${n + 1}` } });
    }
    const replies = (): Map<number, string> => new Map(suite.peer.sent.filter((m) => NOTE.test(m.text)).map((m) => [m.chatId, m.text]));
    try {
      await until(() => replies().size >= people.length, `${people.length} replies`, 60_000);
    } catch (error) {
      throw new Error(`${(error as Error).message}: got ${JSON.stringify([...replies()])}\n${suite.cluster.tail()}`, { cause: error });
    }
    for (const [n, person] of people.entries()) {
      assert.equal(replies().get(person.id), `note-${n + 1}: battery at 81% (asked for note-${n + 1})`, `chat ${person.id} got the tool's answer`);
    }
    const turns = nodes.map((node) => (node.stdout().match(/"msg":"turn done"/g) ?? []).length);
    const calls = frames.filter((f) => f.type === 'tool_call_request').length;
    t.diagnostic(`turns per node: ${turns.join(', ')}; tool calls answered by the client on n1: ${calls}`);
    assert.equal(calls, people.length, 'every turn called the tool once, through the one client');
    assert.ok(turns[1]! > 0, `n2 (no gateway, no client) ran turns that called the tool on n1: ${turns.join(', ')}`);

    phone.close();
    await Promise.all(
      nodes.map(async (node) => {
        node.daemon.child.kill('SIGTERM');
        const exit = await node.daemon.exited;
        assert.equal(exit.code, 0, `${node.name} stops cleanly\n${node.stdout().slice(-2000)}`);
      }),
    );
  });
});
