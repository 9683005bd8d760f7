import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { htmlToPlain, stripQuotesAndSignature } from './text.ts';

describe('email text: quoted history and signatures', () => {
  it('drops a top-posted reply\'s "On … wrote:" block and the quoted lines', () => {
    const mail = 'Sounds good, see you at 12.\n\nOn Mon, 1 Jun 2026 at 10:00, Testbot <bot@example.org> wrote:\n> Shall we meet at noon?\n>\n> > earlier\n';
    assert.equal(stripQuotesAndSignature(mail), 'Sounds good, see you at 12.');
  });

  it('keeps the answers between quoted parts (interleaved replies)', () => {
    const mail = 'On Tue, Bob wrote:\n> What time?\nNoon.\n> Where?\nAt the square.';
    assert.equal(stripQuotesAndSignature(mail), 'Noon.\nAt the square.');
  });

  it('recognises an attribution wrapped over two lines and other languages', () => {
    assert.equal(stripQuotesAndSignature('Yes.\n\nOn Mon, 1 Jun 2026 at 10:00 Alice Liddell <\nalice@example.org> wrote:\n> question'), 'Yes.');
    assert.equal(stripQuotesAndSignature('Oui.\n\nLe lun. 1 juin 2026, Alice a écrit :\n> question'), 'Oui.');
    assert.equal(stripQuotesAndSignature('Ja.\n\nAm 01.06.2026 um 10:00 schrieb Alice <a@b.c>:\n> Frage'), 'Ja.');
  });

  it('keeps a line that merely starts with "On" when no quote follows', () => {
    assert.equal(stripQuotesAndSignature('On Monday I wrote: the report.\nIs it fine?'), 'On Monday I wrote: the report.\nIs it fine?');
  });

  it('cuts the signature at "-- " (and "--")', () => {
    assert.equal(stripQuotesAndSignature('Thanks!\n\n-- \nAlice Liddell\nWonderland Ltd.'), 'Thanks!');
    assert.equal(stripQuotesAndSignature('Thanks!\n--\nAlice'), 'Thanks!');
    assert.equal(stripQuotesAndSignature('a -- b stays'), 'a -- b stays');
  });

  it("cuts Outlook's original-message block and a mobile footer", () => {
    assert.equal(stripQuotesAndSignature('Approved.\n\n-----Original Message-----\nFrom: Bob\nSent: Monday\nSubject: Budget\n\nIs it approved?'), 'Approved.');
    assert.equal(stripQuotesAndSignature('Approved.\n\nFrom: Bob <bob@example.org>\nSent: Monday, 1 June 2026 10:00\nTo: Alice\nSubject: Budget\n\nIs it approved?'), 'Approved.');
    assert.equal(stripQuotesAndSignature('On my way.\n\nSent from my iPhone'), 'On my way.');
  });

  it('keeps a forwarded mail (it is what the person wants read) and everything when it is all quote', () => {
    assert.equal(stripQuotesAndSignature('FYI\n\n---------- Forwarded message ---------\nFrom: Carol\nhello'), 'FYI\n\n---------- Forwarded message ---------\nFrom: Carol\nhello');
    assert.equal(stripQuotesAndSignature('> only a quote'), '> only a quote');
  });

  it('squeezes blank lines and trailing spaces; CRLF becomes LF', () => {
    assert.equal(stripQuotesAndSignature('a  \r\n\r\n\r\n\r\nb\r\n'), 'a\n\nb');
  });

  it('turns an HTML body into text whose quotes are then stripped', () => {
    const html = '<div>Hello <b>there</b>, see <a href="https://x.example/a">the plan</a>.</div><img src="cid:logo"><div class="gmail_quote">On Mon, Bob wrote:<blockquote>old stuff</blockquote></div>';
    const text = htmlToPlain(html);
    assert.match(text, /Hello there, see the plan \[https:\/\/x\.example\/a\]\./);
    assert.match(text, /^> old stuff$/m);
    assert.equal(stripQuotesAndSignature(text), 'Hello there, see the plan [https://x.example/a].');
  });

  it('reads text nested as deep as real mail, and survives thousands of unclosed tags (fuzz seed 1232040579)', () => {
    assert.equal(htmlToPlain(`${'<div>'.repeat(100)}deep text${'</div>'.repeat(100)}`).trim(), 'deep text');
    assert.doesNotThrow(() => htmlToPlain('<tool_call>{'.repeat(4000)));
    assert.doesNotThrow(() => htmlToPlain('<div>'.repeat(20_000)));
  });
});
