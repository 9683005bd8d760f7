/**
 * Email end to end against a real mail system (dovecot + postfix on random local ports, see
 * test/peers/mailserver.ts): the shared contract suites, threaded replies filed in Sent,
 * history across a thread (also from terse clients that name only the bot's reply), mail that
 * must never be answered (strangers, autoresponders, bounces), IMAP going away while mail
 * arrives, and a SIGKILL mid-turn.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { createEmailChannel } from '../channels/email/index.ts';
import type { Channel, ChannelContext, InboundMessage } from '../src/channel.ts';
import type { EmailConfig } from '../channels/email/config.ts';
import { refOf } from '../src/conversation.ts';
import { createAttachmentStore } from '../src/inbound/attachments.ts';
import { createImagePreparer, IMAGE_LIMITS } from '../src/media/image.ts';
import { cameraJpeg } from './support/photos.ts';
import { runChannelContract } from './contracts/channel.ts';
import { runChatChannelContract, type PeerUser, type Place } from './contracts/chat-channel.ts';
import { startFakeOpenAI, type FakeOpenAI } from './fixtures/fake-openai.ts';
import { startEmailPeer, type EmailPeer, type ReceivedMail } from './peers/email.ts';
import { startDaemon, tempConfig, type Daemon } from './support/cli.ts';
import { testLogger } from './support/log.ts';
import { requireServers } from './support/servers.ts';
import { until } from './support/wait.ts';
import { testChannelState } from './support/channel-state.ts';

// Real dovecot and postfix run these tests: without them, fail now with the install line instead of waiting.
requireServers('dovecot', 'postfix');

const dm: Place = { kind: 'dm', user: 'alice' };
const env = { TEST_MODEL_KEY: 'sk-email' };
const sha256 = (data: Uint8Array): string => createHash('sha256').update(data).digest('hex');

// One mail system for the whole file (starting one costs about a second); every test starts its
// own threads (peer.reset) and every mail is handled (\Seen) before a test ends.
let shared: Promise<EmailPeer> | undefined;
const sharedPeer = (): Promise<EmailPeer> => (shared ??= startEmailPeer());
after(async () => {
  if (shared) await (await shared).close();
});

runChatChannelContract(
  'email',
  async () => ({ ...(await sharedPeer()), close: async () => undefined }),
  {
    groups: 'email has no group chats: every thread is one person and the bot',
    edits: 'a sent mail cannot be edited, so nothing streams',
    pairing: 'strangers are never answered by mail, not even with a pairing code (no backscatter)',
  },
);

function channelConfig(peer: EmailPeer): EmailConfig {
  const login = { host: peer.server.host, tls: false, user: peer.bot.address, password: peer.bot.password };
  return {
    address: peer.bot.address,
    imap: { ...login, port: peer.server.imapPort },
    smtp: { ...login, port: peer.server.submissionPort },
    allow: [peer.users.alice],
    folder: 'INBOX',
    poll_seconds: 5,
    max_message_mb: 25,
    html: false,
  };
}

function channelContext(stateDir: string): ChannelContext {
  return { name: 'email', log: testLogger(), assistantName: 'Testbot', attachments: createAttachmentStore({ workspace: stateDir }), state: testChannelState(), stateDir };
}

runChannelContract('email', async () => {
  const peer = await sharedPeer();
  peer.reset();
  const workspace = mkdtempSync(join(tmpdir(), 'sb-email-'));
  const inner = createEmailChannel(channelConfig(peer), channelContext(workspace));
  // A mail reaches the mailbox a moment after SMTP took it: count what was sent to know what to wait for.
  let sent = 0;
  const channel: Channel = {
    name: inner.name,
    listen: (push, signal, link) => inner.listen(push, signal, link),
    send: async (message) => {
      await inner.send(message);
      sent++;
    },
  };
  const received = (): string[] => peer.botMessages(dm).map((m) => m.text);
  return {
    channel,
    say: (text) => peer.post('alice', dm, text),
    received: async () => {
      await until(() => received().length >= sent, 'the sent mails in the mailbox');
      return received();
    },
    close: async () => rmSync(workspace, { recursive: true, force: true }),
  };
});

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
/** Long enough for a mail that was going to come to have arrived (delivery + IDLE take about a second). */
const quiet = (): Promise<void> => sleep(2000);

