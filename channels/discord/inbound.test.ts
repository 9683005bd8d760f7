import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { attachmentKind, attachmentsOf, before, cleanText, isAfter, normalise, snowflakeTime, type BotIdentity, type ChannelInfo, type RawMessage } from './inbound.ts';

const bot: BotIdentity = { id: '900', names: ['testbot', 'Testbot Assistant'] };
const alice = { id: '101', username: 'alice', global_name: 'Alice' };
const text: ChannelInfo = { type: 0 };
const dm: ChannelInfo = { type: 1 };

const message = (content: string, extra: Partial<RawMessage> = {}): RawMessage => ({
  id: '1574017820604235776',
  channel_id: '300',
  guild_id: '200',
  author: alice,
  content,
  timestamp: '2026-01-02T03:04:05.000Z',
  type: 0,
  ...extra,
});

const normalised = (raw: RawMessage, info = text) => normalise(raw, { channel: 'discord', bot, info, sentByBot: (id) => id === '555' });

describe('discord normalisation', () => {
  it('a DM is direct, its chat the DM channel, its id the message snowflake', () => {
    const result = normalised(message('hello', { guild_id: undefined }), dm)!;
    assert.deepEqual(result, {
      channel: 'discord',
      account: '900',
      chat: '300',
      id: '1574017820604235776',
      sender: { id: '101', name: 'Alice' },
      text: 'hello',
      timestamp: Date.parse('2026-01-02T03:04:05.000Z'),
      direct: true,
      addressed: true,
    });
  });

  it('a leading mention (<@id> or <@!id>) addresses the bot and is stripped', () => {
    for (const content of ['<@900> what now?', '<@!900>, what now?', '  <@900>: what now?']) {
      const result = normalised(message(content))!;
      assert.equal(result.text, 'what now?', content);
      assert.equal(result.addressed, true);
      assert.equal(result.direct, false);
    }
    const middle = normalised(message('so <@900> what now?'))!;
    assert.equal(middle.text, 'so @testbot what now?');
    assert.equal(middle.addressed, true);
  });

  it('a reply to one of the bot’s messages addresses it (by referenced author or by a sent id)', () => {
    assert.equal(normalised(message('and?', { message_reference: { message_id: '1' }, referenced_message: { author: { id: '900' } } }))!.addressed, true);
    assert.equal(normalised(message('and?', { message_reference: { message_id: '555' }, referenced_message: null }))!.addressed, true);
    assert.equal(normalised(message('and?', { message_reference: { message_id: '1' }, referenced_message: { author: { id: '102' } } }))!.addressed, false);
  });

  it('the bot’s name as the first word addresses it; elsewhere or as part of a word it does not', () => {
    assert.equal(normalised(message('Testbot, help'))!.addressed, true);
    assert.equal(normalised(message('testbot assistant: hi'))!.addressed, true);
    assert.equal(normalised(message('testbot'))!.addressed, true);
    assert.equal(normalised(message('testbots are fun'))!.addressed, false);
    assert.equal(normalised(message('ask testbot later'))!.addressed, false);
  });

  it('a thread message belongs to the parent channel’s chat with the thread id', () => {
    const result = normalised(message('in thread', { channel_id: '301' }), { type: 11, parentId: '300' })!;
    assert.equal(result.chat, '300');
    assert.equal(result.thread, '301');
  });

  it('shows other mentions as @name and turns /cmd@bot into /cmd', () => {
    assert.equal(cleanText('<@900> /new@testbot', bot, []), '/new');
    assert.equal(cleanText('hi <@102> and <@!103>', bot, [{ id: '102', username: 'bob', global_name: null }]), 'hi @bob and <@!103>');
    assert.equal(cleanText('/new@someoneelse', bot, []), '/new@someoneelse');
  });

  it('uses the server nickname, then the display name, then the username', () => {
    assert.equal(normalised(message('x', { member: { nick: 'Ali' } }))!.sender.name, 'Ali');
    assert.equal(normalised(message('x', { author: { id: '101', username: 'alice', global_name: null } }))!.sender.name, 'alice');
  });

  it('ignores its own messages, other bots, webhooks, system messages and empty ones', () => {
    assert.equal(normalised(message('me', { author: { id: '900', username: 'testbot', bot: true } })), undefined);
    assert.equal(normalised(message('beep', { author: { id: '7', username: 'other', bot: true } })), undefined);
    assert.equal(normalised(message('hook', { webhook_id: '8' })), undefined);
    assert.equal(normalised(message('', { type: 18 })), undefined);
    assert.equal(normalised(message('pinned', { type: 6 })), undefined);
    assert.equal(normalised(message('  ')), undefined);
    assert.notEqual(normalised(message('', { attachments: [{ id: '1', filename: 'a.png', url: 'http://x/a.png' }] })), undefined);
    assert.notEqual(normalised(message('a reply', { type: 19 })), undefined);
  });

  it('falls back to the snowflake’s time without a timestamp', () => {
    const id = ((BigInt(Date.parse('2026-05-01T00:00:00Z')) - 1_420_070_400_000n) << 22n).toString();
    assert.equal(snowflakeTime(id), Date.parse('2026-05-01T00:00:00Z'));
    assert.equal(normalised(message('x', { id, timestamp: undefined }))!.timestamp, Date.parse('2026-05-01T00:00:00Z'));
  });

  it('compares snowflakes as numbers and steps back one', () => {
    assert.equal(isAfter('10000000000000000000', '9999999999999999999'), true);
    assert.equal(isAfter('9', '10'), false);
    assert.equal(before('1000'), '999');
  });

  it('classifies attachments by MIME type (voice messages by flag)', () => {
    const file = (content_type?: string) => ({ id: '1', filename: 'f', url: 'u', ...(content_type ? { content_type } : {}) });
    assert.equal(attachmentKind(file('image/png')), 'photo');
    assert.equal(attachmentKind(file('audio/ogg')), 'audio');
    assert.equal(attachmentKind(file('audio/ogg'), 1 << 13), 'voice');
    assert.equal(attachmentKind(file('video/mp4')), 'video');
    assert.equal(attachmentKind(file('application/pdf')), 'file');
    assert.equal(attachmentKind(file()), 'file');
  });

  it('a forwarded message (empty content, type FORWARD) is read from its snapshot, files included, and is not a reply to the bot', () => {
    const photo = { id: '77', filename: 'cat.png', size: 10, url: 'http://cdn/cat.png', content_type: 'image/png' };
    const forward = message('', {
      flags: 1 << 14,
      message_reference: { type: 1, message_id: '555', channel_id: '400' },
      message_snapshots: [{ message: { content: 'the plan: <@900> ships friday', attachments: [photo], flags: 0 } }],
    });
    const result = normalised(forward, dm)!;
    assert.equal(result.text, '(forwarded message)\nthe plan: @testbot ships friday');
    assert.equal(result.addressed, true, 'a DM');
    assert.deepEqual(attachmentsOf(forward), [{ attachment: photo, flags: 0 }]);
    const inGroup = normalised(forward, text)!;
    assert.equal(inGroup.addressed, false, 'forwarding the bot’s message (555) into a group does not address it');
    const fileOnly = message('', { message_reference: { type: 1, message_id: '1', channel_id: '400' }, message_snapshots: [{ message: { content: '', attachments: [photo] } }] });
    assert.equal(normalised(fileOnly, dm)!.text, '(forwarded message)');
    assert.throws(() => normalised(message('', { message_reference: { type: 1 }, message_snapshots: [{ message: { content: 5 } }] } as unknown as RawMessage), dm), /message_snapshots\.0\.message\.content/);
  });
});
