/**
 * A cluster (issue 14): three daemons on one PostgreSQL with a Telegram peer and the scripted
 * model. Every message answered exactly once, in order per conversation, and turns ran on
 * every node (the pg-boss queue hands them to any node; only the node holding the Telegram
 * lease polls and sends).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { lastUserText } from './fixtures/fake-openai.ts';
import { clusterSuite, startCluster } from './support/cluster.ts';
import { freePort } from './support/net.ts';
import { until } from './support/wait.ts';

const NOTE = /note-(\d+)/;

describe('cluster: three daemons on one PostgreSQL', () => {
  const suite = clusterSuite();

  it('answers 300 messages from 30 people exactly once, in order per conversation, with turns on every node', async (t) => {
    const url = await suite.pg.createDatabase();
    suite.model.fallback = (request) => ({ text: `got note-${NOTE.exec(lastUserText(request))?.[1] ?? '?'}`, delayMs: 20 + Math.floor(Math.random() * 150) });
    // n1 also serves the gateway (status and the web console), as an operator's node would
    const gateway = `127.0.0.1:${await freePort()}`;
    const token = 'cluster-test-token-0123456789';
    suite.cluster = startCluster({
      url,
      modelUrl: suite.model.baseUrl,
      failoverSeconds: 3,
      channels: (node) => `${node === 'n1' ? `[gateway]\nlisten = "${gateway}"\ntoken = "${token}"\n` : ''}${suite.peer.configSection()}poll_timeout_seconds = 1\nallow = ["*"]\n`,
    });
    const daemons = suite.cluster.nodes.map((node) => node.daemon);
    const tail = suite.cluster.tail;
    try {
      await Promise.all(daemons.map((daemon) => daemon.waitFor(/"msg":"joined the cluster/, 'stdout', 30_000)));
      await until(() => daemons.some((daemon) => /this node now holds the channel/.test(daemon.stdout())), 'a node to take the Telegram lease', 20_000);
    } catch (error) {
      throw new Error(`${(error as Error).message}\n${tail()}`, { cause: error });
    }

    const people = Array.from({ length: 30 }, (_, i) => ({ id: 5000 + i, is_bot: false, first_name: `P${i}`, username: `p${i}` }));
    const sent = new Map<number, number[]>(people.map((p) => [p.id, []]));
    for (let n = 1; n <= 300; n++) {
      const person = people[(n * 7) % people.length]!;
      suite.peer.queue({ message: { message_id: n, date: Math.floor(Date.now() / 1000), chat: { id: person.id, type: 'private', first_name: person.first_name }, from: person, text: `note-${n}` } });
      sent.get(person.id)!.push(n);
      if (n % 10 === 0) await new Promise((resolve) => setTimeout(resolve, 25));
    }
    const replies = (): Map<number, number[]> => {
      const byChat = new Map<number, number[]>();
      for (const message of suite.peer.sent) {
        const n = NOTE.exec(message.text)?.[1];
        if (n === undefined) continue;
        byChat.set(message.chatId, [...(byChat.get(message.chatId) ?? []), Number(n)]);
      }
      return byChat;
    };
    const count = (): number => [...replies().values()].reduce((sum, list) => sum + list.length, 0);
    try {
      await until(() => count() >= 300, '300 replies', 150_000);
    } catch {
      throw new Error(`only ${count()} of 300 replies arrived\n${tail()}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 1500)); // a duplicate would show up now
    const got = replies();
    for (const [chat, notes] of sent) assert.deepEqual(got.get(chat), notes, `chat ${chat}: every note answered once, in order`);
    assert.equal(count(), 300);
    const turns = daemons.map((daemon) => (daemon.stdout().match(/"msg":"turn done"/g) ?? []).length);
    t.diagnostic(`turns per node: ${turns.join(', ')}; suite.model requests: ${suite.model.requests.length}`);
    assert.equal(
      turns.reduce((a, b) => a + b, 0),
      300,
      'each turn ran once',
    );
    for (const [index, n] of turns.entries()) assert.ok(n > 0, `node n${index + 1} ran turns`);
    const holders = daemons.filter((daemon) => /"channel":"telegram"[^\n]*this node now holds the channel/.test(daemon.stdout()));
    assert.equal(holders.length, 1, 'exactly one node held Telegram');

    // The status API and the web console's overview show the whole suite.cluster.
    const get = async (path: string): Promise<{ cluster?: { node: string; nodes: Array<{ node: string; alive: boolean; channels: string[]; turns: number }> } }> => {
      const response = await fetch(`http://${gateway}${path}`, { headers: { authorization: `Bearer ${token}` } });
      assert.equal(response.status, 200, `${path}: ${response.status}`);
      return (await response.json()) as never;
    };
    // nodes report every 3 s, and n1 reads the others' reports at its own: wait until all turns are in
    let status = await get('/api/status');
    for (let tries = 0; status.cluster?.nodes.reduce((sum, n) => sum + n.turns, 0) !== 300 && tries < 40; tries++) {
      await new Promise((resolve) => setTimeout(resolve, 250));
      status = await get('/api/status');
    }
    assert.equal(status.cluster?.node, 'n1');
    assert.deepEqual(
      status.cluster?.nodes.map((n) => [n.node, n.alive]),
      [['n1', true], ['n2', true], ['n3', true]],
    );
    assert.deepEqual(
      status.cluster?.nodes.flatMap((n) => n.channels).filter((c) => c === 'telegram'),
      ['telegram'],
      'one node holds Telegram',
    );
    assert.equal(status.cluster?.nodes.reduce((sum, n) => sum + n.turns, 0), 300);
    const overview = (await get('/api/console/overview')) as { status?: { cluster?: { nodes: unknown[] } } };
    assert.equal(overview.status?.cluster?.nodes.length, 3, 'the console lists every node');

    // The browser chat of n1's console is n1's own channel (`web-n1`): a turn for it may run on
    // any node, and its reply is sent by n1 to the pages open there.
    assert.ok(status.cluster?.nodes.find((n) => n.node === 'n1')?.channels.includes('web-n1'), `n1 holds its browser chat: ${JSON.stringify(status.cluster?.nodes)}`);
    const signIn = await fetch(`http://${gateway}/api/console/session`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ token, name: 'ops' }) });
    assert.equal(signIn.status, 200);
    const { csrf } = (await signIn.json()) as { csrf: string };
    const cookie = /sb_session=[^;]+/.exec(signIn.headers.get('set-cookie') ?? '')?.[0] ?? '';
    const chat = { cookie, 'x-csrf-token': csrf, 'content-type': 'application/json' };
    for (const n of [9001, 9002, 9003]) {
      const posted = await fetch(`http://${gateway}/api/console/chat`, { method: 'POST', headers: chat, body: JSON.stringify({ text: `note-${n} from the browser` }) });
      assert.equal(posted.status, 202, await posted.text());
    }
    let browserReplies: string[] = [];
    await until(async () => {
      const history = (await (await fetch(`http://${gateway}/api/console/chat/history`, { headers: chat })).json()) as { messages: Array<{ role: string; text: string }> };
      browserReplies = history.messages.filter((m) => m.role === 'assistant').map((m) => m.text);
      return browserReplies.length >= 3;
    }, 'the browser chat answered', 20_000);
    assert.deepEqual(browserReplies, ['got note-9001', 'got note-9002', 'got note-9003']);
    const { default: pgClient } = await import('pg');
    const db = new pgClient.Client({ connectionString: url });
    await db.connect();
    try {
      await until(async () => (await db.query("SELECT count(*)::int AS n FROM outbox WHERE channel = 'web-n1' AND status = 'sent'")).rows[0].n === 3, 'n1 sent the browser replies', 10_000);
    } finally {
      await db.end();
    }

    await Promise.all(
      daemons.map(async (daemon) => {
        daemon.child.kill('SIGTERM');
        const exit = await daemon.exited;
        assert.equal(exit.code, 0, `a node stops cleanly\n${daemon.stdout().slice(-2000)}`);
      }),
    );
  });
});