describe('email channel without the daemon', () => {
  it('replies properly in a thread after a restart that lost its thread record (looks the mail up over IMAP)', async () => {
    const peer = await sharedPeer();
    peer.reset();
    const first = mkdtempSync(join(tmpdir(), 'sb-email-'));
    const second = mkdtempSync(join(tmpdir(), 'sb-email-'));
    try {
      const before = createEmailChannel(channelConfig(peer), channelContext(first));
      const pushed: InboundMessage[] = [];
      const abort = new AbortController();
      const listening = before.listen(async (message) => (pushed.push(message), 'accepted'), abort.signal, { ready: () => undefined, alive: () => undefined, deaf: () => undefined });
      const id = await peer.mail('alice', { subject: 'Budget', text: 'Is the budget approved?' });
      await until(() => pushed.length === 1, 'the mail');
      abort.abort();
      await listening;
      assert.equal(pushed[0]!.id, id);
      assert.equal(pushed[0]!.chat, id, 'a new mail starts its own thread');
      assert.equal(pushed[0]!.sender.id, peer.users.alice);
      assert.equal(pushed[0]!.sender.name, 'Alice Liddell');
      assert.equal(pushed[0]!.text, 'Subject: Budget\n\nIs the budget approved?');

      const after = createEmailChannel(channelConfig(peer), channelContext(second)); // a fresh state dir: no record
      await after.send({ ...refOf(pushed[0]!), text: 'Yes, **approved**.', replyTo: id });
      await until(() => botMailsTo('alice', peer, id).length === 1, 'the reply');
      const reply = botMailsTo('alice', peer, id)[0]!;
      assert.equal(reply.subject, 'Re: Budget');
      assert.equal(reply.inReplyTo, id);
      assert.deepEqual(reply.references, [id]);
      assert.equal(reply.text, 'Yes, approved.');
    } finally {
      rmSync(first, { recursive: true, force: true });
      rmSync(second, { recursive: true, force: true });
    }
  });
});

describe('email channel without the daemon: terse replies', () => {
  const link = { ready: () => undefined, alive: () => undefined, deaf: () => undefined };

  it('a reply naming only the bot\'s mail continues the thread even after the thread record was lost (found in Sent)', async () => {
    const peer = await sharedPeer();
    peer.reset();
    const first = mkdtempSync(join(tmpdir(), 'sb-email-'));
    const second = mkdtempSync(join(tmpdir(), 'sb-email-'));
    /** Listens with `channel` until `count` mails were pushed. */
    const receiveMails = async (channel: Channel, count: number, send: () => Promise<unknown>): Promise<InboundMessage[]> => {
      const pushed: InboundMessage[] = [];
      const abort = new AbortController();
      const listening = channel.listen(async (message) => (pushed.push(message), 'accepted'), abort.signal, link);
      await send();
      await until(() => pushed.length === count, `${count} mail(s)`);
      abort.abort();
      await listening;
      return pushed;
    };
    try {
      const before = createEmailChannel(channelConfig(peer), channelContext(first));
      let root = '';
      const [question] = await receiveMails(before, 1, async () => (root = await peer.mail('alice', { subject: 'Budget', text: 'Is the budget approved?' })));
      await before.send({ ...refOf(question!), text: 'Yes.', replyTo: root });
      await until(() => botMailsTo('alice', peer, root).length === 1, 'the reply');
      const reply = botMailsTo('alice', peer, root)[0]!;
      // The copy in Sent is appended after SMTP took the mail: the lookup below needs it there.
      const deadline = Date.now() + 15_000;
      while (!(await peer.readFolder(peer.bot, 'Sent')).some((mail) => mail.messageId === reply.messageId)) {
        if (Date.now() > deadline) throw new Error('the reply never reached the Sent folder');
        await new Promise((resolve) => setTimeout(resolve, 100));
      }

      // a fresh state dir: the thread book knows neither the thread nor the reply
      const after = createEmailChannel(channelConfig(peer), channelContext(second));
      const pushed = await receiveMails(after, 2, async () => {
        await peer.mail('alice', { subject: 'Re: Budget', text: 'How much?', inReplyTo: reply.messageId, references: [reply.messageId] });
        // bob was forwarded the bot's reply: his answer is a conversation of his own
        await peer.mail('bob', { subject: 'Re: Budget', text: 'Me too?', inReplyTo: reply.messageId });
      });
      const terse = pushed.find((message) => message.sender.id === peer.users.alice);
      const stranger = pushed.find((message) => message.sender.id === peer.users.bob);
      assert.equal(terse!.chat, root, 'the thread of the bot\'s reply, from the Sent folder');
      assert.equal(terse!.text, 'How much?');
      assert.equal(stranger!.chat, reply.messageId, 'not alice\'s conversation');

      await after.send({ ...refOf(terse!), text: 'Enough.', replyTo: terse!.id });
      await until(() => botMailsTo('alice', peer, root).length === 2, 'the second reply');
      const again = botMailsTo('alice', peer, root)[1]!;
      assert.equal(again.inReplyTo, terse!.id);
      assert.deepEqual(again.references, [root, reply.messageId, terse!.id], 'the root first, though the terse reply left it out');
    } finally {
      rmSync(first, { recursive: true, force: true });
      rmSync(second, { recursive: true, force: true });
    }
  });
});

