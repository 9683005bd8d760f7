/**
 * Fuzzing the Discord intake: a MESSAGE_CREATE dispatch (or a REST message) → the message
 * pushed, or a MalformedPayload the intake logs and skips. Never a TypeError, never a stuck
 * position.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import type { AttachmentStore, InboundMessage } from '../../src/channel.ts';
import { MalformedPayload } from '../../src/inbound/malformed.ts';
import { anyJson, exact, fuzz, fuzzAsync, nastyText, noCrash, payload } from '../../test/support/fuzz.ts';
import { testLogger } from '../../test/support/log.ts';
import { normalise, type BotIdentity, type RawMessage } from './inbound.ts';
import { Intake } from './intake.ts';

const bot: BotIdentity = { id: '900', names: ['testbot', 'Testbot Assistant'] };
const snowflake = fc.bigInt({ min: 1n, max: 2n ** 63n - 1n }).map(String);

const user = (shape: typeof payload) => shape({ id: fc.oneof(fc.constant('900'), snowflake), username: nastyText(16), global_name: fc.option(nastyText(16)), bot: fc.boolean() });
function message(wobble: boolean): fc.Arbitrary<Record<string, unknown>> {
  const shape = wobble ? payload : exact;
  const opt = <T>(arbitrary: fc.Arbitrary<T>) => (wobble ? arbitrary : fc.option(arbitrary, { nil: undefined }));
  const content = fc.oneof(nastyText(120), fc.tuple(nastyText(20), snowflake).map(([text, id]) => `<@${id}> ${text} <@!900>`), nastyText(20).map((text) => `/new@testbot ${text}`));
  return shape({
    id: snowflake,
    channel_id: snowflake,
    guild_id: opt(snowflake),
    channel_type: opt(fc.constantFrom(0, 1, 3, 5, 10, 11, 12)),
    author: user(shape),
    member: opt(fc.option(shape({ nick: fc.option(nastyText(10)) }))),
    content,
    timestamp: opt(fc.oneof(fc.date({ noInvalidDate: true }).map((d) => d.toISOString()), nastyText(10))),
    type: opt(fc.constantFrom(0, 19, 7)),
    flags: opt(fc.nat()),
    mentions: opt(fc.array(user(shape), { maxLength: 3 })),
    message_reference: opt(fc.option(shape({ message_id: snowflake }))),
    referenced_message: opt(fc.option(shape({ author: user(shape) }))),
    attachments: opt(fc.array(shape({ id: snowflake, filename: nastyText(20), size: fc.nat(), url: fc.webUrl(), content_type: fc.constantFrom('image/png', 'audio/ogg', 'text/plain') }), { maxLength: 2 })),
  });
}

describe('discord messages (fuzz)', () => {
  it('any dispatch gives a message, nothing, or a MalformedPayload', (t) => {
    const raw = fc.oneof({ weight: 4, arbitrary: message(true) }, { weight: 1, arbitrary: anyJson });
    fuzz(t, 'discord message', raw, (value) => {
      const result = noCrash(() => normalise(value as RawMessage, { channel: 'discord', bot, info: { type: 0 }, sentByBot: () => false }));
      if (result instanceof Error) assert.ok(result instanceof MalformedPayload, String(result));
    }, { runs: 600 });
  });

  it('a well-formed message keeps its ids, sender and a finite timestamp', (t) => {
    const info = fc.record({ type: fc.constantFrom(0, 1, 3, 5, 11), parentId: snowflake });
    fuzz(t, 'discord message (valid)', fc.tuple(message(false), info), ([value, where]) => {
      const raw = value as unknown as RawMessage;
      const result = normalise(raw, { channel: 'discord', bot, info: where, sentByBot: () => false });
      if (result === undefined) return;
      assert.equal(result.id, raw.id);
      assert.equal(result.sender.id, raw.author.id);
      assert.equal(typeof result.text, 'string');
      assert.ok(Number.isFinite(result.timestamp));
      assert.equal(result.chat, [11].includes(where.type) ? where.parentId : raw.channel_id);
    }, { runs: 400 });
  });

  it('the intake pushes or skips every dispatch and always moves past it (no poison message)', async (t) => {
    const saved: AttachmentStore = { maxBytes: 0, save: async (input) => ({ kind: input.kind, name: input.name ?? 'f', size: 0, note: 'not saved' }) };
    await fuzzAsync(t, 'discord intake', fc.array(fc.oneof({ weight: 3, arbitrary: message(true) }, { weight: 1, arbitrary: anyJson }), { maxLength: 5 }), async (batch) => {
      const intake = new Intake({ name: 'discord', log: testLogger(), attachments: saved, rest: undefined as never, channelInfo: async () => ({ type: 0 }), sentByBot: () => false });
      const pushed: InboundMessage[] = [];
      const run = intake.start(async (message) => (pushed.push(message), 'accepted'), new AbortController().signal);
      run.identify(bot);
      for (const raw of batch) run.received(raw as RawMessage);
      await run.idle();
      let failed: unknown;
      await Promise.race([run.failed.catch((error: unknown) => (failed = error)), Promise.resolve()]);
      assert.equal(failed, undefined, `the intake failed: ${String(failed)}`);
      await run.stop();
    }, { runs: 150 });
  });

  it('regression: a message without content (or with a non-string id) is skipped, and the position moves past it', async () => {
    const intake = new Intake({ name: 'discord', log: testLogger(), attachments: undefined as never, rest: undefined as never, channelInfo: async () => ({ type: 0 }), sentByBot: () => false });
    const pushed: InboundMessage[] = [];
    const run = intake.start(async (message) => (pushed.push(message), 'accepted'), new AbortController().signal);
    run.identify(bot);
    run.received({ id: '10', channel_id: '5', author: { id: '1' } } as unknown as RawMessage); // was: TypeError on content.trim(), the run failed, and a restart re-read it for ever
    run.received({ id: 11, channel_id: '5' } as unknown as RawMessage);
    run.received({ id: '12', channel_id: '5', author: { id: '1', username: 'a' }, content: 'hi' });
    await run.idle();
    assert.deepEqual(pushed.map((m) => m.id), ['12']);
    await run.stop();
  });
});
