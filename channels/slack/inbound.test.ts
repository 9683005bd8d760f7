import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { commandFor, fileKind, normalise, plainText, startsWithName, type NormaliseOptions, type SlackMessageEvent } from './inbound.ts';

const identity = { userId: 'U0BOT', botId: 'B0BOT', teamId: 'T1', names: ['testbot', 'Switchboard'] };
const options = (botThreads: string[] = []): NormaliseOptions => ({
  channel: 'slack',
  identity,
  botInThread: (chat, thread) => botThreads.includes(`${chat}/${thread}`),
});
const channelMessage = (fields: Partial<SlackMessageEvent> = {}): SlackMessageEvent => ({
  type: 'message',
  channel: 'C1',
  channel_type: 'channel',
  user: 'U0ALICE',
  text: 'hello',
  ts: '1700000000.000100',
  ...fields,
});

describe('slack normalisation', () => {
  it('a DM is direct, addressed, without a thread; id = channel:ts; timestamp in ms', () => {
    const { message } = normalise(channelMessage({ channel: 'D1', channel_type: 'im', text: 'hi &amp; bye' }), options())!;
    assert.deepEqual(message, {
      channel: 'slack',
      account: 'U0BOT',
      chat: 'D1',
      id: 'D1:1700000000.000100',
      sender: { id: 'U0ALICE' },
      text: 'hi & bye',
      timestamp: 1_700_000_000_000,
      direct: true,
      addressed: true,
    });
  });

  it('a DM message inside a thread is that thread', () => {
    const { message } = normalise(channelMessage({ channel: 'D1', channel_type: 'im', thread_ts: '1699999999.000001' }), options())!;
    assert.equal(message.thread, '1699999999.000001');
  });

  it('an addressed top-level channel message opens its own thread; the leading mention is stripped', () => {
    const { message } = normalise(channelMessage({ text: '<@U0BOT>: what now?' }), options())!;
    assert.equal(message.addressed, true);
    assert.equal(message.direct, false);
    assert.equal(message.thread, '1700000000.000100');
    assert.equal(message.text, 'what now?');
  });

  it('an unaddressed top-level channel message has no thread (channel chatter)', () => {
    const { message } = normalise(channelMessage({ text: 'just chatting' }), options())!;
    assert.equal(message.addressed, false);
    assert.equal(message.thread, undefined);
  });

  it('a message in a thread is that thread, addressed when the bot is in it (or started it)', () => {
    const inThread = channelMessage({ ts: '1700000000.000200', thread_ts: '1700000000.000100', text: 'and then?' });
    assert.equal(normalise(inThread, options())!.message.addressed, false);
    assert.equal(normalise(inThread, options())!.message.thread, '1700000000.000100');
    assert.equal(normalise(inThread, options(['C1/1700000000.000100']))!.message.addressed, true);
    assert.equal(normalise({ ...inThread, parent_user_id: 'U0BOT' }, options())!.message.addressed, true);
  });

  it('a mention anywhere, an app_mention, or the bot\'s name first addresses it', () => {
    assert.equal(normalise(channelMessage({ text: 'ask <@U0BOT|testbot> about it' }), options())!.message.addressed, true);
    assert.equal(normalise(channelMessage({ text: 'ask <@U0BOT|testbot> about it' }), options())!.message.text, 'ask @testbot about it');
    const mention = normalise({ type: 'app_mention', channel: 'C1', user: 'U0ALICE', text: '<@U0BOT> hi', ts: '1.2' }, options())!.message;
    assert.deepEqual([mention.addressed, mention.direct, mention.text, mention.thread], [true, false, 'hi', '1.2']);
    assert.equal(normalise(channelMessage({ text: 'Switchboard, are you there?' }), options())!.message.addressed, true);
    assert.equal(normalise(channelMessage({ text: 'switchboards are old tech' }), options())!.message.addressed, false);
    assert.equal(normalise(channelMessage({ text: 'hey <@U0OTHER>' }), options())!.message.addressed, false);
  });

  it('the message and app_mention events of one message get the same id', () => {
    const message = normalise(channelMessage({ text: '<@U0BOT> hi' }), options())!.message;
    const mention = normalise({ type: 'app_mention', channel: 'C1', user: 'U0ALICE', text: '<@U0BOT> hi', ts: '1700000000.000100' }, options())!.message;
    assert.equal(message.id, mention.id);
    assert.deepEqual(message, mention);
  });

  it('ignores bots, the bot itself, edits and other non-message subtypes', () => {
    assert.equal(normalise(channelMessage({ bot_id: 'B2' }), options()), undefined);
    assert.equal(normalise(channelMessage({ subtype: 'bot_message', user: undefined }), options()), undefined);
    assert.equal(normalise(channelMessage({ user: 'U0BOT' }), options()), undefined);
    assert.equal(normalise(channelMessage({ subtype: 'message_changed' }), options()), undefined);
    assert.equal(normalise(channelMessage({ subtype: 'channel_join' }), options()), undefined);
    assert.ok(normalise(channelMessage({ subtype: 'thread_broadcast', thread_ts: '1.1' }), options()));
  });

  it('a file share without text is still a message, with its files', () => {
    const files = [{ id: 'F1', name: 'a.pdf', mimetype: 'application/pdf', size: 3, url_private_download: 'https://files.slack.com/x' }];
    const normalised = normalise(channelMessage({ channel: 'D1', channel_type: 'im', subtype: 'file_share', text: '', files }), options())!;
    assert.equal(normalised.message.text, '');
    assert.deepEqual(normalised.files, files);
  });

  it('takes the sender name from user_profile when the event has one', () => {
    const { message } = normalise(channelMessage({ user_profile: { display_name: '', real_name: 'Alice A' } }), options())!;
    assert.deepEqual(message.sender, { id: 'U0ALICE', name: 'Alice A' });
  });

  it('turns Slack markup into plain text', () => {
    assert.equal(plainText('<#C1|general> <!here> <!subteam^S1|@devs> <https://x.org|site> <https://y.org> <mailto:a@b.c|a@b.c>'), '#general @here @devs site (https://x.org) https://y.org a@b.c');
    assert.equal(plainText('a &lt;b&gt; &amp;lt;'), 'a <b> &lt;');
  });

  it('normalises /cmd@bot to /cmd and knows the bot\'s names', () => {
    assert.equal(commandFor('/new@testbot please', identity.names), '/new please');
    assert.equal(commandFor('/new@someoneelse', identity.names), '/new@someoneelse');
    assert.equal(startsWithName('@TestBot: hi', identity.names), true);
    assert.equal(startsWithName('testbotty', identity.names), false);
  });

  it('maps file kinds', () => {
    assert.equal(fileKind({ mimetype: 'image/png' }), 'photo');
    assert.equal(fileKind({ mimetype: 'audio/webm', subtype: 'slack_audio' }), 'voice');
    assert.equal(fileKind({ mimetype: 'video/mp4' }), 'video');
    assert.equal(fileKind({ mimetype: 'application/pdf' }), 'file');
  });
});