/** The bot's mails in a person's INBOX that belong to the thread started by `root`. */
function botMailsTo(user: PeerUser, peer: EmailPeer, root: string): ReceivedMail[] {
  return peer.inbox(user).filter((m) => m.from === peer.bot.address && (m.inReplyTo === root || m.references.includes(root)));
}

describe('email with the daemon', () => {
  let model: FakeOpenAI;
  let peer: EmailPeer;
  let config: ReturnType<typeof tempConfig>;
  let daemon: Daemon | undefined;

  before(async () => {
    model = await startFakeOpenAI();
    peer = await sharedPeer();
  });
  after(async () => {
    await stop();
    await model?.close();
  });

  const texts = (): string[] => peer.botMessages(dm).map((m) => m.text);
  const log = (): string => `\nbot messages: ${JSON.stringify(texts())}\ndaemon log:\n${daemon?.stdout().slice(-5000)}\n${daemon?.stderr().slice(-2000)}\nmaillog:\n${peer.server.maillog().slice(-2000)}`;

  async function start(options: { allow?: readonly string[]; extra?: string; reuse?: boolean } = {}): Promise<void> {
    if (!options.reuse) {
      await stop();
      peer.reset();
      model.requests.length = 0;
      const allow = options.allow ?? [peer.users.alice];
      config = tempConfig(model.baseUrl, `[log]\nformat = "json"\n${peer.configSection(options.extra)}allow = ${JSON.stringify(allow)}\n`);
    }
    daemon = startDaemon(['start', '--config', config.file], { env });
    await daemon.waitFor(/"msg":"ready"/, 'stdout', 20_000);
  }

  async function stop(): Promise<void> {
    if (!daemon) return;
    daemon.child.kill('SIGTERM');
    const { code } = await daemon.exited;
    assert.equal(code, 0, `daemon exit code${log()}`);
    daemon = undefined;
    config.cleanup();
  }

  it('answers with a threaded reply from the bot, filed in Sent; the next mail of the thread carries the first exchange', async () => {
    await start({ extra: 'html = true\n' });
    model.script({ text: 'Try **Luigi** at [the square](https://luigi.example/menu).' });
    const first = await peer.mail('alice', { subject: 'Lunch plans', text: 'Where shall we eat today?\n\n-- \nAlice Liddell\n+1 555 0100' });
    await until(() => botMailsTo('alice', peer, first).length === 1, 'the reply', 15_000, log);
    const reply = botMailsTo('alice', peer, first)[0]!;
    assert.equal(reply.from, peer.bot.address);
    assert.equal(reply.fromName, 'Testbot');
    assert.deepEqual(reply.to, [peer.users.alice]);
    assert.equal(reply.subject, 'Re: Lunch plans');
    assert.equal(reply.inReplyTo, first);
    assert.deepEqual(reply.references, [first]);
    assert.match(reply.messageId, /^<[^@]+@test\.example>$/);
    assert.equal(reply.text, 'Try Luigi at the square <https://luigi.example/menu>.');
    assert.match(reply.html ?? '', /Try <strong>Luigi<\/strong> at <a href="https:\/\/luigi.example\/menu">the square<\/a>/);
    assert.equal(model.requests[0]!.body.messages.at(-1)!.content, 'Subject: Lunch plans\n\nWhere shall we eat today?', 'the subject, the body, no signature');

    const sent = await peer.readFolder(peer.bot, 'Sent');
    assert.deepEqual(
      sent.filter((m) => m.messageId === reply.messageId).map((m) => m.flags.has('\\Seen')),
      [true],
      'the reply is in the Sent folder, once, read',
    );

    const second = await peer.mail('alice', {
      subject: 'Re: Re: Lunch plans',
      text: `Pizza sounds good. What time?\n\nOn Mon, 1 Jun 2026 at 12:00, Testbot <${peer.bot.address}> wrote:\n> ${reply.text}\n`,
      inReplyTo: reply.messageId,
      references: [first, reply.messageId],
    });
    await until(() => botMailsTo('alice', peer, first).length === 2, 'the second reply', 15_000, log);
    const history = model.requests.at(-1)!.body.messages.slice(1).map((m) => m.content);
    assert.deepEqual(history, [
      'Subject: Lunch plans\n\nWhere shall we eat today?',
      'Try **Luigi** at [the square](https://luigi.example/menu).',
      'Pizza sounds good. What time?',
    ]);
    const again = botMailsTo('alice', peer, first)[1]!;
    assert.equal(again.subject, 'Re: Lunch plans', 'no "Re: Re:"');
    assert.equal(again.inReplyTo, second);
    assert.deepEqual(again.references, [first, reply.messageId, second]);
    assert.equal(again.text, 'echo: Pizza sounds good. What time?');
    await stop();
  });

  it('shows the model the photos an HTML mail carries inline (cid:, multipart/related) as well as attached ones', async () => {
    await start();
    model.script({ text: 'Two photos of a fern.' });
    const inline = await cameraJpeg(640, 480);
    const attached = await cameraJpeg(400, 300);
    const preparer = createImagePreparer();
    const expected = await Promise.all([inline, attached].map(async (photo) => {
      const prepared = await preparer.prepare(photo, IMAGE_LIMITS.openai);
      assert.ok(prepared.ok);
      return sha256(prepared.data);
    }));
    // As mail clients send a pasted picture (nodemailer: an attachment with a cid goes into multipart/related, Content-Disposition inline).
    const first = await peer.mail('alice', {
      subject: 'Which plant?',
      text: 'Pasted below, and one attached.',
      html: '<p>Pasted below, and one attached.</p><p><img src="cid:pasted-1@mail.example"></p>',
      attachments: [
        { cid: 'pasted-1@mail.example', contentType: 'image/jpeg', content: inline, contentDisposition: 'inline' },
        { filename: 'leaf.jpg', contentType: 'image/jpeg', content: attached },
      ],
    });
    await until(() => botMailsTo('alice', peer, first).length === 1, 'the reply', 15_000, log);
    const content: unknown = model.requests[0]!.body.messages.at(-1)!.content;
    assert.ok(Array.isArray(content), `the message has image parts: ${JSON.stringify(content).slice(0, 500)}`);
    const images = (content as Array<{ type: string; image_url?: { url: string } }>).flatMap((part) => (part.type === 'image_url' ? [Buffer.from(part.image_url!.url.replace(/^data:image\/jpeg;base64,/, ''), 'base64')] : []));
    assert.deepEqual(images.map(sha256).sort(), [...expected].sort(), 'both photos, each as the preparer makes it');
    await stop();
  });

  it('continues the thread when a reply names only the bot\'s reply (terse clients), also after a restart', async () => {
    await start();
    model.script({ text: 'How about Luigi?' });
    const first = await peer.mail('alice', { subject: 'Lunch plans', text: 'Where shall we eat today?' });
    await until(() => botMailsTo('alice', peer, first).length === 1, 'the reply', 15_000, log);
    const reply = botMailsTo('alice', peer, first)[0]!;

    // In-Reply-To and References name only the bot's reply, not the thread's root
    const second = await peer.mail('alice', { subject: 'Re: Lunch plans', text: 'Pizza sounds good. What time?', inReplyTo: reply.messageId, references: [reply.messageId] });
    await until(() => botMailsTo('alice', peer, first).length === 2, 'the second reply', 15_000, log);
    assert.deepEqual(
      model.requests.at(-1)!.body.messages.slice(1).map((m) => m.content),
      ['Subject: Lunch plans\n\nWhere shall we eat today?', 'How about Luigi?', 'Pizza sounds good. What time?'],
      'the same conversation: the first exchange is in the history',
    );
    const again = botMailsTo('alice', peer, first)[1]!;
    assert.equal(again.subject, 'Re: Lunch plans');
    assert.equal(again.inReplyTo, second);
    assert.deepEqual(again.references, [first, reply.messageId, second], 'the root first, then the terse reply\'s own References');

    // after a restart (the record is durable), In-Reply-To only, no References
    daemon!.child.kill('SIGTERM');
    assert.equal((await daemon!.exited).code, 0, `daemon exit code${log()}`);
    await start({ reuse: true });
    const third = await peer.mail('alice', { subject: 'Re: Lunch plans', text: 'Noon, then.', inReplyTo: again.messageId });
    await until(() => botMailsTo('alice', peer, first).length === 3, 'the third reply', 15_000, log);
    assert.deepEqual(
      model.requests.at(-1)!.body.messages.slice(1).map((m) => m.content),
      [
        'Subject: Lunch plans\n\nWhere shall we eat today?',
        'How about Luigi?',
        'Pizza sounds good. What time?',
        'echo: Pizza sounds good. What time?',
        'Noon, then.',
      ],
      'the same conversation after the restart',
    );
    const last = botMailsTo('alice', peer, first)[2]!;
    assert.equal(last.inReplyTo, third);
    assert.deepEqual(last.references, [first, again.messageId, third], 'RFC 5322: the In-Reply-To of a mail without References stands in for them');
    assert.doesNotMatch(daemon!.stdout(), /found in the Sent folder/, 'known from the thread record, not looked up');

    // a reply to a mail the bot never sent is a conversation of its own
    const stray = await peer.mail('alice', { subject: 'Re: Budget', text: 'And the budget?', inReplyTo: '<unknown@elsewhere.example>', references: ['<unknown@elsewhere.example>'] });
    await until(() => botMailsTo('alice', peer, stray).length === 1, 'the reply to the stray mail', 15_000, log);
    assert.deepEqual(model.requests.at(-1)!.body.messages.slice(1).map((m) => m.content), ['And the budget?'], 'no history');
    assert.deepEqual(botMailsTo('alice', peer, stray)[0]!.references, ['<unknown@elsewhere.example>', stray]);
    await stop();
  });

  it('never answers strangers, autoresponders, mailing lists, bounces or oversized mail, and marks them all read', async () => {
    // The allow list lets the robots through: only the channel's loop guard keeps them out.
    await start({ allow: [peer.users.alice, peer.users.bob, 'mailer-daemon@*'], extra: 'max_message_mb = 0.1\n' });
    await peer.mail('mallory', { subject: 'hi', text: 'let me in' });
    await peer.mail('bob', { subject: 'Out of office', text: 'I am away until Monday.', headers: { 'Auto-Submitted': 'auto-replied' } });
    await peer.mail('bob', { subject: 'Newsletter', text: 'This week in bots', headers: { 'List-Id': '<news.test.example>', 'List-Unsubscribe': '<mailto:leave@test.example>' } });
    // A real bounce: dovecot knows no such user, postfix tells the envelope sender (the bot).
    await peer.mail('bob', { subject: 'to nowhere', text: 'bounce me', envelope: { from: peer.bot.address, to: [`nobody@${peer.server.domain}`] } });
    await peer.mail('bob', { subject: 'Holiday photos', text: 'see attached', attachments: [{ filename: 'beach.bin', content: Buffer.alloc(200_000, 7) }] });
    await daemon!.waitFor(/mail not answered: .*(?:[\s\S]*mail not answered: ){3}/, 'stdout', 15_000);
    await peer.post('alice', dm, 'ping');
    await until(() => texts().length === 1, 'the reply to alice', 15_000, log);
    await quiet();
    assert.deepEqual(texts(), ['echo: ping']);
    assert.equal(model.requests.length, 1, 'only alice reached the model');
    for (const user of ['bob', 'mallory'] as const) {
      assert.deepEqual(peer.inbox(user).filter((m) => m.from === peer.bot.address).map((m) => m.subject), [], `nothing was sent to ${user}`);
    }
    const out = daemon!.stdout();
    assert.match(out, /mail not answered: Auto-Submitted: auto-replied/);
    assert.match(out, /mail not answered: mailing list/);
    assert.match(out, /"from":"mailer-daemon@mx\.test\.example"[^\n]*mail not answered/);
    assert.match(out, /mail not answered: too large to read/);
    const inbox = await peer.readFolder(peer.bot, 'INBOX');
    assert.deepEqual(inbox.filter((m) => !m.flags.has('\\Seen')).map((m) => m.subject), [], 'every mail in the bot\'s INBOX is marked read');
    await stop();
  });

  it('answers mail that arrived while IMAP was down exactly once, after IMAP is back', async (t) => {
    await start();
    await peer.post('alice', dm, 'before the outage');
    await until(() => texts().length === 1, 'the first reply', 15_000, log);
    await peer.server.stopDovecot();
    await daemon!.waitFor(/channel stopped; restarting/, 'stdout', 15_000);
    await peer.post('alice', dm, 'during the outage'); // postfix holds it: LMTP is dovecot too
    await sleep(3000); // the channel's reconnects fail meanwhile, backing off
    const upAt = Date.now();
    await peer.server.startDovecot();
    await peer.server.flush();
    await until(() => texts().length === 2, 'the reply after the outage', 30_000, log);
    await quiet();
    assert.deepEqual(texts(), ['echo: before the outage', 'echo: during the outage']);
    // The figure: from dovecot up to the channel ready again (the supervisor's next retry, then connect + login + SELECT).
    const lines = daemon!
      .stdout()
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as { time: number; msg: string; restartInMs?: number });
    const readyAt = lines.find((line) => line.msg === 'channel running' && line.time >= upAt)?.time;
    assert.ok(readyAt !== undefined, `the channel is running again${log()}`);
    const retries = lines.filter((line) => line.msg === 'channel stopped; restarting');
    const lastRetry = retries.map((line) => line.time + line.restartInMs!).filter((time) => time <= readyAt).at(-1)!;
    t.diagnostic(`IMAP back → channel ready again: ${readyAt - upAt} ms (${retries.length} restarts; the last retry took ${readyAt - lastRetry} ms to be ready)`);
    await stop();
  });

  it('answers exactly once after a SIGKILL mid-turn, also when the mail comes back unread', async () => {
    await start();
    model.script({ text: 'never sent', delayMs: 60_000 });
    await peer.post('alice', dm, 'survive this');
    await model.waitForRequests(1);
    daemon!.child.kill('SIGKILL');
    await daemon!.exited;
    // as if the crash had come before the mail was marked \Seen: IMAP hands it out again
    await peer.markUnseen(peer.bot, 'INBOX', peer.threadRoot('alice')!);
    await start({ reuse: true });
    await until(() => texts().length === 1, 'the reply after the restart', 20_000, log);
    await quiet();
    assert.deepEqual(texts(), ['echo: survive this']);
    assert.equal(model.requests.length, 2, `the model was asked once before the kill and once after${log()}`);
    assert.match(daemon!.stdout(), /already in the inbox/, 'IMAP handed the mail out again; the inbox recognised its Message-ID');
    const inbox = await peer.readFolder(peer.bot, 'INBOX');
    assert.deepEqual(inbox.filter((m) => !m.flags.has('\\Seen')).map((m) => m.subject), [], 'the redelivered mail was recognised and marked read');
    await stop();
  });
});
