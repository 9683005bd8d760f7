/**
 * Failover in a cluster (issue 14): nodes die and the cluster carries on. Three daemons on one
 * PostgreSQL with a Telegram peer and the scripted model:
 *
 * - the node holding Telegram is SIGKILLed mid-turn: another node takes the channel over and
 *   the turn is answered exactly once;
 * - nodes are SIGKILLed at random (at least 10 kills, each restarted at once) while messages
 *   flow: none lost, none answered twice, order kept per conversation. As on one node, a kill of
 *   the channel's holder between Telegram taking a reply and the outbox marking it sent makes
 *   the next holder send it again (README, "The one remaining window"): such a second copy,
 *   right after the first, is counted and shown, and allowed once per kill of the holder;
 * - PostgreSQL itself restarted under load: the nodes reconnect and nothing is lost;
 * - PostgreSQL unreachable at start: a clear error naming the server without its password.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { lastUserText } from './fixtures/fake-openai.ts';
import type { TelegramPeer, TgUser } from './peers/telegram.ts';
import { runCli, tempConfig } from './support/cli.ts';
import { clusterSuite, startCluster } from './support/cluster.ts';
import { until } from './support/wait.ts';

const NOTE = /note-(\d+)/;
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** People who write privately; the peer knows each chat once they wrote. */
const person = (i: number): TgUser => ({ id: 6000 + i, is_bot: false, first_name: `P${i}`, username: `p${i}` });

function writer(peer: TelegramPeer) {
  const sent = new Map<number, number[]>();
  let n = 0;
  return {
    sent,
    write(who: TgUser, extra = ''): number {
      n++;
      peer.queue({ message: { message_id: n, date: Math.floor(Date.now() / 1000), chat: { id: who.id, type: 'private', first_name: who.first_name }, from: who, text: `note-${n}${extra}` } });
      sent.set(who.id, [...(sent.get(who.id) ?? []), n]);
      return n;
    },
  };
}

/** The notes answered per chat (of `chats`, if given), in the order the bot sent them. */
function answered(peer: TelegramPeer, chats?: ReadonlyMap<number, unknown>): Map<number, number[]> {
  const byChat = new Map<number, number[]>();
  for (const message of peer.sent) {
    if (chats && !chats.has(message.chatId)) continue;
    const n = NOTE.exec(message.text)?.[1];
    if (n !== undefined) byChat.set(message.chatId, [...(byChat.get(message.chatId) ?? []), Number(n)]);
  }
  return byChat;
}

