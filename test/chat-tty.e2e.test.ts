/**
 * `switchboard chat` at a real terminal (a tmux pane): the banner and prompt, chat commands,
 * Ctrl-C during a reply (says what it does; twice quits at once), Ctrl-D, a chat cut off
 * mid-turn, and an unreachable model — what a person at the keyboard sees.
 */
import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, it } from 'node:test';
import { startFakeOpenAI, type FakeOpenAI, type RecordedRequest } from './fixtures/fake-openai.ts';
import { cliPath, tempConfig } from './support/cli.ts';
import { freePort } from './support/net.ts';
import { startTty, type Tty } from './support/tty.ts';

const lastUser = (request: RecordedRequest): string => [...request.body.messages].reverse().find((m) => m.role === 'user')?.content ?? '';

describe('switchboard chat at a terminal', () => {
  let model: FakeOpenAI;
  let config: ReturnType<typeof tempConfig>;
  const ttys: Tty[] = [];
  const env = { TEST_MODEL_KEY: 'sk-tty', SWITCHBOARD_CONFIG: undefined, SWITCHBOARD_LOG_LEVEL: undefined };
  const open = async (args: string[], file = config.file): Promise<Tty> => {
    const tty = await startTty([process.execPath, cliPath, ...args, '--config', file], { cwd: config.dir, env });
    ttys.push(tty);
    return tty;
  };

  before(async () => {
    model = await startFakeOpenAI();
    // "long …" takes 1.5 s (within the shutdown grace), "slow …" 30 s; the rest answers at once.
    model.fallback = (request) => {
      const text = lastUser(request);
      return { text: `echo: ${text}`, delayMs: text.startsWith('long') ? 1500 : text.startsWith('slow') ? 30_000 : 0 };
    };
  });
  after(() => model.close());
  beforeEach(() => {
    config = tempConfig(model.baseUrl);
    model.requests.length = 0;
  });
  const cleanup = async (): Promise<void> => {
    for (const tty of ttys.splice(0)) await tty.close();
    config.cleanup();
  };

  it('shows who you talk to, how to quit and /help above the prompt; answers /help itself; Ctrl-C at an idle prompt quits at once', async () => {
    try {
      const tty = await open(['chat']);
      await tty.waitFor(/^Talking to Testbot \(test-model\) · \/help lists the commands · Ctrl-D or Ctrl-C quits\n\n› ?$/m);
      await tty.type('/help');
      await tty.waitFor(/Testbot: Commands:\n\/new — /);
      await tty.type('/model');
      await tty.waitFor(/Testbot: Model: test-model\./);
      assert.equal(model.requests.length, 0, 'commands never reach the model');
      await tty.keys('C-c');
      assert.equal(await tty.exited(5000), 0);
      assert.doesNotMatch(await tty.screen(), /stopping/);
    } finally {
      await cleanup();
    }
  });

  it('a pasted block of lines is one message (bracketed paste), a line ending in \\ goes on, and /help says so', async () => {
    try {
      const tty = await open(['chat']);
      await tty.waitFor(/› ?$/m);
      await tty.paste('first line\nsecond line\nthird line');
      await tty.waitFor(/^… third line$/m);
      assert.equal(model.requests.length, 0, 'nothing is sent before Enter');
      await tty.keys('Enter');
      await tty.waitFor(/Testbot: echo: first line\nsecond line\nthird line\n/);
      assert.equal(model.requests.length, 1, 'one message');
      assert.equal(lastUser(model.requests[0]!), 'first line\nsecond line\nthird line');
      await tty.type('typed one \\');
      await tty.waitFor(/^… ?$/m);
      await tty.type('typed two');
      await tty.waitFor(/Testbot: echo: typed one \ntyped two\n/);
      assert.equal(model.requests.length, 2);
      await tty.type('/help');
      await tty.waitFor(/\/help — this list\nAt this terminal: end a line with \\ to go on on the next one; a pasted block of lines is one message \(Enter sends it\)\./);
    } finally {
      await cleanup();
    }
  });

  it('Ctrl-C during a reply says what it is doing, lets the reply finish, and exits 0', async () => {
    try {
      const tty = await open(['chat']);
      await tty.waitFor(/› ?$/m);
      await tty.type('long question');
      await model.waitForRequests(1);
      await tty.keys('C-c');
      await tty.waitFor(/^stopping: finishing the reply in progress — Ctrl-C again to quit now$/m, 1000);
      assert.equal(await tty.exited(10_000), 0);
      assert.match(await tty.screen(), /stopping: finishing the reply in progress[^\n]*\n\nTestbot: echo: long question\n/);
    } finally {
      await cleanup();
    }
  });

  it('Ctrl-D during a reply says it waits, and Ctrl-C then stops', async () => {
    try {
      const tty = await open(['chat']);
      await tty.waitFor(/› ?$/m);
      await tty.type('slow question');
      await model.waitForRequests(1);
      await tty.keys('C-d');
      await tty.waitFor(/^waiting for the reply still to come — Ctrl-C to stop now$/m, 2000);
      await tty.keys('C-c');
      await tty.waitFor(/^stopping: finishing the reply in progress — Ctrl-C again to quit now$/m, 2000);
      const started = Date.now();
      await tty.keys('C-c');
      assert.equal(await tty.exited(3000), 130);
      assert.ok(Date.now() - started < 3000);
    } finally {
      await cleanup();
    }
  });

  it('a second Ctrl-C quits at once (130); the next chat says what went unanswered and answers the new question at once', async () => {
    try {
      const first = await open(['chat']);
      await first.waitFor(/› ?$/m);
      await first.type('slow question');
      await model.waitForRequests(1);
      await first.type('and a follow-up');
      await first.keys('C-c');
      await first.waitFor(/stopping: finishing the reply in progress/, 2000);
      const started = Date.now();
      await first.keys('C-c');
      assert.equal(await first.exited(3000), 130, 'the second Ctrl-C does not wait for the 30 s reply');
      assert.ok(Date.now() - started < 3000, `exited after ${Date.now() - started} ms`);

      const asked = model.requests.length;
      const second = await open(['chat']);
      await second.waitFor(/· Ctrl-D or Ctrl-C quits\nEarlier, you asked “slow question”, “and a follow-up”; the chat stopped before answering them\. Ask again if you still want answers\.\n\n› ?$/m);
      await second.type('hi');
      const shown = await second.waitFor(/Testbot: echo: hi\n/, 5000);
      assert.doesNotMatch(shown, /echo: slow question|echo: and a follow-up/, 'no late answers');
      assert.equal(model.requests.length, asked + 1, 'only the new question went to the model');
      assert.deepEqual(
        model.requests.at(-1)!.body.messages.filter((m) => m.role !== 'system').map((m) => m.content),
        ['hi'],
        'the unanswered questions are not in the history either',
      );
      await second.keys('C-d');
      assert.equal(await second.exited(5000), 0);
    } finally {
      await cleanup();
    }
  });

  it('an unreachable model: one log line with the cause once, then the apology; exit 75', async () => {
    const unreachable = tempConfig(`http://127.0.0.1:${await freePort()}/v1`);
    try {
      const tty = await open(['chat'], unreachable.file);
      await tty.waitFor(/› ?$/m);
      await tty.type('hello');
      const shown = await tty.waitFor(/Testbot: Sorry — I could not reach the model to answer that\. Please try again in a moment\./, 15_000);
      const between = shown.slice(shown.indexOf('› hello') + '› hello'.length, shown.indexOf('Testbot: Sorry')).split('\n').filter((line) => line.trim() !== '');
      assert.equal(between.length, 1, `one line between the question and the apology:\n${shown}`);
      assert.match(between[0]!, /ERROR: turn failed; telling the user .*"error":"model endpoint http:\/\/127\.0\.0\.1:\d+\/v1\/chat\/completions unreachable: [^"]*ECONNREFUSED[^"]* \(openai\/test-model, 3 attempts\)"/);
      assert.equal(between[0]!.split('ECONNREFUSED').length, 2, 'the cause once');
      await tty.keys('C-d');
      assert.equal(await tty.exited(5000), 75);
    } finally {
      unreachable.cleanup();
      await cleanup();
    }
  });

  it('start with [channels.terminal] in the foreground: the first Ctrl-C stops it, as documented', async () => {
    try {
      const tty = await open(['start']);
      // Its logs (info) go to stderr, beside the conversation.
      await tty.waitFor(/INFO: ready/);
      await tty.type('long question');
      await model.waitForRequests(1);
      await tty.keys('C-c');
      await tty.waitFor(/^stopping: finishing the reply in progress — Ctrl-C again to quit now$/m, 1000);
      assert.equal(await tty.exited(10_000), 0);
      assert.match(await tty.screen(), /Testbot: echo: long question/);
    } finally {
      await cleanup();
    }
  });
});
