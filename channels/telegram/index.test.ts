/** The Telegram channel on its own against the local Bot API peer: sending, errors, edits, files, inbound, webhook. */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, beforeEach, describe, it } from 'node:test';
import { SendError, type InboundMessage, type PushResult } from '../../src/channel.ts';
import { createAttachmentStore } from '../../src/inbound/attachments.ts';
import type { Place } from '../../test/contracts/chat-channel.ts';
import sharp from 'sharp';
import { photoSizes, startTelegramPeer, type TelegramPeer } from '../../test/peers/telegram.ts';
import { alphaPng } from '../../test/support/photos.ts';
import { testLogger } from '../../test/support/log.ts';
import { createTelegramChannel, type TelegramChannel } from './index.ts';
import { testChannelState } from '../../test/support/channel-state.ts';
import type { ChannelState } from '../../src/store/channel-state.ts';
import { splitMessage } from '../../src/outbound/split.ts';
import { pino, type Logger } from 'pino';

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

interface RunOptions {
  readonly webhook?: boolean;
  readonly log?: Logger;
  readonly state?: ChannelState;
  /** The attachment store's limit. @default 1000 */
  readonly maxBytes?: number;
  readonly mentionOnly?: boolean;
}

function run(peer: TelegramPeer, workspace: string, options: RunOptions = {}): Running {
  const channel = createTelegramChannel(
    { token: peer.token, api_root: peer.apiRoot, poll_timeout_seconds: 5, mention_only: options.mentionOnly ?? true, stream: false, ...(options.webhook ? { webhook: peer.webhook! } : {}) },
    {
      name: 'telegram',
      log: options.log ?? testLogger(),
      assistantName: 'Testbot',
      attachments: createAttachmentStore({ workspace, maxBytes: options.maxBytes ?? 1000 }),
      state: options.state ?? testChannelState(),
      stateDir: workspace,
    },
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
    // Here calls follow each other within milliseconds, and what is tested is what they do, not
    // their pace: a burst allowance of 100 calls. Flood control has its own suite (below). The
    // group tests need the group's chatter: privacy mode off (it has its own suite too).
    peer = await startTelegramPeer({ canReadAllGroupMessages: true, flood: { burst: 100, groupPerMinute: 100 } });
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
    peer.queue({ edited_message: { ...peer.messageFrom('alice', dm, 'edited'), edit_date: Math.floor(Date.now() / 1000) } });
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

  it("saves a photo's largest size within the attachment limit when the full size is over it", async () => {
    // A PNG sent as a photo: the peer makes Telegram's sizes of it (100×75, 320×240 JPEGs, then 800×600).
    const png = await alphaPng(800, 600);
    const sizes = (await photoSizes(png))!;
    assert.deepEqual(sizes.map((size) => size.data.length < 1000), [true, true, false], 'the full size is over the 1000-byte limit of this suite, the thumbnails are not');
    await peer.postFile('alice', dm, { name: 'screen.png', mime: 'image/png', data: png }, 'this screen');
    await until(() => bot.pushed.length === 1, 'the photo message');
    const [saved] = bot.pushed[0]!.attachments!;
    assert.equal(saved!.kind, 'photo');
    assert.ok(saved!.path, `saved, not described as over the limit: ${JSON.stringify(saved)}`);
    const meta = await sharp(readFileSync(join(workspace, saved!.path))).metadata();
    assert.deepEqual([meta.format, meta.width, meta.height], ['jpeg', 320, 240], 'the 320 px size, the largest within the limit');
  });

  it('splits by visible length AND by 32 KiB of raw HTML: markup-heavy text Telegram would refuse arrives whole, formatted', async () => {
    // The server refuses raw text over 32 KiB before it parses entities, with its own words.
    const raw = await callApi(peer, 'sendMessage', { chat_id: Number(peer.users.alice), text: `<b>${'&amp;'.repeat(6554)}</b>`, parse_mode: 'HTML' });
    assert.deepEqual([raw.error_code, raw.description], [400, 'Bad Request: text is too long']);
    peer.reset();
    // 300 links (~7 visible characters, ~130 bytes of HTML each) and 3000 "&" (1 visible, 5 bytes): 5,100 visible, ~55 KB of HTML.
    const links = Array.from({ length: 300 }, (_, i) => `[doc ${i}](https://example.org/${'section/'.repeat(10)}page-${i}?ref=switchboard&lang=en)`).join(' ');
    const text = `${links}\n\n**${'&'.repeat(3000)}**`;
    const parts = splitMessage(text, bot.channel.maxMessageLength, { measure: (part) => bot.channel.measure!(part) });
    for (const part of parts) await bot.channel.send({ ...ref(dm), text: part });
    assert.ok(peer.calls.every((call) => call.status === 200), `every part accepted: ${peer.calls.map((c) => c.status).join(', ')}`);
    assert.ok(peer.sent.every((m) => m.html !== undefined && Buffer.byteLength(m.html) <= 32_768 && m.text.length <= 4096), 'each part as HTML within both limits');
    const shown = peer.sent.map((m) => m.text).join(' ');
    for (let i = 0; i < 300; i++) assert.ok(shown.includes(`doc ${i}`), `link ${i} arrived`);
    assert.equal(shown.split('&').length - 1, 3000);
  });

  it('a group upgraded to a supergroup: the reply goes there, the move is kept in the state, and the supergroup continues the conversation', async () => {
    const old = { channel: 'telegram', account: String(peer.bot.id), chat: String(peer.basicGroupId) };
    await bot.channel.send({ ...old, text: 'before the upgrade' });
    // A channel that has not seen the service messages (it is not listening) learns of the move from Telegram's 400.
    const state = testChannelState();
    const config = { token: peer.token, api_root: peer.apiRoot, poll_timeout_seconds: 5, mention_only: true, stream: false };
    const context = { name: 'telegram', log: testLogger(), assistantName: 'Testbot', attachments: createAttachmentStore({ workspace }), state, stateDir: '' };
    const sender = createTelegramChannel(config, context);
    const supergroup = peer.migrateGroup();
    const refused = await callApi(peer, 'sendMessage', { chat_id: peer.basicGroupId, text: 'x' });
    assert.deepEqual([refused.error_code, refused.description, refused.parameters], [400, 'Bad Request: group chat was upgraded to a supergroup chat', { migrate_to_chat_id: supergroup }]);
    await sender.send({ ...old, text: 'after the upgrade', replyTo: `${peer.basicGroupId}:1` });
    assert.deepEqual(peer.sent.filter((m) => m.chatId === supergroup).map((m) => m.text), ['after the upgrade']);
    assert.equal(await state.get(`migrated:${peer.basicGroupId}`), String(supergroup), 'kept in the channel state');
    // The next owner of that state sends there at once.
    const refusals = peer.calls.filter((c) => c.status === 400).length;
    await createTelegramChannel(config, context).typing(old);
    await createTelegramChannel(config, context).send({ ...old, text: 'later' });
    assert.equal(peer.calls.filter((c) => c.status === 400).length, refusals, 'no call to the old id');
    assert.deepEqual(peer.sent.filter((m) => m.chatId === supergroup).map((m) => m.text), ['after the upgrade', 'later']);
    // The listening channel learnt it from the service messages; the supergroup's messages are the old group's conversation.
    await until(() => peer.pending === 0, 'the service messages');
    const message = peer.messageIn('alice', supergroup, '@switchboard_test_bot still there?', { entities: [{ type: 'mention', offset: 0, length: 21 }] });
    peer.queue({ message });
    await until(() => bot.pushed.length === 1, 'the message from the supergroup');
    assert.equal(bot.pushed[0]!.chat, String(peer.basicGroupId), 'same conversation key as before the upgrade');
    assert.equal(bot.pushed[0]!.text, 'still there?');
    await bot.channel.send({ ...old, text: 'answer', replyTo: bot.pushed[0]!.id });
    const answer = peer.sent.at(-1)!;
    assert.deepEqual([answer.chatId, answer.text, answer.replyTo], [supergroup, 'answer', message.message_id], 'sent to the supergroup, quoting the message');
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
    bot = run(peer, workspace, { webhook: true });
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

/** Telegram's getFile limit for bots (20 MB), stated here on its own. */
const MAX_DOWNLOAD = 20 * 1024 * 1024;

/** A logger that keeps its lines (parsed) for the test to read. */
function capture(): { log: Logger; lines: Array<{ level: number; msg: string }> } {
  const lines: Array<{ level: number; msg: string }> = [];
  return { log: pino({ level: 'debug' }, { write: (line: string) => void lines.push(JSON.parse(line) as { level: number; msg: string }) }), lines };
}

/** A Bot API call made by hand (what the peer answers, as Telegram would). */
async function callApi(peer: TelegramPeer, method: string, body: Record<string, unknown>): Promise<{ ok: boolean; error_code?: number; description?: string; parameters?: Record<string, unknown> }> {
  const response = await fetch(`${peer.apiRoot}/bot${peer.token}/${method}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return (await response.json()) as { ok: boolean; error_code?: number; description?: string };
}

describe('telegram against the Bot API server\'s limits', () => {
  let peer: TelegramPeer;
  let workspace: string;
  let bot: Running;
  const dmOf = (user: 'alice' | 'bob'): { channel: string; account: string; chat: string } => ({ channel: 'telegram', account: String(peer.bot.id), chat: peer.users[user] });

  before(async () => {
    peer = await startTelegramPeer(); // as Telegram: flood control, privacy mode on
    workspace = mkdtempSync(join(tmpdir(), 'sb-tg-limits-'));
  });
  after(async () => {
    await bot?.stop();
    await peer.close();
    rmSync(workspace, { recursive: true, force: true });
  });
  beforeEach(async () => {
    await bot?.stop();
    peer.reset();
  });

  it('flood control: a 429 from send, sendDraft, edit, typing or sendFile is a SendError with retry_after for the chat', async () => {
    bot = run(peer, workspace);
    const alice = dmOf('alice');
    // Telegram's short burst: three messages at once pass, a fourth is over one a second.
    const id = await bot.channel.sendDraft({ ...alice, text: 'one' });
    await bot.channel.send({ ...alice, text: 'two' });
    await bot.channel.edit(alice, id, 'one, edited');
    const isWait = (error: unknown): boolean => error instanceof SendError && !error.permanent && error.retryAfterMs !== undefined && error.retryAfterMs >= 1000 && error.scope === 'chat';
    await assert.rejects(bot.channel.send({ ...alice, text: 'three' }), isWait);
    assert.deepEqual(peer.floodWaits.map((wait) => wait.method), ['sendMessage']);
    // Inside the wait every call is refused, typing included (its 429 is the runtime's to honour, not swallowed).
    await assert.rejects(bot.channel.typing(alice), isWait);
    await assert.rejects(bot.channel.sendDraft({ ...alice, text: 'four' }), isWait);
    await assert.rejects(bot.channel.edit(alice, id, 'one, edited again'), isWait);
    const file = join(workspace, 'a.csv');
    writeFileSync(file, 'a\n');
    await assert.rejects(bot.channel.sendFile(alice, { path: file, name: 'a.csv' }), isWait);
    assert.equal(peer.callsInsideWait(Number(alice.chat)), 4, 'each call inside the wait was answered 429 again, and counted');
    // Another chat is not held; "typing…" over its own rate is refused there too.
    await bot.channel.send({ ...dmOf('bob'), text: 'another chat is not held' });
    for (let i = 0; i < 3; i++) await bot.channel.typing(dmOf('bob'));
    await assert.rejects(bot.channel.typing(dmOf('bob')), isWait);
    assert.deepEqual(peer.floodWaits.map((wait) => wait.method), ['sendMessage', 'sendChatAction']);
    await new Promise((resolve) => setTimeout(resolve, peer.floodWaits[0]!.retryAfter * 1000 + 100));
    await bot.channel.send({ ...alice, text: 'after the wait' });
    assert.equal(peer.callsInsideWait(Number(alice.chat)), 4, 'none after it');
  });

  it('flood control: a group takes at most 20 messages a minute', async () => {
    const flooded = await startTelegramPeer({ flood: { burst: 100 } });
    try {
      const ok: boolean[] = [];
      for (let i = 0; i < 21; i++) ok.push((await callApi(flooded, 'sendMessage', { chat_id: flooded.groupId, text: `n${i}` })).ok);
      assert.deepEqual(ok, [...Array<boolean>(20).fill(true), false]);
      const refused = await callApi(flooded, 'sendMessage', { chat_id: flooded.groupId, text: 'again' });
      assert.equal(refused.error_code, 429);
      assert.match(refused.description!, /^Too Many Requests: retry after \d+$/);
      assert.ok(Number(refused.parameters?.retry_after) >= 1);
    } finally {
      await flooded.close();
    }
  });

  it('privacy mode: only commands, mentions and replies to the bot arrive from groups; the channel says once how to turn it off', async () => {
    const { log, lines } = capture();
    bot = run(peer, workspace, { log });
    await until(() => peer.pollsWaiting > 0, 'the first poll');
    await bot.channel.send({ channel: 'telegram', account: String(peer.bot.id), chat: String(peer.groupId), text: 'I am the bot' });
    const mine = peer.sent.at(-1)!;
    const group = { kind: 'group' } as const;
    await peer.post('bob', group, 'chatter among ourselves');
    await peer.post('bob', group, 'Testbot, are you there?');
    await peer.post('alice', group, 'hi there', { mention: true });
    await peer.post('alice', { kind: 'thread' }, '/status@switchboard_test_bot');
    peer.queue({ message: peer.messageFrom('bob', group, 'thanks', { reply_to_message: { message_id: mine.messageId, from: peer.bot, chat: { id: peer.groupId, type: 'supergroup', title: 'Test group' }, date: 1, text: mine.text } }) });
    await until(() => bot.pushed.length === 3, 'the three messages Telegram delivers');
    await new Promise((resolve) => setTimeout(resolve, 100));
    assert.deepEqual(bot.pushed.map((m) => m.text), ['hi there', '/status', 'thanks']);
    const warnings = lines.filter((line) => line.level === 40 && line.msg.includes('privacy mode is on'));
    assert.equal(warnings.length, 1, 'said once');
    assert.match(warnings[0]!.msg, /not kept as context/);
    assert.match(warnings[0]!.msg, /"Testbot, …"/);
    assert.match(warnings[0]!.msg, /@BotFather → \/setprivacy → @switchboard_test_bot → Disable/);
    assert.match(warnings[0]!.msg, /remove the bot from each group and add it again/);
    assert.doesNotMatch(warnings[0]!.msg, /mention_only/, 'mention_only is on: answering only when addressed works');
  });

  it('privacy mode off (or mention_only = false asking for more): warned only when it is on', async () => {
    const open = await startTelegramPeer({ canReadAllGroupMessages: true });
    const quiet = capture();
    const other = run(open, workspace, { log: quiet.log, mentionOnly: false });
    try {
      await until(() => open.pollsWaiting > 0, 'the first poll');
      await open.post('bob', { kind: 'group' }, 'chatter among ourselves');
      await until(() => other.pushed.length === 1, 'the chatter');
      assert.equal(quiet.lines.filter((line) => line.msg.includes('privacy mode')).length, 0);
    } finally {
      await other.stop();
      await open.close();
    }
    const loud = capture();
    bot = run(peer, workspace, { log: loud.log, mentionOnly: false });
    await until(() => loud.lines.some((line) => line.msg.includes('privacy mode is on')), 'the warning');
    assert.match(loud.lines.find((line) => line.msg.includes('privacy mode is on'))!.msg, /mention_only = false cannot answer the other group messages/);
  });

  it('getFile serves at most 20 MB: a larger file is described without asking for it, whatever the attachment limit', async () => {
    const refused = await callApi(peer, 'getFile', { file_id: 'nope' });
    assert.equal(refused.description, 'Bad Request: invalid file_id');
    peer.reset();
    bot = run(peer, workspace, { maxBytes: 64 * 1024 * 1024 });
    await until(() => peer.pollsWaiting > 0, 'the first poll');
    const posted = peer.fileMessage('alice', { kind: 'dm', user: 'alice' }, { name: 'huge.zip', mime: 'application/zip', data: new Uint8Array(MAX_DOWNLOAD + 1) });
    peer.queue({ message: posted });
    await until(() => bot.pushed.length === 1, 'the file message');
    const attachment = bot.pushed[0]!.attachments![0]!;
    assert.equal(attachment.path, undefined);
    assert.equal(attachment.size, MAX_DOWNLOAD + 1);
    assert.match(attachment.note!, /20\.0 MB is over the 20 MB Telegram lets bots download \(getFile\)/);
    assert.equal(peer.calls.filter((c) => c.method === 'getFile').length, 0, 'not even asked for');
    // The peer refuses it as Telegram does; a file whose size was not announced is asked for, and described the same.
    const document = posted.document!;
    assert.equal((await callApi(peer, 'getFile', { file_id: document.file_id })).description, 'Bad Request: file is too big');
    const { file_size: _size, ...unsized } = document;
    peer.queue({ message: { ...peer.messageFrom('alice', { kind: 'dm', user: 'alice' }, ''), document: unsized } });
    await until(() => bot.pushed.length === 2, 'the second file message');
    assert.match(bot.pushed[1]!.attachments![0]!.note!, /over the 20 MB Telegram lets bots download/);
  });
});
