/**
 * Fuzzing IRC input: any line the server sends (irc-framework's parser) → the PRIVMSG it
 * carries → the message pushed. Lines are bytes from anyone on the network: any text, any
 * tags, any target must give a message or nothing, never an exception.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import irc from 'irc-framework';
import { fuzz, nastyText } from '../../test/support/fuzz.ts';
import { normalise, privmsgOf, type Identity } from './inbound.ts';

const who: Identity = { channel: 'irc', configuredNick: 'Switchboard', currentNick: 'Switchboard_', assistantName: 'Testbot', chanTypes: '#&' };
const context = { statusPrefixes: '@+', chanTypes: '#&', nick: 'Switchboard_' };

const word = fc.oneof(fc.constantFrom('#chan', '@#chan', '+#Chan', 'Switchboard_', 'switchboard_', 'alice', '#', '', '*'), fc.string({ maxLength: 10 }));
const tags = fc.array(fc.tuple(fc.constantFrom('msgid', 'time', 'bot', 'draft/bot', 'x'), fc.oneof(fc.constantFrom('', '2026-01-01T00:00:00.000Z', 'nonsense'), fc.string({ maxLength: 10 }))), { maxLength: 3 })
  .map((pairs) => (pairs.length === 0 ? '' : `@${pairs.map(([k, v]) => (v === '' ? k : `${k}=${v}`)).join(';')} `));
const text = fc.oneof(nastyText(200), nastyText(50).map((t) => `\x01ACTION ${t}\x01`), nastyText(50).map((t) => `Switchboard_: ${t}`), nastyText(20).map((t) => `\x01VERSION${t}`));
const line = fc.oneof(
  { weight: 4, arbitrary: fc.tuple(tags, word, word, word, text).map(([t, nick, user, target, body]) => `${t}:${nick}!${user}@host PRIVMSG ${target} :${body}`) },
  { weight: 1, arbitrary: fc.tuple(tags, fc.constantFrom('NOTICE', 'JOIN', 'KICK', 'NICK', '001', 'PING', 'PRIVMSG'), fc.array(word, { maxLength: 4 })).map(([t, command, params]) => `${t}:x!y@z ${command} ${params.join(' ')}`) },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 600 }) },
);

describe('irc lines (fuzz)', () => {
  it('any line gives a message or nothing, with string ids and a lower-cased chat', (t) => {
    fuzz(t, 'irc line', line, (raw) => {
      const msg = irc.ircLineParser(raw);
      if (!msg || msg.command !== 'PRIVMSG') return;
      const privmsg = privmsgOf(msg, msg.params[0] ?? '', msg.params.at(-1) ?? '', context);
      if (!privmsg) return;
      const message = normalise(privmsg, who, 1_700_000_000_000);
      if (!message) return;
      assert.equal(typeof message.id, 'string');
      assert.ok(message.id !== '');
      assert.equal(message.chat, message.chat.replace(/[A-Z]/g, (c) => c.toLowerCase()));
      assert.equal(message.sender.id, privmsg.nick);
      assert.ok(Number.isFinite(message.timestamp));
      assert.equal(message.direct, !privmsg.target.startsWith('#') && !privmsg.target.startsWith('&'));
      // no IRC formatting codes survive
      assert.doesNotMatch(message.text, /[\x02\x0f\x1d\x1f]/); // eslint-disable-line no-control-regex
    }, { runs: 800 });
  });
});
