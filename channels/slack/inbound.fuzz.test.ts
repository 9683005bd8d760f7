/**
 * Fuzzing the Slack intake: Events API envelopes (Socket Mode and HTTP deliver the same
 * `event`) → the message pushed, or logged and skipped; and the HTTP request signature.
 */
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { describe, it } from 'node:test';
import { isValidSlackRequest } from '@slack/bolt';
import fc from 'fast-check';
import { pino } from 'pino';
import type { InboundMessage } from '../../src/channel.ts';
import { MalformedPayload } from '../../src/inbound/malformed.ts';
import { anyJson, exact, fuzz, fuzzAsync, nastyText, noCrash, payload } from '../../test/support/fuzz.ts';
import type { SlackWebClient } from './app.ts';
import { fromTheFuture } from './http.ts';
import { isMessageEvent, normalise, type SlackMessageEvent } from './inbound.ts';
import { BotThreads, Intake } from './intake.ts';
import { testChannelState } from '../../test/support/channel-state.ts';

const identity = { userId: 'U0BOT', botId: 'B0BOT', teamId: 'T1', names: ['testbot'] };
const ts = fc.tuple(fc.integer({ min: 1_000_000_000, max: 2_000_000_000 }), fc.integer({ min: 0, max: 999_999 })).map(([s, us]) => `${s}.${String(us).padStart(6, '0')}`);

function event(wobble: boolean): fc.Arbitrary<Record<string, unknown>> {
  const shape = wobble ? payload : exact;
  const opt = <T>(arbitrary: fc.Arbitrary<T>) => (wobble ? arbitrary : fc.option(arbitrary, { nil: undefined }));
  const text = fc.oneof(nastyText(100), nastyText(30).map((t) => `<@U0BOT> ${t} <#C1|general> <https://x.y|x> &amp;`));
  return shape({
    type: fc.constantFrom('message', 'app_mention'),
    subtype: opt(fc.constantFrom('file_share', 'thread_broadcast', 'message_changed', 'bot_message')),
    channel: fc.constantFrom('C1', 'D1', 'G1'),
    channel_type: opt(fc.constantFrom('im', 'channel', 'group')),
    user: fc.constantFrom('U1', 'U2', 'U0BOT'),
    bot_id: opt(fc.constant('B9')),
    text: opt(text),
    ts,
    thread_ts: opt(ts),
    parent_user_id: opt(fc.constantFrom('U0BOT', 'U1')),
    files: opt(fc.array(shape({ id: fc.string(), name: nastyText(20), mimetype: fc.constantFrom('image/png', 'text/plain'), size: fc.nat(), mode: fc.constantFrom('hosted', 'tombstone') }), { maxLength: 2 })),
    user_profile: opt(shape({ display_name: nastyText(10), real_name: nastyText(10) })),
  });
}

/** One journal for every run (a database per run would cost more than the runs). */
const journal = testChannelState();

function receiver(pushed: InboundMessage[]) {
  const web = {
    users: { info: async () => ({ ok: true, user: { name: 'someone' } }) },
    conversations: { replies: async () => ({ ok: true, messages: [] }) },
  } as unknown as SlackWebClient;
  const intake = new Intake({
    channel: 'slack',
    identity,
    web,
    botToken: 'xoxb-x',
    fileOrigins: () => false,
    attachments: { maxBytes: 0, save: async (input) => ({ kind: input.kind, name: input.name ?? 'f', size: 0, note: 'not saved' }) },
    threads: new BotThreads(),
    log: pino({ level: 'silent' }),
    journal,
    signal: new AbortController().signal,
  });
  return async (value: unknown) => {
    await intake.handle(value, async (message) => (pushed.push(message), 'accepted'));
    await intake.settled();
  };
}

describe('slack events (fuzz)', () => {
  it('any event gives a message, nothing, or a MalformedPayload', (t) => {
    fuzz(t, 'slack event', fc.oneof({ weight: 4, arbitrary: event(true) }, { weight: 1, arbitrary: anyJson }), (value) => {
      if (!isMessageEvent(value)) return;
      const result = noCrash(() => normalise(value, { channel: 'slack', identity, botInThread: () => false }));
      if (result instanceof Error) assert.ok(result instanceof MalformedPayload, String(result));
    }, { runs: 600 });
  });

  it('a well-formed message keeps its ids: <channel>:<ts>, the sender, a thread only when it is one', (t) => {
    fuzz(t, 'slack event (valid)', event(false), (value) => {
      const e = value as unknown as SlackMessageEvent;
      const result = normalise(e, { channel: 'slack', identity, botInThread: () => false });
      if (result === undefined) return;
      assert.equal(result.message.id, `${e.channel}:${e.ts}`);
      assert.equal(result.message.sender.id, e.user);
      assert.ok(Number.isFinite(result.message.timestamp));
      if (result.message.thread !== undefined) assert.ok(result.message.thread === e.thread_ts || result.message.thread === e.ts);
    }, { runs: 400 });
  });

  it('the receiver resolves for every event (acknowledged: pushed or deliberately skipped), never rejects', async (t) => {
    await fuzzAsync(t, 'slack receiver', fc.oneof({ weight: 4, arbitrary: event(true) }, { weight: 1, arbitrary: anyJson }), async (value) => {
      const pushed: InboundMessage[] = [];
      await receiver(pushed)(value);
    }, { runs: 300 });
  });

  it('regression: an event whose text is not a string is skipped (was a TypeError: Slack redelivered it, failing each time)', async () => {
    const pushed: InboundMessage[] = [];
    await receiver(pushed)({ type: 'message', channel: 'D1', user: 'U1', ts: '1700000000.000100', text: 42 });
    await receiver(pushed)({ type: 'message', channel: 'D1', user: 'U1', ts: '1700000000.000200', text: 'hi', files: [null] });
    assert.deepEqual(pushed, []);
  });
});

describe('slack request signatures (fuzz)', () => {
  const secret = 'signing-secret';
  const sign = (timestamp: string, body: string) => `v0=${createHmac('sha256', secret).update(`v0:${timestamp}:${body}`).digest('hex')}`;

  it('random bodies and headers never verify; a correct signature does; malformed headers never throw', (t) => {
    const header = fc.oneof(fc.constant(undefined), nastyText(20), fc.uint8Array({ minLength: 32, maxLength: 32 }).map((b) => Buffer.from(b).toString('hex')).map((h) => `v0=${h}`));
    fuzz(t, 'slack signature', fc.tuple(nastyText(200), header, fc.oneof(fc.constant(undefined), fc.integer().map(String), nastyText(8))), ([body, signature, timestamp]) => {
      const now = Math.floor(Date.now() / 1000);
      const headers = { 'x-slack-signature': signature as string, 'x-slack-request-timestamp': timestamp === undefined ? (undefined as unknown as number) : (timestamp as unknown as number) };
      assert.equal(isValidSlackRequest({ signingSecret: secret, body, headers }), false);
      assert.equal(isValidSlackRequest({ signingSecret: secret, body, headers: { 'x-slack-signature': sign(String(now), body), 'x-slack-request-timestamp': now } }), true);
      assert.equal(isValidSlackRequest({ signingSecret: secret, body: `${body} `, headers: { 'x-slack-signature': sign(String(now), body), 'x-slack-request-timestamp': now } }), false);
      assert.equal(typeof fromTheFuture(timestamp), 'boolean');
    }, { runs: 400 });
  });
});
