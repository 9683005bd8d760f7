/**
 * A config reload in a cluster (issue 14): channels run where their lease is held, so a reload
 * that removes a channel on its holder stops it there and releases the lease — another node that
 * has it configured takes it over, with nothing lost or answered twice — and a reload that adds
 * it back makes the node compete again without taking it from the node that holds it.
 */
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { lastUserText } from './fixtures/fake-openai.ts';
import type { TgUser } from './peers/telegram.ts';
import { clusterSuite, startCluster, type ClusterNodeHandle } from './support/cluster.ts';
import { freePort } from './support/net.ts';
import { until } from './support/wait.ts';

const NOTE = /note-(\d+)/;
const person = (i: number): TgUser => ({ id: 7100 + i, is_bot: false, first_name: `R${i}`, username: `r${i}` });
const holdsTelegram = /"channel":"telegram","msg":"this node now holds the channel"/g;
const count = (text: string, pattern: RegExp): number => text.match(pattern)?.length ?? 0;

describe('config reload in a cluster', () => {
  const suite = clusterSuite();

  it('a reload that removes a channel on its holder hands it to another node; adding it back does not take it away', async () => {
    const url = await suite.pg.createDatabase();
    suite.model.fallback = (request) => ({ text: `got note-${NOTE.exec(lastUserText(request))?.[1] ?? '?'}`, delayMs: 50 });
    const telegram = `${suite.peer.configSection()}poll_timeout_seconds = 1\nallow = ["*"]\n`;
    const ports = new Map([['n1', await freePort()], ['n2', await freePort()]]);
    // each node also has a webhook (so it keeps a channel when Telegram is taken out of its config)
    const own = (name: string): string => `[gateway]\nlisten = "127.0.0.1:${ports.get(name)}"\n[channels.webhook]\nsecret = "${'s'.repeat(32)}"\n`;
    suite.cluster = startCluster({ url, modelUrl: suite.model.baseUrl, names: ['n1', 'n2'], channels: (name) => `${own(name)}${telegram}` });
    const c = suite.cluster;
    const fail = (error: unknown): never => {
      throw new Error(`${(error as Error).message}\n${c.tail()}`, { cause: error });
    };
    await Promise.all(c.nodes.map((node) => c.joined(node))).catch(fail);
    const holder = (): ClusterNodeHandle | undefined => c.nodes.find((node) => count(node.daemon.stdout(), holdsTelegram) > 0 && node.daemon.child.exitCode === null);
    await until(() => holder() !== undefined, 'a node to hold Telegram', 20_000).catch(fail);
    const first = holder()!;
    const other = c.nodes.find((node) => node !== first)!;

    const sent: number[] = [];
    let n = 0;
    const people = [person(1), person(2), person(3)];
    const write = (count: number): void => {
      for (let i = 0; i < count; i++) {
        n++;
        const who = people[n % people.length]!;
        suite.peer.queue({ message: { message_id: n, date: Math.floor(Date.now() / 1000), chat: { id: who.id, type: 'private', first_name: who.first_name }, from: who, text: `note-${n}` } });
        sent.push(n);
      }
    };
    const answered = (): number[] => suite.peer.sent.map((m) => Number(NOTE.exec(m.text)?.[1])).filter((x) => x > 0);
    const allAnswered = (what: string): Promise<void> => until(() => sent.every((x) => answered().includes(x)), what, 30_000).catch(fail);
    const reload = async (node: ClusterNodeHandle, text: string): Promise<void> => {
      const before = count(node.daemon.stdout(), /"msg":"config reloaded"/g);
      writeFileSync(c.configFile(node), text);
      node.daemon.child.kill('SIGHUP');
      await until(() => count(node.daemon.stdout(), /"msg":"config reloaded"/g) > before, `${node.name} to reload`, 20_000).catch(fail);
    };

    write(10);
    await allAnswered('the first 10 answered');

    // Telegram taken out of the holder's config: it stops there, the other node takes it over.
    const original = readFileSync(c.configFile(first), 'utf8');
    assert.ok(original.includes(telegram));
    await reload(first, original.replace(telegram, ''));
    await until(() => count(other.daemon.stdout(), holdsTelegram) > 0, `${other.name} to take Telegram over`, 20_000).catch(fail);
    assert.match(first.daemon.stdout(), /"channel":"telegram","msg":"released the channel lease"/);
    write(10);
    await allAnswered('the next 10 answered by the new holder');

    // Added back: the first node competes again but the holder keeps it.
    await reload(first, original);
    await new Promise((resolve) => setTimeout(resolve, 2000));
    assert.equal(count(first.daemon.stdout(), holdsTelegram), 1, `${first.name} did not take Telegram back while ${other.name} holds it`);
    // ...and takes it when the holder dies.
    other.daemon.child.kill('SIGKILL');
    await until(() => count(first.daemon.stdout(), holdsTelegram) === 2, `${first.name} to take Telegram back`, 30_000).catch(fail);
    write(5);
    await allAnswered('the last 5 answered');

    const got = answered();
    assert.deepEqual(
      [...got].sort((a, b) => a - b),
      sent,
      'every note answered exactly once',
    );
    for (const who of people) {
      const mine = suite.peer.sent.filter((m) => m.chatId === who.id).map((m) => Number(NOTE.exec(m.text)?.[1]));
      assert.deepEqual(mine, [...mine].sort((a, b) => a - b), `order kept for ${who.first_name}`);
    }
    await c.close();
    suite.cluster = undefined;
  });
});
