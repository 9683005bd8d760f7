import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { stripVTControlCharacters } from 'node:util';
import { describe, it } from 'node:test';
import type { InboundMessage, ListenLink } from '../../src/channel.ts';
import { runChannelContract } from '../../test/contracts/channel.ts';
import { createTerminalChannel, multiLineHelp, unansweredNotice } from './index.ts';

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

  it('holds a line the disk-full inbox refused and offers it again until it is taken, saying so once', async () => {
    const { input, output, written } = streams();
    const channel = createTerminalChannel({ input, output, user: 'ada', assistantName: 'Bot', interactive: false });
    const tries: string[] = [];
    const abort = new AbortController();
    const listening = channel.listen(
      async (message) => {
        tries.push(message.id);
        if (tries.length <= 2) throw Object.assign(new Error('the disk is full'), { code: 'SQLITE_FULL' });
        return 'accepted';
      },
      abort.signal,
      link([]),
    );
    input.write('keep me\n');
    const deadline = Date.now() + 10_000;
    while (tries.length < 3 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
    assert.equal(tries.length, 3, 'offered again until taken');
    assert.equal(new Set(tries).size, 1, 'the same message (one id), so the inbox takes it once');
    assert.equal(written().match(/disk is full/g)?.length, 1, written());
    abort.abort();
    input.end();
    await listening;
  });

  it('skips blank lines, trims, and calls onEnd once when the input ends — then keeps running until stopped', async () => {
    const { input, output } = streams();
    let ended = 0;
    const channel = createTerminalChannel({ input, output, user: 'ada', assistantName: 'Bot', interactive: false, onEnd: () => void ended++ });
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

  it('at a prompt: shows the banner and what the last session left unanswered, once, above the first prompt', async () => {
    const { input, output, written } = streams();
    const channel = createTerminalChannel({ input, output, user: 'ada', assistantName: 'Bot', interactive: true, banner: 'Talking to Bot · /help' });
    const message = (id: string, text: string, chat = 'ada'): InboundMessage => ({ channel: 'terminal', account: 'local', chat, id, sender: { id: chat }, text, timestamp: 0 });
    channel.skipInterrupted([message('a', 'long one'), message('b', 'someone else', 'bob'), message('c', 'long   two\nlines')]);
    const abort = new AbortController();
    const events: string[] = [];
    const listening = channel.listen(async () => 'accepted', abort.signal, link(events));
    await new Promise((resolve) => setTimeout(resolve, 30));
    assert.ok(written().startsWith('\x1b[?2004h'), 'bracketed paste mode is turned on');
    assert.match(
      stripVTControlCharacters(written()),
      /^Talking to Bot · \/help\nEarlier, you asked “long one”, “long two lines”; the chat stopped before answering them\. Ask again if you still want answers\.\n\n\S*› /,
    );
    await channel.send({ channel: 'terminal', account: 'local', chat: 'ada', text: 'late', replyTo: 'x' });
    assert.match(written(), /\nBot \(a reply your last chat did not show\): late\n/);
    abort.abort();
    await listening;
    assert.deepEqual(events, ['ready']);
  });

  it('at a prompt: Ctrl-C asks onInterrupt and shows its answer, without ending the input', async () => {
    const { input, output, written } = streams();
    let interrupts = 0;
    let ended = 0;
    const channel = createTerminalChannel({
      input,
      output,
      user: 'ada',
      assistantName: 'Bot',
      interactive: true,
      onInterrupt: () => (++interrupts === 1 ? 'stopping: finishing the reply in progress — Ctrl-C again to quit now' : undefined),
      onEnd: () => void ended++,
    });
    const pushed: string[] = [];
    const abort = new AbortController();
    const listening = channel.listen(
      async (message) => {
        pushed.push(message.text);
        return 'accepted';
      },
      abort.signal,
      link([]),
    );
    input.write('hi\r');
    input.write('\x03');
    await new Promise((resolve) => setTimeout(resolve, 30));
    assert.deepEqual(pushed, ['hi']);
    assert.equal(interrupts, 1);
    assert.match(written(), /\nstopping: finishing the reply in progress — Ctrl-C again to quit now\n$/);
    input.write('\x03');
    await new Promise((resolve) => setTimeout(resolve, 30));
    assert.equal(interrupts, 2);
    assert.equal(ended, 0, 'Ctrl-C is not the end of the input');
    abort.abort();
    await listening;
  });

  it('at a prompt: a bracketed paste of several lines is one message, sent with the Enter after it; a trailing \\ goes on; /help says how', async () => {
    const { input, output, written } = streams();
    const channel = createTerminalChannel({ input, output, user: 'ada', assistantName: 'Bot', interactive: true });
    const pushed: InboundMessage[] = [];
    const abort = new AbortController();
    const listening = channel.listen(
      async (message) => {
        pushed.push(message);
        return 'accepted';
      },
      abort.signal,
      link([]),
    );
    await new Promise((resolve) => setTimeout(resolve, 10));
    assert.ok(written().startsWith('\x1b[?2004h'), 'bracketed paste mode is turned on');
    // What a terminal sends for a paste of three lines (line breaks as CR), then Enter.
    input.write('\x1b[200~\r  def f():\r    return 1\r\rprint(f())\x1b[201~');
    await new Promise((resolve) => setTimeout(resolve, 20));
    assert.equal(pushed.length, 0, 'nothing is sent before Enter');
    assert.match(stripVTControlCharacters(written()), /… print\(f\(\)\)$/, 'the last pasted line waits at a continuation prompt');
    input.write('\r');
    await new Promise((resolve) => setTimeout(resolve, 20));
    assert.deepEqual(pushed.map((m) => m.text), ['  def f():\n    return 1\n\nprint(f())'], 'one message, indentation kept, the blank line before dropped');
    input.write('first line \\\r');
    await new Promise((resolve) => setTimeout(resolve, 20));
    input.write('second line\r');
    await new Promise((resolve) => setTimeout(resolve, 20));
    assert.deepEqual(pushed.map((m) => m.text).slice(1), ['first line \nsecond line']);
    assert.match(stripVTControlCharacters(written()), /first line \\\r?\n… second line/, 'a continuation prompt');
    input.write('/help\r');
    await new Promise((resolve) => setTimeout(resolve, 20));
    const help = pushed.at(-1)!;
    await channel.send({ channel: 'terminal', account: 'local', chat: 'ada', text: 'Commands: …', replyTo: help.id });
    assert.ok(written().includes(`Bot: Commands: …\n${multiLineHelp}\n`));
    await channel.send({ channel: 'terminal', account: 'local', chat: 'ada', text: 'other', replyTo: pushed[0]!.id });
    assert.ok(written().includes('Bot: other\n\n'), 'only /help gets the line');
    abort.abort();
    await listening;
    assert.ok(written().endsWith('\x1b[?2004l'), 'and off again');
  });

  it('words the unanswered notice for one question, and clips long lists', () => {
    assert.equal(unansweredNotice(['why?']), 'Earlier, you asked “why?”; the chat stopped before answering it. Ask again if you still want an answer.');
    const notice = unansweredNotice(['a', 'b', 'x'.repeat(100), 'd', 'e']);
    assert.match(notice, /^Earlier, you asked “a”, “b”, “x{59}…” and 2 more; /);
  });

  it('names the assistant in interactive mode', async () => {
    const { input, output, written } = streams();
    const channel = createTerminalChannel({ input, output, user: 'ada', assistantName: 'Bot', interactive: true });
    await channel.send({ channel: 'terminal', account: 'local', chat: 'ada', text: 'Hello!' });
    assert.match(written(), /Bot: Hello!/);
    input.end();
  });
});
