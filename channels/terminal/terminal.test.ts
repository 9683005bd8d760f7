import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { describe, it } from 'node:test';
import type { InboundMessage, ListenLink } from '../../src/channel.ts';
import { runChannelContract } from '../../test/contracts/channel.ts';
import { createTerminalChannel } from './index.ts';

function streams() {
  const input = new PassThrough();
  const output = new PassThrough();
  const chunks: string[] = [];
  output.on('data', (chunk: Buffer) => chunks.push(chunk.toString('utf8')));
  return { input, output, written: () => chunks.join(''), chunks };
}

runChannelContract('terminal', async () => {
  const { input, output, chunks } = streams();
  const channel = createTerminalChannel({ input, output, user: 'ada', assistantName: 'Bot', interactive: false });
  return {
    channel,
    say: async (text) => void input.write(`${text}\n`),
    // Piped mode prints each reply as one write of the text and a newline.
    received: async () => chunks.map((chunk) => chunk.replace(/\n$/, '')),
    close: async () => {
      input.end();
    },
  };
});

describe('terminal channel', () => {
  const link = (events: string[]): ListenLink => ({ ready: () => events.push('ready'), alive: () => undefined, deaf: () => undefined });

  it('skips blank lines, trims, and calls onEnd once when the input ends — then keeps running until stopped', async () => {
    const { input, output } = streams();
    let ended = 0;
    const channel = createTerminalChannel({ input, output, user: 'ada', assistantName: 'Bot', interactive: false, onEnd: () => ended++ });
    const pushed: InboundMessage[] = [];
    const abort = new AbortController();
    const events: string[] = [];
    let returned = false;
    const listening = channel
      .listen(
        async (message) => {
          pushed.push(message);
          return 'accepted';
        },
        abort.signal,
        link(events),
      )
      .then(() => (returned = true));
    input.end('  hi  \n\n   \nsecond\n');
    await new Promise((resolve) => setTimeout(resolve, 50));
    assert.deepEqual(
      pushed.map((m) => m.text),
      ['hi', 'second'],
    );
    assert.deepEqual([pushed[0]!.channel, pushed[0]!.account, pushed[0]!.chat, pushed[0]!.sender.id], ['terminal', 'local', 'ada', 'ada']);
    assert.equal(ended, 1);
    assert.equal(returned, false, 'an ended input is not a dropped connection');
    abort.abort();
    await listening;
    assert.deepEqual(events, ['ready']);
  });

  it('waits for each push before reading the next line (backpressure reaches the reader)', async () => {
    const { input, output } = streams();
    const channel = createTerminalChannel({ input, output, user: 'ada', assistantName: 'Bot', interactive: false });
    const abort = new AbortController();
    let inside = 0;
    let maxInside = 0;
    const listening = channel.listen(
      async () => {
        maxInside = Math.max(maxInside, ++inside);
        await new Promise((resolve) => setTimeout(resolve, 5));
        inside--;
        return 'accepted';
      },
      abort.signal,
      link([]),
    );
    input.write('a\nb\nc\nd\n');
    await new Promise((resolve) => setTimeout(resolve, 80));
    abort.abort();
    await listening;
    assert.equal(maxInside, 1);
  });

  it('names the assistant in interactive mode', async () => {
    const { input, output, written } = streams();
    const channel = createTerminalChannel({ input, output, user: 'ada', assistantName: 'Bot', interactive: true });
    await channel.send({ channel: 'terminal', account: 'local', chat: 'ada', text: 'Hello!' });
    assert.match(written(), /Bot: Hello!/);
    input.end();
  });
});
