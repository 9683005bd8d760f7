import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { classify, mentions, normalise, parseMxc, relationsOf, startsWithName, stripMention, stripReplyFallback, type BotIdentity, type NormaliseOptions, type RoomEvent } from './inbound.ts';

const bot: BotIdentity = { userId: '@switchboard:example.org', names: ['Switchboard'] };
const event = (content: Record<string, unknown>, extra: Partial<RoomEvent> = {}): RoomEvent => ({
  event_id: '$ev1',
  type: 'm.room.message',
  sender: '@alice:example.org',
  origin_server_ts: 1_700_000_000_000,
  content,
  ...extra,
});
const options: NormaliseOptions = { channel: 'matrix', account: bot.userId, assistantName: 'Testbot', roomId: '!room:example.org', direct: false, senderName: 'Alice', repliesToBot: false };

describe('matrix inbound: what is answered', () => {
  it('answers text, emotes and files; never its own events, notices (bots), edits or other types', () => {
    assert.equal(classify(event({ msgtype: 'm.text', body: 'hi' }), bot.userId).kind, 'message');
    assert.equal(classify(event({ msgtype: 'm.image', body: 'a.png', url: 'mxc://s/a' }), bot.userId).kind, 'message');
    assert.equal(classify(event({ msgtype: 'm.text', body: 'hi' }, { sender: bot.userId }), bot.userId).kind, 'skip');
    assert.equal(classify(event({ msgtype: 'm.notice', body: 'beep' }), bot.userId).kind, 'skip');
    assert.equal(classify(event({ msgtype: 'm.text', body: '* fixed', 'm.new_content': { body: 'fixed' }, 'm.relates_to': { rel_type: 'm.replace', event_id: '$x' } }), bot.userId).kind, 'skip');
    assert.equal(classify(event({}, { type: 'm.reaction' }), bot.userId).kind, 'skip');
    assert.equal(classify(event({}), bot.userId).kind, 'skip', 'a redacted message has no msgtype');
    assert.equal(classify(event({ algorithm: 'm.megolm.v1.aes-sha2', ciphertext: 'x' }, { type: 'm.room.encrypted' }), bot.userId).kind, 'encrypted');
  });
});

