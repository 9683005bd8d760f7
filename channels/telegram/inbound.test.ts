import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Message } from 'grammy/types';
import { filesOf, messageId, normalise, telegramMessageId, type BotIdentity } from './inbound.ts';

const bot: BotIdentity = { id: 42, username: 'switchy_bot', firstName: 'Switchy' };
const options = { channel: 'telegram', account: '42', assistantName: 'Testbot' };
const alice = { id: 1001, is_bot: false, first_name: 'Alice', last_name: 'Liddell', username: 'alice' };
const group = { id: -100123, type: 'supergroup' as const, title: 'G', is_forum: true as const };

const msg = (fields: Record<string, unknown>): Message =>
  ({ message_id: 7, date: 1_700_000_000, chat: group, from: alice, ...fields }) as unknown as Message;
const run = (fields: Record<string, unknown>) => normalise(msg(fields), bot, options);

describe('telegram inbound normalisation', () => {
  it('normalises a private message: ids, sender, timestamp, direct', () => {
    const result = run({ chat: { id: 1001, type: 'private', first_name: 'Alice' }, text: 'hello' })!;
    assert.deepEqual(result.message, {
      channel: 'telegram',
      account: '42',
      chat: '1001',
      id: '1001:7',
      sender: { id: '1001', name: 'Alice Liddell' },
      text: 'hello',
      timestamp: 1_700_000_000_000,
      direct: true,
      addressed: true,
    });
    assert.deepEqual(result.files, []);
  });

  it('derives a stable id from chat and message_id (the same on redelivery, whatever the update_id)', () => {
    assert.equal(run({ text: 'x' })!.message.id, run({ text: 'x' })!.message.id);
    assert.equal(messageId(-100123, 7), '-100123:7');
    assert.equal(telegramMessageId('-100123:7'), 7);
    assert.equal(telegramMessageId('nonsense'), undefined);
  });

  it('in a group, is addressed by an @mention (stripped), a /cmd@bot (normalised), a text_mention, a reply to the bot or its name', () => {
    const mention = run({ text: '@Switchy_Bot, what now?', entities: [{ type: 'mention', offset: 0, length: 12 }] })!.message;
    assert.equal(mention.direct, false);
    assert.equal(mention.addressed, true);
    assert.equal(mention.text, 'what now?');

    const middle = run({ text: 'hey @switchy_bot look', entities: [{ type: 'mention', offset: 4, length: 12 }] })!.message;
    assert.equal(middle.addressed, true);
    assert.equal(middle.text, 'hey @switchy_bot look', 'only a leading mention is stripped');

    const command = run({ text: '/new@switchy_bot', entities: [{ type: 'bot_command', offset: 0, length: 16 }] })!.message;
    assert.equal(command.addressed, true);
    assert.equal(command.text, '/new');

    assert.equal(run({ text: 'Switchy do it', entities: [{ type: 'text_mention', offset: 0, length: 7, user: { id: 42, is_bot: true, first_name: 'Switchy' } }] })!.message.addressed, true);
    assert.equal(run({ text: 'yes', reply_to_message: msg({ message_id: 3, from: { id: 42, is_bot: true, first_name: 'Switchy' }, text: 'ok?' }) })!.message.addressed, true);
    assert.equal(run({ text: 'Testbot, summarise' })!.message.addressed, true);
    assert.equal(run({ text: 'switchy: hi' })!.message.addressed, true);
  });

  it('in a group, is not addressed by chatter, other bots\' commands, or names inside words', () => {
    assert.equal(run({ text: 'just chatting' })!.message.addressed, false);
    assert.equal(run({ text: '@someone_else hi', entities: [{ type: 'mention', offset: 0, length: 13 }] })!.message.addressed, false);
    const other = run({ text: '/new@other_bot', entities: [{ type: 'bot_command', offset: 0, length: 14 }] })!.message;
    assert.equal(other.addressed, false);
    assert.equal(other.text, '/new@other_bot');
    assert.equal(run({ text: 'Testbots are fun' })!.message.addressed, false);
    assert.equal(run({ text: 'yes', reply_to_message: msg({ message_id: 3, from: alice, text: 'q' }) })!.message.addressed, false);
  });

  it('maps a forum topic to the thread; the topic creation "reply" is not a reply to the bot', () => {
    const created = msg({ message_id: 2, from: { id: 42, is_bot: true, first_name: 'Switchy' }, forum_topic_created: { name: 't', icon_color: 1 } });
    const result = run({ text: 'in the topic', is_topic_message: true, message_thread_id: 2, reply_to_message: created })!.message;
    assert.equal(result.thread, '2');
    assert.equal(result.chat, '-100123');
    assert.equal(result.addressed, false);
    assert.equal(run({ text: 'a reply thread, not a topic', message_thread_id: 5 })!.message.thread, undefined);
  });

  it('never returns the bot\'s own messages, other bots\' or service messages', () => {
    assert.equal(run({ from: { id: 42, is_bot: true, first_name: 'Switchy' }, text: 'me' }), undefined);
    assert.equal(run({ from: { id: 9, is_bot: true, first_name: 'Other' }, text: 'beep' }), undefined);
    assert.equal(run({ from: undefined, text: 'channel post' }), undefined);
    assert.equal(run({ new_chat_members: [alice] }), undefined);
  });

  it('lists files: the largest photo size, documents, voice; a file without text is still a message', () => {
    const photo = run({
      caption: 'look',
      photo: [
        { file_id: 'small', file_unique_id: 's', width: 90, height: 90, file_size: 100 },
        { file_id: 'big', file_unique_id: 'b', width: 800, height: 600, file_size: 9000 },
        { file_id: 'mid', file_unique_id: 'm', width: 320, height: 240, file_size: 1000 },
      ],
    })!;
    assert.equal(photo.message.text, 'look');
    assert.deepEqual(photo.files, [{ kind: 'photo', fileId: 'big', mime: 'image/jpeg', size: 9000 }]);
    const doc = run({ document: { file_id: 'd', file_unique_id: 'd', file_name: 'report.pdf', mime_type: 'application/pdf', file_size: 5 } })!;
    assert.equal(doc.message.text, '');
    assert.deepEqual(doc.files, [{ kind: 'file', fileId: 'd', name: 'report.pdf', mime: 'application/pdf', size: 5 }]);
    assert.deepEqual(filesOf(msg({ voice: { file_id: 'v', file_unique_id: 'v', duration: 2 } })), [{ kind: 'voice', fileId: 'v', mime: 'audio/ogg' }]);
  });

  it("takes a photo's largest size within the download limit, else the largest (described as over it)", () => {
    const sizes = {
      photo: [
        { file_id: 's', file_unique_id: 's', width: 90, height: 68, file_size: 2_000 },
        { file_id: 'x', file_unique_id: 'x', width: 800, height: 600, file_size: 90_000 },
        { file_id: 'w', file_unique_id: 'w', width: 2560, height: 1920, file_size: 900_000 },
      ],
    };
    assert.equal(filesOf(msg(sizes), 500_000)[0]!.fileId, 'x');
    assert.equal(filesOf(msg(sizes), 1_000)[0]!.fileId, 'w', 'none fits: the largest, which the store describes as over the limit');
    assert.equal(filesOf(msg(sizes))[0]!.fileId, 'w');
  });
});
