/**
 * A cluster (issue 14): three daemons on one PostgreSQL with a Telegram peer and the scripted
 * model. Every message answered exactly once, in order per conversation, and turns ran on
 * every node (the pg-boss queue hands them to any node; only the node holding the Telegram
 * lease polls and sends).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { lastUserText, startFakeOpenAI, type FakeOpenAI } from './fixtures/fake-openai.ts';
import { startTelegramPeer, type TelegramPeer } from './peers/telegram.ts';
import { startDaemon, tempConfig, type Daemon } from './support/cli.ts';
import { startPostgres, type TestPostgres } from './support/postgres.ts';
import { freePort } from './support/net.ts';
import { until } from './support/wait.ts';

const NOTE = /note-(\d+)/;

describe('cluster: three daemons on one PostgreSQL', () => {
  let pg: TestPostgres;
  let model: FakeOpenAI;
  let peer: TelegramPeer;
  const daemons: Daemon[] = [];
  const configs: Array<{ cleanup(): void }> = [];

  before(async () => {
    pg = await startPostgres();
    model = await startFakeOpenAI();
    peer = await startTelegramPeer();
  });
  after(async () => {
    for (const daemon of daemons) if (daemon.child.exitCode === null && daemon.child.signalCode === null) daemon.child.kill('SIGKILL');
    await Promise.all(daemons.map((daemon) => daemon.exited));
    for (const config of configs) config.cleanup();
    await model?.close();
    await peer?.close();
    pg?.stop();
  });

  it('answers 300 messages from 30 people exactly once, in order per conversation, with turns on every node', async (t) => {
    const url = await pg.createDatabase();
    model.fallback = (request) => ({ text: `got note-${NOTE.exec(lastUserText(request))?.[1] ?? '?'}`, delayMs: 20 + Math.floor(Math.random() * 150) });
    // n1 also serves the gateway (status and the web console), as an operator's node would
    const gateway = `127.0.0.1:${await freePort()}`;
    const token = 'cluster-test-token-0123456789';
    for (const node of ['n1', 'n2', 'n3']) {
      const config = tempConfig(
        model.baseUrl,
        `[log]\nformat = "json"\n[store]\nkind = "postgres"\nurl = "${url}"\n[cluster]\nnode = "${node}"\nfailover_seconds = 3\n` +
          `${node === 'n1' ? `[gateway]\nlisten = "${gateway}"\ntoken = "${token}"\n` : ''}` +
          `${peer.configSection()}poll_timeout_seconds = 1\nallow = ["*"]\n`,
      );
      configs.push(config);
      daemons.push(startDaemon(['start', '--config', config.file], { env: { TEST_MODEL_KEY: 'sk-cluster', SWITCHBOARD_LOG_LEVEL: 'info' } }));
    }
    const tail = (): string => daemons.map((d, i) => `--- n${i + 1} stdout:\n${d.stdout().slice(-3000)}\nstderr:\n${d.stderr().slice(-1000)}`).join('\n');
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
      peer.queue({ message: { message_id: n, date: Math.floor(Date.now() / 1000), chat: { id: person.id, type: 'private', first_name: person.first_name }, from: person, text: `note-${n}` } });
      sent.get(person.id)!.push(n);
      if (n % 10 === 0) await new Promise((resolve) => setTimeout(resolve, 25));
    }
    const replies = (): Map<number, number[]> => {
      const byChat = new Map<number, number[]>();
      for (const message of peer.sent) {
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
    t.diagnostic(`turns per node: ${turns.join(', ')}; model requests: ${model.requests.length}`);
    assert.equal(
      turns.reduce((a, b) => a + b, 0),
      300,
      'each turn ran once',
    );
    for (const [index, n] of turns.entries()) assert.ok(n > 0, `node n${index + 1} ran turns`);
    const holders = daemons.filter((daemon) => /"channel":"telegram"[^\n]*this node now holds the channel/.test(daemon.stdout()));
    assert.equal(holders.length, 1, 'exactly one node held Telegram');

    // The status API and the web console's overview show the whole cluster.
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

    await Promise.all(
      daemons.map(async (daemon) => {
        daemon.child.kill('SIGTERM');
        const exit = await daemon.exited;
        assert.equal(exit.code, 0, `a node stops cleanly\n${daemon.stdout().slice(-2000)}`);
      }),
    );
  });
});
