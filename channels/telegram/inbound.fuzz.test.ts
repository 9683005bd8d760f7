/**
 * Fuzzing the Telegram intake: a Bot API update (webhook body or getUpdates item) → the
 * message pushed, or a MalformedPayload the channel logs and skips. Never a TypeError.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import type { Message } from 'grammy/types';
import { MalformedPayload } from '../../src/inbound/malformed.ts';
import { anyJson, exact, fuzz, nastyText, noCrash, payload } from '../../test/support/fuzz.ts';
import { messageOf, normalise, type BotIdentity } from './inbound.ts';

const bot: BotIdentity = { id: 42, username: 'switchy_bot', firstName: 'Switchy' };
const options = { channel: 'telegram', account: '42', assistantName: 'Testbot' };

const user = (wobble: boolean) =>
  (wobble ? payload : exact)({ id: fc.oneof(fc.constant(42), fc.integer({ min: 1, max: 2 ** 40 })), is_bot: fc.boolean(), first_name: nastyText(20), last_name: nastyText(10), username: fc.constantFrom('switchy_bot', 'alice', '') });
const entity = (wobble: boolean) =>
  (wobble ? payload : exact)({
    type: fc.constantFrom('mention', 'bot_command', 'text_mention', 'bold', 'url'),
    offset: fc.integer({ min: -2, max: 60 }),
    length: fc.integer({ min: -2, max: 60 }),
    user: user(wobble),
  });
const file = (wobble: boolean) =>
  (wobble ? payload : exact)({ file_id: fc.string({ minLength: 1, maxLength: 20 }), file_size: fc.nat(), file_name: nastyText(20), mime_type: fc.constantFrom('image/png', 'audio/ogg', ''), width: fc.nat(5000), height: fc.nat(5000), is_animated: fc.boolean(), is_video: fc.boolean() });
const chat = (wobble: boolean) => (wobble ? payload : exact)({ id: fc.oneof(fc.integer({ min: -(2 ** 45), max: 2 ** 45 })), type: fc.constantFrom('private', 'group', 'supergroup', 'channel') });

function message(wobble: boolean): fc.Arbitrary<Record<string, unknown>> {
  const shape = wobble ? payload : exact;
  const opt = <T>(arbitrary: fc.Arbitrary<T>) => (wobble ? arbitrary : fc.option(arbitrary, { nil: undefined }));
  return shape({
    message_id: fc.integer({ min: 1, max: 2 ** 31 }),
    date: fc.integer({ min: 0, max: 2 ** 32 }),
    chat: chat(wobble),
    from: user(wobble),
    text: opt(nastyText(80)),
    caption: opt(nastyText(40)),
    entities: opt(fc.array(entity(wobble), { maxLength: 4 })),
    caption_entities: opt(fc.array(entity(wobble), { maxLength: 2 })),
    is_topic_message: opt(fc.boolean()),
    message_thread_id: opt(fc.nat()),
    reply_to_message: opt(shape({ from: user(wobble), forum_topic_created: fc.constant({}) })),
    photo: opt(fc.array(file(wobble), { maxLength: 3 })),
    document: opt(file(wobble)),
    voice: opt(file(wobble)),
    sticker: opt(file(wobble)),
  });
}

/** Runs the whole intake path of one update body; returns what it gave or the named error. */
function intake(update: unknown) {
  return noCrash(() => {
    const msg = messageOf(update);
    return msg === undefined ? undefined : normalise(msg, bot, options);
  });
}

describe('telegram updates (fuzz)', () => {
  it('any update body gives a message, nothing, or a MalformedPayload', (t) => {
    const update = fc.oneof(
      { weight: 4, arbitrary: payload({ update_id: fc.nat(), message: message(true) }) },
      { weight: 1, arbitrary: anyJson },
    );
    fuzz(t, 'telegram update', update, (body) => {
      const result = intake(body);
      if (result instanceof Error) assert.ok(result instanceof MalformedPayload, String(result));
    }, { runs: 600 });
  });

  it('a well-formed message keeps its ids, sender and text', (t) => {
    fuzz(t, 'telegram message (valid)', message(false), (msg) => {
      const result = normalise(msg as unknown as Message, bot, options);
      if (result === undefined) return;
      const { message: inbound, files } = result;
      const raw = msg as { chat: { id: number }; message_id: number; from: { id: number }; text?: string; caption?: string; date: number };
      assert.equal(inbound.id, `${raw.chat.id}:${raw.message_id}`);
      assert.equal(inbound.chat, String(raw.chat.id));
      assert.equal(inbound.sender.id, String(raw.from.id));
      assert.equal(inbound.timestamp, raw.date * 1000);
      assert.equal(typeof inbound.text, 'string');
      // the text only ever loses a leading mention and a /cmd@bot suffix
      assert.ok(inbound.text.length <= (raw.text ?? raw.caption ?? '').length);
      for (const f of files) assert.equal(typeof f.fileId, 'string');
    }, { runs: 400 });
  });

  it('regression: a JSON null or a string as the update body is skipped, not a TypeError', () => {
    assert.equal(intake(null), undefined);
    assert.equal(intake('update'), undefined);
    assert.equal(intake({ update_id: 1, message: 'x' }) instanceof MalformedPayload, true);
  });
});
