/**
 * Fuzzing the Matrix intake: a /sync response (events relayed from any server) → room state,
 * pushed messages and invites. A malformed event is left out and logged; the response as a
 * whole is still handled (a rejection would make the channel fetch it again, for ever).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import type { ChannelContext, InboundMessage } from '../../src/channel.ts';
import type { MatrixConfig } from './config.ts';
import { anyJson, exact, fuzz, fuzzAsync, nastyText, payload } from '../../test/support/fuzz.ts';
import { testLogger } from '../../test/support/log.ts';
import type { MatrixApi } from './client.ts';
import { classify, normalise, type BotIdentity, type RoomEvent } from './inbound.ts';
import { Intake } from './intake.ts';
import { BoundedMap } from '../../src/bounded-map.ts';
import { Rooms } from './rooms.ts';
import { checkSync } from './shape.ts';

const botId = '@switchboard:example.org';
const bot: BotIdentity = { userId: botId, names: ['Switchboard'] };
const userId = fc.constantFrom(botId, '@alice:example.org', '@bob:other.net');

function content(wobble: boolean) {
  const shape = wobble ? payload : exact;
  const opt = <T>(arbitrary: fc.Arbitrary<T>) => (wobble ? arbitrary : fc.option(arbitrary, { nil: undefined }));
  return shape({
    msgtype: fc.constantFrom('m.text', 'm.emote', 'm.notice', 'm.image', 'm.file', 'm.audio', 'm.video', 'm.location'),
    body: fc.oneof(nastyText(100), nastyText(30).map((t) => `> <@bob:other.net> quoted\n\n${t}`), nastyText(20).map((t) => `Switchboard: ${t}`)),
    formatted_body: opt(nastyText(40).map((t) => `<a href="https://matrix.to/#/${encodeURIComponent(botId)}">x</a> ${t}`)),
    filename: opt(nastyText(10)),
    url: opt(fc.constantFrom('mxc://example.org/abc', 'https://x', '')),
    info: opt(shape({ mimetype: fc.constantFrom('image/png', ''), size: fc.nat() })),
    'm.mentions': opt(shape({ user_ids: fc.array(userId, { maxLength: 2 }) })),
    'm.relates_to': opt(shape({ rel_type: fc.constantFrom('m.thread', 'm.replace', 'm.annotation'), event_id: fc.constant('$root'), is_falling_back: fc.boolean(), 'm.in_reply_to': shape({ event_id: fc.constant('$parent') }) })),
    membership: opt(fc.constantFrom('join', 'invite', 'leave')),
    displayname: opt(nastyText(10)),
    algorithm: opt(fc.constant('m.megolm.v1.aes-sha2')),
    is_direct: opt(fc.boolean()),
  });
}

function event(wobble: boolean): fc.Arbitrary<Record<string, unknown>> {
  const shape = wobble ? payload : exact;
  const opt = <T>(arbitrary: fc.Arbitrary<T>) => (wobble ? arbitrary : fc.option(arbitrary, { nil: undefined }));
  return shape({
    event_id: fc.string({ minLength: 1, maxLength: 12 }).map((s) => `$${s}`),
    type: fc.constantFrom('m.room.message', 'm.room.encrypted', 'm.room.member', 'm.room.encryption', 'm.reaction'),
    sender: userId,
    origin_server_ts: fc.integer({ min: 0, max: 2 ** 42 }),
    content: content(wobble),
    state_key: opt(userId),
  });
}

const room = fc.constantFrom('!a:example.org', '!b:other.net');
const events = fc.array(fc.oneof({ weight: 5, arbitrary: event(true) }, { weight: 1, arbitrary: anyJson }), { maxLength: 5 });
const sync = fc.oneof(
  { weight: 5, arbitrary: payload({
    next_batch: fc.string(),
    rooms: payload({
      join: fc.dictionary(room, payload({ state: payload({ events }), timeline: payload({ events, limited: fc.boolean(), prev_batch: fc.string() }) }), { maxKeys: 2 }),
      invite: fc.dictionary(room, payload({ invite_state: payload({ events }) }), { maxKeys: 1 }),
      leave: fc.dictionary(room, anyJson, { maxKeys: 1 }),
    }),
    account_data: payload({ events: fc.array(payload({ type: fc.constant('m.direct'), content: fc.dictionary(userId, fc.array(room)) }), { maxLength: 2 }) }),
  }) },
  { weight: 1, arbitrary: anyJson },
);

function intake() {
  const api = {
    userId: botId,
    token: 'secret',
    messages: async () => ({ chunk: [null, { type: 'x' }], end: undefined }),
    fetchEvent: async () => ({ sender: '@alice:example.org' }),
    join: async () => undefined,
    download: async () => new Uint8Array(),
  } as unknown as MatrixApi;
  const ctx = { name: 'matrix', assistantName: 'Testbot', attachments: { maxBytes: 0, save: async (input) => ({ kind: input.kind, name: input.name ?? 'f', size: 0, note: 'not saved' }) } } as ChannelContext;
  return new Intake({
    api, ctx, config: { allow: ['*'] } as unknown as MatrixConfig, rooms: new Rooms(), log: testLogger(),
    stats: { encryptedEvents: 0, invitesAccepted: 0, invitesIgnored: 0 }, senders: new BoundedMap(100), threadLatest: new BoundedMap(100), displayName: () => 'Switchboard',
  });
}

describe('matrix sync (fuzz)', () => {
  it('any /sync response is handled: malformed events are left out, the rest pushed; it never rejects', async (t) => {
    await fuzzAsync(t, 'matrix sync', sync, async (response) => {
      const pushed: InboundMessage[] = [];
      await intake().handle(response as never, { initial: false, since: 's1' }, async (message) => (pushed.push(message), 'accepted'));
      for (const message of pushed) {
        assert.equal(typeof message.id, 'string');
        assert.equal(typeof message.text, 'string');
        assert.ok(Number.isFinite(message.timestamp));
      }
    }, { runs: 300 });
  });

  it('checkSync keeps exactly the well-formed timeline events', (t) => {
    fuzz(t, 'matrix checkSync', sync, (response) => {
      const { response: checked } = checkSync(response);
      for (const joined of Object.values(checked.rooms?.join ?? {})) for (const e of joined.timeline?.events ?? []) assert.equal(typeof e.content, 'object');
    }, { runs: 300 });
  });

  it('a well-formed message event keeps its id, room, sender and timestamp', (t) => {
    fuzz(t, 'matrix event (valid)', fc.tuple(event(false), fc.boolean()), ([value, direct]) => {
      const e = value as unknown as RoomEvent;
      if (classify(e, botId).kind !== 'message') return;
      const result = normalise(e, bot, { channel: 'matrix', account: botId, assistantName: 'Testbot', roomId: '!a:example.org', direct, repliesToBot: false });
      if (result === undefined) return;
      assert.equal(result.message.id, e.event_id);
      assert.equal(result.message.chat, '!a:example.org');
      assert.equal(result.message.sender.id, e.sender);
      assert.equal(result.message.timestamp, e.origin_server_ts);
    }, { runs: 400 });
  });

  it('regression: an event whose content is null is skipped, not a TypeError that failed the whole sync', async () => {
    const pushed: InboundMessage[] = [];
    const timeline = { events: [{ event_id: '$1', type: 'm.room.message', sender: '@alice:example.org', origin_server_ts: 1, content: null }, { event_id: '$2', type: 'm.room.message', sender: '@alice:example.org', origin_server_ts: 2, content: { msgtype: 'm.text', body: 'hi' } }] };
    await intake().handle({ next_batch: 'n', rooms: { join: { '!a:example.org': { timeline } } } } as never, { initial: false, since: 's' }, async (m) => (pushed.push(m), 'accepted'));
    assert.deepEqual(pushed.map((m) => m.id), ['$2']);
  });
});
