import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { simpleParser } from 'mailparser';
import {
  composeText,
  headerValue,
  knownThread,
  loopGuard,
  messageIds,
  namedIds,
  normalise,
  parentReferences,
  replySubject,
  syntheticMessageId,
  threadRoot,
  type KnownMail,
  type RawHeaders,
} from './inbound.ts';
import { ThreadBook } from './threads.ts';

const self = 'bot@example.org';
/** Header lines as mailparser gives them. */
const headers = (lines: Record<string, string>): RawHeaders => Object.entries(lines).map(([key, value]) => ({ key: key.toLowerCase(), line: `${key}: ${value}` }));

describe('email inbound: the loop guard', () => {
  it('lets an ordinary mail through', () => {
    assert.equal(loopGuard(headers({ From: 'alice@example.org', 'Auto-Submitted': 'no', Precedence: 'normal' }), 'alice@example.org', self), undefined);
  });

  it('refuses Auto-Submitted other than "no" (with parameters, any case)', () => {
    assert.equal(loopGuard(headers({ 'Auto-Submitted': 'auto-replied' }), 'alice@example.org', self), 'Auto-Submitted: auto-replied');
    assert.equal(loopGuard(headers({ 'Auto-Submitted': 'Auto-Generated; owner-email="x@y"' }), 'alice@example.org', self), 'Auto-Submitted: auto-generated');
  });

  it('refuses bulk, list and junk precedence, and mailing lists', () => {
    for (const precedence of ['bulk', 'list', 'junk', 'Bulk']) assert.match(loopGuard(headers({ Precedence: precedence }), 'a@example.org', self) ?? '', /^Precedence/);
    assert.equal(loopGuard(headers({ 'List-Id': '<news.example.org>' }), 'a@example.org', self), 'mailing list (list-id)');
    assert.equal(loopGuard(headers({ 'List-Unsubscribe': '<mailto:x@y>' }), 'a@example.org', self), 'mailing list (list-unsubscribe)');
  });

  it('refuses autoresponders, bounces and delivery reports', () => {
    assert.equal(loopGuard(headers({ 'X-Autoreply': 'yes' }), 'a@example.org', self), 'autoresponder (x-autoreply)');
    assert.equal(loopGuard(headers({ 'X-Autorespond': 'Away' }), 'a@example.org', self), 'autoresponder (x-autorespond)');
    assert.equal(loopGuard(headers({ 'Return-Path': '<>' }), 'a@example.org', self), 'bounce (Return-Path <>)');
    assert.equal(loopGuard(headers({ 'Content-Type': 'multipart/report; report-type=delivery-status' }), 'a@example.org', self), 'delivery report (multipart/report)');
  });

  it('refuses robot senders and the bot itself', () => {
    for (const from of ['mailer-daemon@mx.example.org', 'MAILER-DAEMON@x.y', 'postmaster@x.y', 'noreply@x.y', 'no-reply@x.y', 'no_reply+tag@x.y', 'donotreply@x.y', 'do-not-reply@x.y', 'noreply-billing@x.y']) {
      assert.match(loopGuard([], from.toLowerCase(), self) ?? '', /automated sender/, from);
    }
    assert.equal(loopGuard([], 'bot@example.org', 'Bot@Example.org'), 'sent by the bot itself');
    assert.equal(loopGuard([], undefined, self), 'no From address');
    assert.equal(loopGuard([], 'replyguy@x.y', self), undefined, 'a name containing "reply" is a person');
  });

  it('reads folded header values', () => {
    assert.equal(headerValue([{ key: 'auto-submitted', line: 'Auto-Submitted:\r\n auto-replied' }], 'Auto-Submitted'), 'auto-replied');
  });
});