describe('cluster failover', () => {
  const suite = clusterSuite();

  const channels = (): string => `${suite.peer.configSection()}poll_timeout_seconds = 1\nallow = ["*"]\n`;

  it('the node holding Telegram SIGKILLed mid-turn: another takes the channel and the turn over, and it is answered once', async (t) => {
    const url = await suite.pg.createDatabase();
    suite.model.fallback = (request) => {
      const text = lastUserText(request);
      return { text: `got note-${NOTE.exec(text)?.[1] ?? '?'}`, delayMs: text.includes('slow') ? 3000 : 50 };
    };
    // n1 alone first, so the slow turn is surely its own; n2 joins while it runs.
    const first = startCluster({ url, modelUrl: suite.model.baseUrl, channels: channels(), names: ['n1'] });
    suite.cluster = first;
    const n1 = first.nodes[0]!;
    await first.joined(n1);
    await until(() => first.holder() === n1, 'n1 to hold Telegram', 20_000);
    const { write, sent } = writer(suite.peer);
    const who = person(1);
    const before = suite.model.requests.length;
    write(who, ' slow');
    await until(() => suite.model.requests.length > before, 'the slow turn to reach the model', 20_000);
    const second = startCluster({ url, modelUrl: suite.model.baseUrl, channels: channels(), names: ['n2'] });
    const n2 = second.nodes[0]!;
    try {
      await second.joined(n2);
      const killedAt = Date.now();
      n1.daemon.child.kill('SIGKILL');
      await n1.daemon.exited;
      write(who); // written while the channel has no holder, and queued behind the slow turn
      try {
        await until(() => (answered(suite.peer, sent).get(who.id)?.length ?? 0) >= 2, 'both notes answered', 90_000);
      } catch (error) {
        throw new Error(`${(error as Error).message}; answered: ${JSON.stringify([...answered(suite.peer, sent)])}\n${first.tail()}\n${second.tail()}`, { cause: error });
      }
      const answeredMs = Date.now() - killedAt;
      const takeover = /"time":(\d+)[^\n]*"msg":"this node now holds the channel"/.exec(n2.daemon.stdout());
      t.diagnostic(`Telegram moved n1 → n2 ${takeover ? Number(takeover[1]) - killedAt : '?'} ms after the kill; the dead node's turn was run again and both notes answered ${answeredMs} ms after it`);
      assert.ok(second.holder() === n2, 'n2 holds Telegram');
      // a turn whose node stopped sending heartbeats (10 s) is failed by the next supervise pass (≤ 3 s) and retried
      assert.ok(answeredMs < 45_000, `answered ${answeredMs} ms after the kill`);
      await sleep(2000);
      assert.deepEqual(answered(suite.peer, sent).get(who.id), sent.get(who.id), 'each answered once, in order');
    } finally {
      await second.close();
      await first.close();
      suite.cluster = undefined;
    }
  });

  it('nodes SIGKILLed at random while messages flow: none lost, none doubled, order kept', async (t) => {
    const url = await suite.pg.createDatabase();
    suite.model.fallback = (request) => ({ text: `got note-${NOTE.exec(lastUserText(request))?.[1] ?? '?'}`, delayMs: 30 + Math.floor(Math.random() * 300) });
    suite.cluster = startCluster({ url, modelUrl: suite.model.baseUrl, channels: channels() });
    const c = suite.cluster;
    await Promise.all(c.nodes.map((node) => c.joined(node)));
    const { write, sent } = writer(suite.peer);
    let writing = true;
    const people = Array.from({ length: 10 }, (_, i) => person(100 + i));
    const writes = (async () => {
      for (let i = 0; i < 150; i++) {
        write(people[i % people.length]!);
        await sleep(120);
      }
      writing = false;
    })();
    const kills: Array<{ at: number; node: string; heldTelegram: boolean }> = [];
    while (writing || kills.length < 10) {
      await sleep(1500 + Math.floor(Math.random() * 1500));
      const victim = c.nodes[Math.floor(Math.random() * c.nodes.length)]!;
      kills.push({ at: Date.now(), node: victim.name, heldTelegram: c.holder() === victim });
      victim.daemon.child.kill('SIGKILL');
      await victim.daemon.exited;
      c.restart(victim);
    }
    await writes;
    const total = [...sent.values()].reduce((sum, list) => sum + list.length, 0);
    const unique = (): number => [...answered(suite.peer, sent).values()].reduce((sum, list) => sum + new Set(list).size, 0);
    try {
      await until(() => unique() >= total, `all ${total} notes answered`, 120_000);
    } catch (error) {
      throw new Error(`${(error as Error).message} (${unique()} were)\n${c.tail()}`, { cause: error });
    }
    await sleep(3000);
    const got = answered(suite.peer);
    const doubles: string[] = [];
    for (const [chat, notes] of sent) {
      const replies = got.get(chat) ?? [];
      const once = replies.filter((note, index) => index === 0 || replies[index - 1] !== note);
      for (const [index, note] of replies.entries()) if (index > 0 && replies[index - 1] === note) doubles.push(`note-${note}`);
      assert.deepEqual(once, notes, `chat ${chat}: every note answered, in order, nothing else`);
    }
    const holderKills = kills.filter((kill) => kill.heldTelegram).length;
    t.diagnostic(`${total} messages, ${kills.length} kills (${holderKills} of the Telegram holder): ${kills.map((k) => `${k.node}${k.heldTelegram ? '*' : ''}`).join(' ')}; second copies next to a holder kill: ${doubles.join(', ') || 'none'}`);
    assert.ok(kills.length >= 10);
    assert.ok(doubles.length <= holderKills, `${doubles.length} second copies, ${holderKills} holder kills`);
    await c.close();
    suite.cluster = undefined;
  });

  // This test was flaky (1–2 of 40 unanswered in about 1 run in 3) until the test server stopped
  // running with synchronous_commit=off: the server then acknowledged commits it lost in the
  // crash, so a message the daemon had stored and confirmed to Telegram vanished with it. Its
  // wait ends at 60 s so a failure prints the nodes' logs.
  it('PostgreSQL restarted under load: the nodes reconnect and nothing is lost', async () => {
    const url = await suite.pg.createDatabase();
    suite.model.fallback = (request) => ({ text: `got note-${NOTE.exec(lastUserText(request))?.[1] ?? '?'}`, delayMs: 50 });
    suite.cluster = startCluster({ url, modelUrl: suite.model.baseUrl, channels: channels(), names: ['n1', 'n2'] });
    const c = suite.cluster;
    await Promise.all(c.nodes.map((node) => c.joined(node)));
    const { write, sent } = writer(suite.peer);
    const people = Array.from({ length: 5 }, (_, i) => person(200 + i));
    for (let i = 0; i < 20; i++) {
      write(people[i % people.length]!);
      await sleep(50);
    }
    suite.pg.restart();
    for (let i = 0; i < 20; i++) {
      write(people[i % people.length]!);
      await sleep(100);
    }
    const total = 40;
    const unique = (): number => [...answered(suite.peer, sent).values()].reduce((sum, list) => sum + new Set(list).size, 0);
    try {
      await until(() => unique() >= total, 'all 40 notes answered', 60_000);
    } catch (error) {
      throw new Error(`${(error as Error).message} (${unique()} were)\n${c.tail()}`, { cause: error });
    }
    const got = answered(suite.peer);
    for (const [chat, notes] of sent) {
      const replies = got.get(chat) ?? [];
      assert.deepEqual(
        replies.filter((note, index) => index === 0 || replies[index - 1] !== note),
        notes,
        `chat ${chat}`,
      );
    }
    for (const node of c.nodes) assert.equal(node.daemon.child.exitCode, null, `${node.name} kept running\n${c.tail()}`);
    await c.close();
    suite.cluster = undefined;
  });

  it('PostgreSQL unreachable at start: a clear error naming the server (not its password), exit non-zero', async () => {
    const config = tempConfig(suite.model.baseUrl, `[store]\nkind = "postgres"\nurl = "postgres://switchboard:hunter2@127.0.0.1:1/switchboard"\n${channels()}`);
    try {
      const result = await runCli(['start', '--config', config.file], { env: { TEST_MODEL_KEY: 'sk-x' }, timeoutMs: 60_000 });
      assert.notEqual(result.code, 0);
      const output = `${result.stdout}${result.stderr}`;
      assert.match(output, /cannot use the PostgreSQL database postgres:\/\/switchboard@127\.0\.0\.1:1\/switchboard/);
      assert.match(output, /correct the host and port in \[store\] url/);
      assert.doesNotMatch(output, /hunter2/);
    } finally {
      config.cleanup();
    }
  });
});