describe('matrix inbound: normalisation', () => {
  it('uses the event id, room, sender and timestamp; a DM is always addressed', () => {
    const { message } = normalise(event({ msgtype: 'm.text', body: 'hello' }), bot, { ...options, direct: true })!;
    assert.deepEqual(message, {
      channel: 'matrix',
      account: bot.userId,
      chat: '!room:example.org',
      id: '$ev1',
      sender: { id: '@alice:example.org', name: 'Alice' },
      text: 'hello',
      timestamp: 1_700_000_000_000,
      direct: true,
      addressed: true,
    });
  });

  it('detects mentions: m.mentions, a pill, the name first (display name, localpart, assistant name), a reply to the bot', () => {
    const addressed = (content: Record<string, unknown>, repliesToBot = false): boolean | undefined => normalise(event(content), bot, { ...options, repliesToBot })!.message.addressed;
    assert.equal(addressed({ msgtype: 'm.text', body: 'hey there', 'm.mentions': { user_ids: [bot.userId] } }), true);
    assert.equal(addressed({ msgtype: 'm.text', body: 'Switchboard: hi', format: 'org.matrix.custom.html', formatted_body: '<a href="https://matrix.to/#/%40switchboard%3Aexample.org">Switchboard</a>: hi' }), true);
    assert.equal(addressed({ msgtype: 'm.text', body: 'switchboard, a question' }), true);
    assert.equal(addressed({ msgtype: 'm.text', body: 'Testbot what now?' }), true);
    assert.equal(addressed({ msgtype: 'm.text', body: '@switchboard:example.org ping' }), true);
    assert.equal(addressed({ msgtype: 'm.text', body: 'thanks!' }, true), true);
    assert.equal(addressed({ msgtype: 'm.text', body: 'Switchboards are old tech' }), false);
    assert.equal(addressed({ msgtype: 'm.text', body: 'ask Switchboard later', 'm.mentions': {} }), false);
    assert.equal(addressed({ msgtype: 'm.text', body: 'hi', 'm.mentions': { user_ids: ['@bob:example.org'] } }), false);
    assert.equal(mentions({ formatted_body: '<a href="https://matrix.to/#/@bob:example.org">Bob</a>' }, bot), false);
    assert.equal(startsWithName('  Testbot', ['Testbot']), true);
  });

  it('strips a leading mention of the bot, not its name used in a sentence', () => {
    assert.equal(stripMention('Switchboard: what do you think?', bot), 'what do you think?');
    assert.equal(stripMention('@switchboard:example.org  hi', bot), 'hi');
    assert.equal(stripMention('@switchboard, hi', bot), 'hi');
    assert.equal(stripMention('Switchboard is great', bot), 'Switchboard is great');
    assert.equal(stripMention('Testbot, go', bot), 'Testbot, go', 'the assistant name is kept (it is not a pill)');
  });

  it('puts thread messages in their thread and tells a real reply from a thread fallback', () => {
    const inThread = event({ msgtype: 'm.text', body: 'in thread', 'm.relates_to': { rel_type: 'm.thread', event_id: '$root', is_falling_back: true, 'm.in_reply_to': { event_id: '$latest' } } });
    assert.deepEqual(relationsOf(inThread), { thread: '$root' });
    assert.equal(normalise(inThread, bot, options)!.message.thread, '$root');
    const quoted = event({ msgtype: 'm.text', body: 'in thread', 'm.relates_to': { rel_type: 'm.thread', event_id: '$root', is_falling_back: false, 'm.in_reply_to': { event_id: '$that' } } });
    assert.deepEqual(relationsOf(quoted), { thread: '$root', replyTo: '$that' });
    assert.deepEqual(relationsOf(event({ msgtype: 'm.text', body: 'x', 'm.relates_to': { 'm.in_reply_to': { event_id: '$bot' } } })), { replyTo: '$bot' });
    assert.deepEqual(relationsOf(event({ msgtype: 'm.text', body: 'x' })), {});
  });

  it('drops the quoted fallback of a legacy reply', () => {
    assert.equal(stripReplyFallback('> <@bot:x> earlier answer\n> more\n\nmy reply'), 'my reply');
    assert.equal(stripReplyFallback('no quote'), 'no quote');
    const { message } = normalise(event({ msgtype: 'm.text', body: '> <@bot:x> hi\n\nthanks', 'm.relates_to': { 'm.in_reply_to': { event_id: '$b' } } }), bot, options)!;
    assert.equal(message.text, 'thanks');
  });

  it('describes files (kind, name, mime, size), with the caption as text (MSC2530)', () => {
    const withCaption = normalise(event({ msgtype: 'm.file', body: 'see attached', filename: 'report.pdf', url: 'mxc://s/abc', info: { mimetype: 'application/pdf', size: 42 } }), bot, { ...options, direct: true })!;
    assert.equal(withCaption.message.text, 'see attached');
    assert.deepEqual(withCaption.files, [{ kind: 'file', url: 'mxc://s/abc', name: 'report.pdf', mime: 'application/pdf', size: 42 }]);
    const bare = normalise(event({ msgtype: 'm.image', body: 'cat.png', url: 'mxc://s/cat', info: { mimetype: 'image/png' } }), bot, options)!;
    assert.equal(bare.message.text, '');
    assert.deepEqual(bare.files, [{ kind: 'photo', url: 'mxc://s/cat', name: 'cat.png', mime: 'image/png' }]);
    const voice = normalise(event({ msgtype: 'm.audio', body: 'Voice message', url: 'mxc://s/v', 'org.matrix.msc3245.voice': {} }), bot, options)!;
    assert.equal(voice.files[0]!.kind, 'voice');
    const encrypted = normalise(event({ msgtype: 'm.file', body: 'secret.txt', file: { url: 'mxc://s/enc' } }), bot, options)!;
    assert.equal(encrypted.files[0]!.url, undefined, 'an encrypted file has no plain url');
    assert.deepEqual(parseMxc('mxc://example.org/AbC_12'), { server: 'example.org', mediaId: 'AbC_12' });
    assert.equal(parseMxc('https://example.org/x'), undefined);
  });

  it('writes an emote as "* name action"; skips an empty text', () => {
    assert.equal(normalise(event({ msgtype: 'm.emote', body: 'waves' }), bot, options)!.message.text, '* Alice waves');
    assert.equal(normalise(event({ msgtype: 'm.text', body: '   ' }), bot, options), undefined);
  });
});
