/** The Telegram channel on its own against the local Bot API peer: sending, errors, edits, files, inbound, webhook. */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, beforeEach, describe, it } from 'node:test';
import { SendError, type InboundMessage, type PushResult } from '../../src/channel.ts';
import { createAttachmentStore } from '../../src/inbound/attachments.ts';
import type { Place } from '../../test/contracts/chat-channel.ts';
import { startTelegramPeer, type TelegramPeer } from '../../test/peers/telegram.ts';
import { testLogger } from '../../test/support/log.ts';
import { createTelegramChannel, type TelegramChannel } from './index.ts';
import { testChannelState } from '../../test/support/channel-state.ts';

const dm: Place = { kind: 'dm', user: 'alice' };
const group: Place = { kind: 'group' };
const thread: Place = { kind: 'thread' };

async function until(condition: () => boolean, what: string, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

interface Running {
  readonly channel: TelegramChannel;
  readonly pushed: InboundMessage[];
  /** What push does (default: accept). */
  onPush: (message: InboundMessage) => Promise<PushResult>;
  readonly listening: Promise<void>;
  stop(): Promise<void>;
}

function run(peer: TelegramPeer, workspace: string, webhook = false): Running {
  const channel = createTelegramChannel(
    { token: peer.token, api_root: peer.apiRoot, poll_timeout_seconds: 5, mention_only: true, stream: false, ...(webhook ? { webhook: peer.webhook! } : {}) },
    { name: 'telegram', log: testLogger(), assistantName: 'Testbot', attachments: createAttachmentStore({ workspace, maxBytes: 1000 }), state: testChannelState(), stateDir: workspace },
  );
  const abort = new AbortController();
  const running: Running = {
    channel,
    pushed: [],
    onPush: async () => 'accepted',
    listening: undefined as unknown as Promise<void>,
    async stop() {
      abort.abort();
      await running.listening.catch(() => undefined);
    },
  };
  Object.assign(running, {
    listening: channel.listen(
      async (message) => {
        const result = await running.onPush(message);
        running.pushed.push(message);
        return result;
      },
      abort.signal,
      { ready: () => undefined, alive: () => undefined, deaf: () => undefined },
    ),
  });
  return running;
}

describe('telegram channel against the Bot API peer', () => {
  let peer: TelegramPeer;
  let workspace: string;
  let bot: Running;
  const ref = (place: Place): { channel: string; account: string; chat: string; thread?: string } =>
    place.kind === 'dm'
      ? { channel: 'telegram', account: String(peer.bot.id), chat: peer.users[place.user] }
      : { channel: 'telegram', account: String(peer.bot.id), chat: String(peer.groupId), ...(place.kind === 'thread' ? { thread: String(peer.topicId) } : {}) };

  before(async () => {
    peer = await startTelegramPeer();
    workspace = mkdtempSync(join(tmpdir(), 'sb-tg-unit-'));
    bot = run(peer, workspace);
    await until(() => peer.pollsWaiting > 0, 'the first poll');
  });
  after(async () => {
    await bot.stop();
    await peer.close();
    rmSync(workspace, { recursive: true, force: true });
  });
  beforeEach(() => {
    peer.reset();
    bot.pushed.length = 0;
    bot.onPush = async () => 'accepted';
  });

  it('advertises its capabilities: limit measured on visible text, typing, edits, a liveness timeout', () => {
    assert.equal(bot.channel.maxMessageLength, 4096);
    assert.equal(bot.channel.measure!('**bold**'), 4);
    assert.equal(bot.channel.typingIntervalMs, 4000);
    assert.equal(bot.channel.editIntervalMs, 1000);
    assert.ok(bot.channel.livenessTimeoutMs! > 5000, 'poll timeout plus a margin');
  });

  it('sends markdown as Telegram HTML', async () => {
    await bot.channel.send({ ...ref(dm), text: '**Done** & <ok>\n`code`' });
    const [sent] = peer.sent;
    assert.equal(sent!.html, '<b>Done</b> &amp; &lt;ok&gt;\n<code>code</code>');
    assert.equal(sent!.text, 'Done & <ok>\ncode');
  });

  it('resends as plain text when Telegram cannot parse the entities', async () => {
    peer.rejectHtml(1);
    await bot.channel.send({ ...ref(dm), text: '**bold** words' });
    assert.deepEqual(
      peer.calls.filter((c) => c.method === 'sendMessage').map((c) => [c.status, c.params.parse_mode]),
      [
        [400, 'HTML'],
        [200, undefined],
      ],
    );
    assert.deepEqual(peer.botMessages(dm), [{ text: 'bold words', edits: 0 }]);
  });

  it('answers in the forum topic, quoting the message it answers in groups', async () => {
    const message = peer.messageFrom('alice', thread, 'question');
    await bot.channel.send({ ...ref(thread), text: 'answer', replyTo: `${peer.groupId}:${message.message_id}` });
    assert.deepEqual(peer.botMessages(thread), [{ text: 'answer', edits: 0 }]);
    assert.equal(peer.sent[0]!.replyTo, message.message_id);
    assert.deepEqual(peer.botMessages(group), []);
  });

  it('maps failures: 429 → retry after, blocked / chat not found → permanent', async () => {
    peer.rateLimitSends(1, 3);
    await assert.rejects(bot.channel.send({ ...ref(dm), text: 'x' }), (error: unknown) => error instanceof SendError && error.retryAfterMs === 3000 && !error.permanent);
    peer.block('bob');
    await assert.rejects(bot.channel.send({ ...ref({ kind: 'dm', user: 'bob' }), text: 'x' }), (error: unknown) => error instanceof SendError && error.permanent);
    await assert.rejects(bot.channel.send({ ...ref(dm), chat: '424242', text: 'x' }), (error: unknown) => error instanceof SendError && error.permanent && /chat not found/.test(error.message));
  });

  it('streams: a draft, edits, an unchanged edit is fine, an edit of a vanished message is permanent', async () => {
    const id = await bot.channel.sendDraft({ ...ref(dm), text: 'Wor' });
    await bot.channel.edit(ref(dm), id, 'Working **on it**');
    await bot.channel.edit(ref(dm), id, 'Working **on it**');
    assert.deepEqual(peer.botMessages(dm), [{ text: 'Working on it', edits: 1 }]);
    await assert.rejects(bot.channel.edit(ref(dm), '999', 'x'), (error: unknown) => error instanceof SendError && error.permanent);
  });

  it('shows typing in the right place and sends files from disk', async () => {
    await bot.channel.typing(ref(thread));
    assert.equal(peer.typing(thread), 1);
    const file = join(workspace, 'result.csv');
    writeFileSync(file, 'a,b\n1,2\n');
    await bot.channel.sendFile(ref(dm), { path: file, name: 'result.csv' });
    assert.deepEqual(peer.botFiles(dm), ['result.csv']);
    await assert.rejects(bot.channel.sendFile(ref(dm), { path: join(workspace, 'missing'), name: 'missing' }), (error: unknown) => error instanceof SendError && error.permanent);
  });

  it('pushes group messages with addressed set, topics as threads, and confirms them', async () => {
    await peer.post('bob', group, 'chatter');
    await peer.post('alice', group, 'hi there', { mention: true });
    await peer.post('alice', thread, '/status@switchboard_test_bot');
    await until(() => bot.pushed.length === 3, 'three messages');
    const [chatter, mention, command] = bot.pushed;
    assert.equal(chatter!.addressed, false);
    assert.equal(mention!.addressed, true);
    assert.equal(mention!.text, 'hi there');
    assert.equal(command!.text, '/status');
    assert.equal(command!.thread, String(peer.topicId));
    assert.equal(command!.account, String(peer.bot.id));
    await until(() => peer.pending === 0, 'confirmation');
  });

  it('ignores the bot\'s own and other bots\' messages and edits', async () => {
    const own = peer.messageFrom('alice', group, 'mine');
    own.from = { ...peer.bot };
    peer.queue({ message: own });
    const other = peer.messageFrom('alice', group, 'beep');
    other.from = { id: 99, is_bot: true, first_name: 'Other', username: 'other_bot' };
    peer.queue({ message: other });
    peer.queue({ edited_message: peer.messageFrom('alice', dm, 'edited') });
    await peer.post('alice', dm, 'real');
    await until(() => bot.pushed.length === 1 && peer.pending === 0, 'the real message');
    assert.equal(bot.pushed[0]!.text, 'real');
  });

  it('saves files: the document downloaded, a photo at its largest, one over the limit described', async () => {
    await peer.postFile('alice', dm, { name: 'notes.txt', mime: 'text/plain', data: new TextEncoder().encode('hello file') }, 'my notes');
    await peer.postFile('alice', dm, { name: 'pic.jpg', mime: 'image/jpeg', data: new Uint8Array(500).fill(7) }, undefined, 'photo');
    await peer.postFile('alice', dm, { name: 'big.bin', mime: 'application/octet-stream', data: new Uint8Array(5000) });
    await until(() => bot.pushed.length === 3, 'three file messages');
    const [doc, photo, big] = bot.pushed;
    assert.equal(doc!.text, 'my notes');
    assert.equal(readFileSync(join(workspace, doc!.attachments![0]!.path!), 'utf8'), 'hello file');
    assert.equal(photo!.text, '');
    assert.equal(photo!.attachments![0]!.kind, 'photo');
    assert.equal(photo!.attachments![0]!.size, 500, 'the largest size, not the thumbnail');
    assert.equal(big!.attachments![0]!.path, undefined);
    assert.match(big!.attachments![0]!.note!, /not downloaded/);
  });

  it('does not confirm an update whose push failed; the next listen gets it again with the same id', async () => {
    bot.onPush = async () => {
      throw new Error('shutting down');
    };
    await peer.post('alice', dm, 'keep me');
    await assert.rejects(bot.listening, /shutting down/);
    assert.equal(peer.pending, 1, 'not confirmed');
    bot = run(peer, workspace);
    await until(() => bot.pushed.length === 1 && peer.pending === 0, 'the redelivered message');
    assert.equal(bot.pushed[0]!.text, 'keep me');
    assert.equal(peer.deliveries(peer.lastUpdateId), 2);
  });
});

describe('telegram channel in webhook mode', () => {
  let peer: TelegramPeer;
  let workspace: string;
  let bot: Running;

  before(async () => {
    peer = await startTelegramPeer({ webhook: true });
    workspace = mkdtempSync(join(tmpdir(), 'sb-tg-hook-'));
    bot = run(peer, workspace, true);
    await until(() => peer.calls.some((c) => c.method === 'setWebhook'), 'setWebhook');
  });
  after(async () => {
    await bot.stop();
    await peer.close();
    rmSync(workspace, { recursive: true, force: true });
  });

  it('has no liveness watchdog (nothing polls)', () => {
    assert.equal(bot.channel.livenessTimeoutMs, undefined);
  });

  it('registers the URL with the secret; pushes a verified update and answers 200', async () => {
    const set = peer.calls.find((c) => c.method === 'setWebhook')!;
    assert.deepEqual([set.params.url, set.params.secret_token], [peer.webhook!.url, peer.webhook!.secret]);
    await peer.post('alice', dm, 'hooked');
    await until(() => bot.pushed.length === 1 && peer.pending === 0, 'the pushed update');
    assert.equal(bot.pushed[0]!.text, 'hooked');
    assert.deepEqual(peer.webhookAnswers, [200]);
  });

  it('answers 400 to a body that is not a JSON object (a JSON null threw an unhandled TypeError in the log line)', async () => {
    for (const body of ['null', '"update"', '42', '[]']) {
      const url = `http://${peer.webhook!.listen}${new URL(peer.webhook!.url).pathname}`;
      const response = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', 'x-telegram-bot-api-secret-token': peer.webhook!.secret }, body });
      assert.equal(response.status, 400, body);
    }
  });

  it('answers 401 to a wrong secret and 500 when the push fails (so Telegram retries)', async () => {
    const before = bot.pushed.length;
    assert.equal(await peer.webhookRequest({ message: peer.messageFrom('mallory', dm, 'forged') }, 'nope'), 401);
    bot.onPush = async () => {
      throw new Error('shutting down');
    };
    assert.equal(await peer.webhookRequest({ message: peer.messageFrom('alice', dm, 'later') }, peer.webhook!.secret), 500);
    assert.equal(bot.pushed.length, before);
  });
});

describe('getUpdates answered early (no long polling)', () => {
  it('counts an empty answer well before the timeout as early, a held one or timeout 0 not', async () => {
    const { answeredEarly, earlyPauseMs } = await import('./poll.ts');
    assert.equal(answeredEarly(30, 5), true);
    assert.equal(answeredEarly(30, 14_000), true);
    assert.equal(answeredEarly(30, 29_000), false);
    assert.equal(answeredEarly(0, 5), false, 'timeout 0 asks for an immediate answer');
    assert.deepEqual([1, 2, 3, 4, 5, 6, 10].map(earlyPauseMs), [50, 100, 200, 400, 800, 1000, 1000]);
  });

  it('logs the server without a proxy password, query or fragment', async () => {
    const { loggableServer } = await import('./poll.ts');
    assert.equal(loggableServer('https://user:secret@proxy.example:8443/tg?key=1#x'), 'https://proxy.example:8443/tg');
    assert.equal(loggableServer('https://api.telegram.org'), 'https://api.telegram.org');
  });
});