describe('email inbound: threads and subjects', () => {
  it('finds the thread root: first of References, else In-Reply-To, else the own id', () => {
    assert.equal(threadRoot({ references: ['<root@x>', '<mid@x>'], inReplyTo: '<mid@x>', messageId: '<me@x>' }), '<root@x>');
    assert.equal(threadRoot({ references: '<root@x> <mid@x>', messageId: '<me@x>' }), '<root@x>');
    assert.equal(threadRoot({ inReplyTo: '<parent@x>', messageId: '<me@x>' }), '<parent@x>');
    assert.equal(threadRoot({ messageId: '<me@x>' }), '<me@x>');
    assert.deepEqual(messageIds('<a@x>  <b@x>\r\n <c@x>'), ['<a@x>', '<b@x>', '<c@x>']);
    // a broken References header (fuzz seed 1887759513) can reach here as another shape: no ids, no crash
    assert.deepEqual(messageIds({ value: '<a@x>' } as unknown as string), []);
    assert.deepEqual(messageIds(['<a@x>', 7 as unknown as string]), ['<a@x>']);
  });

  it('makes "Re:" subjects without piling prefixes up', () => {
    assert.equal(replySubject('Lunch'), 'Re: Lunch');
    assert.equal(replySubject('Re: Lunch'), 'Re: Lunch');
    assert.equal(replySubject('RE: re: Aw: Lunch'), 'Re: Lunch');
    assert.equal(replySubject('Re[2]: Lunch'), 'Re: Lunch');
    assert.equal(replySubject(''), 'Re: (no subject)');
    assert.equal(replySubject('Regarding lunch'), 'Re: Regarding lunch');
  });

  it('gives the model the subject of a thread\'s first mail, unless it adds nothing', () => {
    assert.equal(composeText('Lunch plans', 'Where shall we eat?', true), 'Subject: Lunch plans\n\nWhere shall we eat?');
    assert.equal(composeText('Re: Lunch plans', 'Pizza?', false), 'Pizza?');
    assert.equal(composeText('hello there', 'hello there', true), 'hello there', 'a subject that repeats the body');
    assert.equal(composeText('Quick question', '/help', true), '/help', 'a command stays first');
    assert.equal(composeText('', 'text', true), 'text');
    assert.equal(composeText('Invoice', '', true), 'Subject: Invoice');
  });

  it('stable synthetic ids for mail without a Message-ID', () => {
    assert.equal(syntheticMessageId('From: a\r\n', 'example.org'), syntheticMessageId('From: a\r\n', 'example.org'));
    assert.match(syntheticMessageId('From: a\r\n', 'example.org'), /^<[0-9a-f]{32}@example\.org>$/);
  });

  it('normalises a parsed reply: thread, sender, text without quote and signature', async () => {
    const raw = [
      'From: "Alice Liddell" <Alice@Example.org>',
      'To: bot@example.org',
      'Subject: Re: Lunch',
      'Message-ID: <m2@example.org>',
      'In-Reply-To: <r1@example.org>',
      'References: <m1@example.org> <r1@example.org>',
      'Date: Mon, 01 Jun 2026 10:00:00 +0000',
      '',
      'Pizza!',
      '',
      'On Mon, Bot wrote:',
      '> Where?',
      '',
      '-- ',
      'Alice',
    ].join('\r\n');
    const message = normalise(await simpleParser(raw), { channel: 'email', account: 'bot@example.org', messageId: '<m2@example.org>', receivedAt: 1 });
    assert.deepEqual(message, {
      channel: 'email',
      account: 'bot@example.org',
      chat: '<m1@example.org>',
      id: '<m2@example.org>',
      sender: { id: 'alice@example.org', name: 'Alice Liddell' },
      text: 'Pizza!',
      timestamp: Date.UTC(2026, 5, 1, 10),
      direct: true,
    });
  });
});

