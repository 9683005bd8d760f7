/**
 * The channel contract: every Channel adapter, wired to a peer that plays its platform,
 * must normalise inbound messages, deliver replies to the right conversation, report ready,
 * and stop when its signal aborts.
 */
import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';
import type { Channel, InboundMessage, ListenLink } from '../../src/channel.ts';
import { refOf } from '../../src/conversation.ts';

export interface ChannelHarness {
  readonly channel: Channel;
  /** Makes the platform deliver a message from a person to the bot. */
  say(text: string): Promise<void>;
  /** Texts the platform has received from the bot, in order. */
  received(): Promise<string[]>;
  close(): Promise<void>;
}

export function runChannelContract(name: string, make: () => Promise<ChannelHarness>): void {
  describe(`channel contract: ${name}`, () => {
    let harness: ChannelHarness;
    let abort: AbortController;
    let pushed: InboundMessage[];
    let readies: number;
    let listening: Promise<void>;

    const link: ListenLink = { ready: () => void readies++, alive: () => undefined, deaf: () => undefined };

    beforeEach(async () => {
      harness = await make();
      abort = new AbortController();
      pushed = [];
      readies = 0;
      listening = harness.channel.listen(
        async (message) => {
          pushed.push(message);
          return 'accepted';
        },
        abort.signal,
        link,
      );
      await until(() => readies > 0);
    });

    afterEach(async () => {
      abort.abort();
      await listening;
      await harness.close();
    });

    it('reports ready once and pushes normalised messages', async () => {
      await harness.say('hello there');
      await harness.say('second message');
      await until(() => pushed.length === 2);
      assert.equal(readies, 1);
      for (const message of pushed) {
        assert.equal(message.channel, harness.channel.name);
        assert.ok(message.account !== '' && message.chat !== '' && message.id !== '' && message.sender.id !== '');
        assert.equal(typeof message.timestamp, 'number');
      }
      assert.deepEqual(
        pushed.map((m) => m.text),
        ['hello there', 'second message'],
      );
      assert.notEqual(pushed[0]!.id, pushed[1]!.id, 'every message has its own platform id');
      assert.equal(pushed[0]!.chat, pushed[1]!.chat, 'one person in one place is one conversation');
    });

    it('delivers a reply, multi-line text intact, to the conversation a message came from', async () => {
      await harness.say('question');
      await until(() => pushed.length === 1);
      await harness.channel.send({ ...refOf(pushed[0]!), text: 'line one\nline two', replyTo: pushed[0]!.id });
      await harness.channel.send({ ...refOf(pushed[0]!), text: 'another reply' });
      const texts = await harness.received();
      assert.deepEqual(texts, ['line one\nline two', 'another reply']);
    });

    it('returns from listen promptly once its signal aborts', async () => {
      const started = Date.now();
      abort.abort();
      await listening;
      assert.ok(Date.now() - started < 2000);
    });
  });
}

async function until(condition: () => boolean, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}
