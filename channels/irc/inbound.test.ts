import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { addressing, ircLower, makeId, mentions, normalise, parseCtcp, stripFormatting, type Identity, type IrcPrivmsg } from './inbound.ts';

const who: Identity = { channel: 'irc', configuredNick: 'switchboard', currentNick: 'switchboard_', assistantName: 'Testbot', chanTypes: '#&' };
const privmsg = (over: Partial<IrcPrivmsg>): IrcPrivmsg => ({ nick: 'Alice', ident: '~alice', hostname: 'host.test', target: '#Room', text: 'hi', tags: {}, ...over });

describe('irc inbound: addressed detection', () => {
  const names = ['switchboard_', 'switchboard'];

  it('takes "nick: …" and "nick, …" (current or configured nick, any case) and strips it', () => {
    for (const text of ['switchboard: what now?', 'Switchboard, what now?', 'SWITCHBOARD_:what now?', '@switchboard: what now?', '  switchboard ,  what now?']) {
      assert.deepEqual(addressing(text, names, 'Testbot'), { addressed: true, text: 'what now?' }, text);
    }
  });

  it('takes the nick or the assistant name as the first word, keeping the text', () => {
    assert.deepEqual(addressing('switchboard what now?', names, 'Testbot'), { addressed: true, text: 'switchboard what now?' });
    assert.deepEqual(addressing('testbot, what now?', names, 'Testbot'), { addressed: true, text: 'testbot, what now?' });
    assert.deepEqual(addressing('Testbot', names, 'Testbot'), { addressed: true, text: 'Testbot' });
  });

  it('ignores the nick elsewhere, or as part of a longer word', () => {
    for (const text of ['hello switchboard', 'switchboards: are great', 'testbots rule', 'just chatting']) {
      assert.equal(addressing(text, names, 'Testbot').addressed, false, text);
    }
  });

  it('finds the bot named anywhere in an action', () => {
    assert.equal(mentions('pokes switchboard gently', names), true);
    assert.equal(mentions('pokes switchboards', names), false);
  });
});

describe('irc inbound: normalisation', () => {
  it('a channel message: chat = the channel lower-cased, sender nick with its hostmask alias', () => {
    const message = normalise(privmsg({ text: 'switchboard: Hello there' }), who, 1_700_000_000_000)!;
    assert.equal(message.channel, 'irc');
    assert.equal(message.account, 'switchboard', 'the account is the configured nick, not the alternate');
    assert.equal(message.chat, '#room');
    assert.equal(message.thread, undefined);
    assert.equal(message.direct, false);
    assert.equal(message.addressed, true);
    assert.equal(message.text, 'Hello there');
    assert.deepEqual(message.sender, { id: 'Alice', name: 'Alice', aliases: ['Alice!~alice@host.test'] });
    assert.equal(message.timestamp, 1_700_000_000_000);
  });

  it('an unaddressed channel message is pushed as context, not addressed', () => {
    const message = normalise(privmsg({ text: 'just chatting' }), who)!;
    assert.equal(message.addressed, false);
    assert.equal(message.text, 'just chatting');
  });

  it('a private message: chat = the sender lower-cased, direct and addressed', () => {
    const message = normalise(privmsg({ target: 'switchboard_', text: 'hello' }), who)!;
    assert.equal(message.chat, 'alice');
    assert.equal(message.direct, true);
    assert.equal(message.addressed, true);
  });

  it('ids: the IRCv3 msgid when present, else unique; server-time when present', () => {
    const tagged = normalise(privmsg({ tags: { msgid: 'abc123', time: '2025-01-02T03:04:05.678Z' } }), who)!;
    assert.equal(tagged.id, 'msgid:abc123');
    assert.equal(tagged.timestamp, Date.parse('2025-01-02T03:04:05.678Z'));
    const ids = new Set(Array.from({ length: 1000 }, () => normalise(privmsg({}), who, 42)!.id));
    assert.equal(ids.size, 1000, 'unique even within one millisecond');
    assert.notEqual(makeId(1), makeId(1));
  });

  it('never pushes our own messages, bot-tagged ones, or CTCP queries', () => {
    assert.equal(normalise(privmsg({ nick: 'SwitchBoard_' }), who), undefined);
    assert.equal(normalise(privmsg({ tags: { bot: true } }), who), undefined);
    assert.equal(normalise(privmsg({ text: '\x01VERSION\x01', target: 'switchboard_' }), who), undefined);
    assert.equal(normalise(privmsg({ text: '\x01PING 123\x01' }), who), undefined);
    assert.equal(normalise(privmsg({ nick: '' }), who), undefined, 'a server message');
  });

  it('takes an ACTION as "* nick text", addressed when it names the bot', () => {
    const poke = normalise(privmsg({ text: '\x01ACTION pokes switchboard\x01' }), who)!;
    assert.equal(poke.text, '* Alice pokes switchboard');
    assert.equal(poke.addressed, true);
    assert.equal(normalise(privmsg({ text: '\x01ACTION waves\x01' }), who)!.addressed, false);
    assert.equal(normalise(privmsg({ text: '\x01ACTION waves\x01', target: 'switchboard_' }), who)!.addressed, true);
  });

  it('strips colour and bold codes people type', () => {
    assert.equal(stripFormatting('\x02bold\x02 \x0304,01red\x03 \x1ditalic\x1d\x0f'), 'bold red italic');
    assert.equal(normalise(privmsg({ text: '\x02switchboard\x02: \x0312hi' }), who)!.text, 'hi');
  });

  it('parses CTCP and lower-cases only ASCII', () => {
    assert.deepEqual(parseCtcp('\x01ACTION waves hello\x01'), { command: 'ACTION', text: 'waves hello' });
    assert.deepEqual(parseCtcp('\x01version\x01'), { command: 'VERSION', text: '' });
    assert.equal(parseCtcp('plain'), undefined);
    assert.equal(ircLower('#Straße-ÄÖ[X]'), '#straße-ÄÖ[x]');
  });
});