describe('email inbound: replies from terse clients (naming only the bot\'s mail)', () => {
  const alice = 'alice@example.org';
  /** A thread book that received <m1@x> (a thread of its own) and answered it with <r1@x>. */
  const book = (): ThreadBook => {
    const threads = new ThreadBook(undefined);
    threads.record({ id: '<m1@x>', chat: '<m1@x>', address: alice, subject: 'Lunch', references: [] });
    threads.recordSent({ id: '<r1@x>', chat: '<m1@x>', to: alice });
    return threads;
  };

  it('continues the thread when In-Reply-To and References name only the bot\'s reply', () => {
    assert.equal(knownThread({ inReplyTo: '<r1@x>', references: '<r1@x>' }, alice, book()), '<m1@x>');
  });

  it('continues the thread with In-Reply-To only (no References)', () => {
    assert.equal(knownThread({ inReplyTo: '<r1@x>' }, alice, book()), '<m1@x>');
  });

  it('continues the thread with References only, naming the bot\'s reply', () => {
    assert.equal(knownThread({ references: ['<r1@x>'] }, alice, book()), '<m1@x>');
  });

  it('finds the bot\'s reply among other unknown ids, newest first', () => {
    assert.equal(knownThread({ inReplyTo: '<elsewhere@y>', references: '<older@y> <r1@x> <elsewhere@y>' }, alice, book()), '<m1@x>');
  });

  it('keeps a known root first named, as full clients send it', () => {
    assert.equal(knownThread({ inReplyTo: '<r1@x>', references: '<m1@x> <r1@x>' }, alice, book()), '<m1@x>');
    const known: KnownMail = { hasThread: (chat) => chat === '<root@x>', sentThread: () => '<other@x>' };
    assert.equal(knownThread({ inReplyTo: '<r9@x>', references: '<root@x> <r9@x>' }, alice, known), '<root@x>', 'a known root wins over a sent mail');
  });

  it('leaves an unknown id, and a new mail, to the headers (a new conversation)', () => {
    assert.equal(knownThread({ inReplyTo: '<unknown@y>', references: '<unknown@y>' }, alice, book()), undefined);
    assert.equal(threadRoot({ inReplyTo: '<unknown@y>', references: '<unknown@y>', messageId: '<m2@x>' }), '<unknown@y>');
    assert.equal(knownThread({}, alice, book()), undefined);
  });

  it('follows the bot\'s mail only for the person it went to', () => {
    assert.equal(knownThread({ inReplyTo: '<r1@x>' }, 'bob@example.org', book()), undefined, 'a forwarded reply starts its own conversation');
    assert.equal(knownThread({ inReplyTo: '<r1@x>' }, 'Alice@Example.org', book()), '<m1@x>', 'addresses compare without case');
  });

  it('lists the ids a mail names newest first, and the References a reply to it builds on', () => {
    assert.deepEqual(namedIds({ inReplyTo: '<c@x>', references: '<a@x> <b@x> <c@x>' }), ['<c@x>', '<b@x>', '<a@x>']);
    assert.deepEqual(namedIds({}), []);
    assert.deepEqual(parentReferences({ inReplyTo: '<c@x>', references: ['<a@x>', '<b@x>'] }), ['<a@x>', '<b@x>']);
    assert.deepEqual(parentReferences({ inReplyTo: '<c@x>' }), ['<c@x>'], 'In-Reply-To alone, with one id (RFC 5322 §3.6.4)');
    assert.deepEqual(parentReferences({ inReplyTo: '<c@x> <d@x>' }), [], 'an ambiguous In-Reply-To');
  });

  it('normalises a terse reply into the thread the channel resolved', async () => {
    const raw = ['From: alice@example.org', 'To: bot@example.org', 'Subject: Re: Lunch', 'Message-ID: <m2@x>', 'In-Reply-To: <r1@x>', 'References: <r1@x>', '', 'Pizza!'].join('\r\n');
    const mail = await simpleParser(raw);
    const chat = knownThread({ ...(mail.inReplyTo ? { inReplyTo: mail.inReplyTo } : {}), ...(mail.references ? { references: mail.references } : {}) }, alice, book());
    const message = normalise(mail, { channel: 'email', account: 'bot@example.org', messageId: '<m2@x>', receivedAt: 1, ...(chat ? { chat } : {}) });
    assert.equal(message.chat, '<m1@x>');
    assert.equal(message.text, 'Pizza!', 'a reply: no subject line');
  });
});
