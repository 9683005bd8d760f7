/**
 * Fuzzing received mail: raw RFC 5322 bytes (headers, encoded words, transfer encodings,
 * nested multiparts, broken charsets, plain garbage) through mailparser and the channel's
 * screening, threading and normalisation — the steps readMail (intake.ts) takes between
 * fetching a mail and pushing it. A mail gives a message, a reason not to answer it, or an
 * error readMail catches (logged, the mail marked read); never a TypeError, which would end
 * the listen and make the same UNSEEN mail fail again on every restart.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { simpleParser } from 'mailparser';
import { fuzzAsync, isCrash, nastyText } from '../../test/support/fuzz.ts';
import { knownThread, namedIds, normalise, parentReferences, screen } from './inbound.ts';
import { ThreadBook } from './threads.ts';

const self = 'bot@example.org';
const id = fc.oneof(fc.constantFrom('<a@x>', '<b@y>', '<a@x> <b@y>', '<>', '<<x>>', 'no-brackets', ''), nastyText(20));
const encodedWord = fc.tuple(fc.constantFrom('utf-8', 'iso-8859-1', 'x-unknown', 'utf-7', 'iso-2022-jp', ''), fc.constantFrom('B', 'Q', 'X'), fc.string({ maxLength: 20 }))
  .map(([charset, enc, data]) => `=?${charset}?${enc}?${enc === 'B' ? Buffer.from(data).toString('base64') : data}?=`);
const headerValue = fc.oneof(nastyText(40), encodedWord, fc.constantFrom('Alice <alice@example.org>', '"Bob" <bob@x>', 'undisclosed-recipients:;', 'group: a@b, c@d;', '<>', 'mailer-daemon@x', self));
const header = fc.tuple(
  fc.constantFrom('From', 'To', 'Subject', 'Message-ID', 'References', 'In-Reply-To', 'Date', 'Auto-Submitted', 'Precedence', 'List-Id', 'Return-Path', 'Content-Type', 'Content-Transfer-Encoding', 'X-Whatever'),
  fc.oneof(headerValue, id, fc.constantFrom('Tue, 1 Nov 2022 10:00:00 +0000', 'yesterday', 'text/plain; charset=utf-8', 'text/html; charset="x-nope"', 'multipart/mixed; boundary=b1', 'multipart/report', 'base64', 'quoted-printable', '8bit')),
).map(([key, value]) => `${key}: ${value}`);

function part(depth: number): fc.Arbitrary<string> {
  const leaf = fc.tuple(
    fc.constantFrom('text/plain; charset=utf-8', 'text/html; charset=iso-8859-1', 'text/plain; charset=bogus', 'application/pdf; name="a.pdf"', 'image/png', 'text/plain'),
    fc.constantFrom('base64', 'quoted-printable', '7bit', 'x-unknown'),
    fc.oneof(nastyText(200), fc.constantFrom('=E9=ZZ=\n=', '!!!notbase64', '<p>Hi <b>there</b><blockquote>old</blockquote></p>', '-- \nsig')),
  ).map(([type, encoding, body]) => `Content-Type: ${type}\r\nContent-Transfer-Encoding: ${encoding}\r\n\r\n${body}`);
  if (depth === 0) return leaf;
  const multi = fc.tuple(fc.constantFrom('mixed', 'alternative', 'related'), fc.array(part(depth - 1), { maxLength: 3 }), fc.boolean())
    .map(([kind, parts, closed]) => `Content-Type: multipart/${kind}; boundary="b${depth}"\r\n\r\n${parts.map((p) => `--b${depth}\r\n${p}\r\n`).join('')}${closed ? `--b${depth}--\r\n` : ''}`);
  return fc.oneof(leaf, multi);
}

const mail = fc.oneof(
  { weight: 5, arbitrary: fc.tuple(fc.array(header, { maxLength: 10 }), part(2)).map(([headers, body]) => `${headers.join('\r\n')}\r\n${body}`) },
  { weight: 1, arbitrary: fc.uint8Array({ maxLength: 500 }).map((bytes) => Buffer.from(bytes).toString('latin1')) },
  { weight: 1, arbitrary: nastyText(300) },
);

describe('email (fuzz)', () => {
  it('any raw mail is screened, threaded and normalised, or refused by a named error', async (t) => {
    const book = new ThreadBook();
    await fuzzAsync(t, 'email mail', mail, async (raw) => {
      const source = Buffer.from(raw, 'utf8');
      const headerEnd = source.indexOf('\r\n\r\n');
      const headerBlock = headerEnd === -1 ? source : source.subarray(0, headerEnd);
      let parsed;
      try {
        parsed = await simpleParser(source);
      } catch (error) {
        assert.ok(!isCrash(error), `mailparser crashed: ${String(error)}`); // readMail catches it either way
        return;
      }
      const screened = screen(await simpleParser(headerBlock), headerBlock, self);
      assert.match(screened.id, /^<.+>$/);
      if (screened.guard) return;
      const headers = { ...(parsed.references === undefined ? {} : { references: parsed.references }), ...(parsed.inReplyTo === undefined ? {} : { inReplyTo: parsed.inReplyTo }) };
      const chat = knownThread(headers, screened.from ?? '', book);
      namedIds(headers);
      let message;
      try {
        message = normalise(parsed, { channel: 'email', account: self, messageId: screened.id, receivedAt: 0, ...(chat === undefined ? {} : { chat }) });
      } catch (error) {
        assert.ok(!isCrash(error), `normalise crashed: ${String(error)}`);
        return;
      }
      await book.record({ id: message.id, chat: message.chat, address: message.sender.id, subject: parsed.subject ?? '', references: parentReferences(parsed) });
      assert.equal(typeof message.text, 'string');
      assert.ok(Number.isFinite(message.timestamp));
      assert.ok(message.chat.length > 0);
      assert.equal(message.sender.id, message.sender.id.toLowerCase());
    }, { runs: 250 });
  });
});
