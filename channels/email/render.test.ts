import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { SendError } from '../../src/channel.ts';
import { toSendError } from './errors.ts';
import { renderHtml, renderPlain } from './render.ts';
import { ThreadBook } from './threads.ts';
import { testChannelState } from '../../test/support/channel-state.ts';

describe('email render: markdown → plain text', () => {
  it('flattens emphasis, headings and links, keeps lists and line breaks', () => {
    assert.equal(renderPlain('# Plan\n**bold**, *it*, ~~gone~~\n* one\n+ two\n1. three'), 'Plan\nbold, it, gone\n- one\n- two\n1. three');
    assert.equal(renderPlain('see [the docs](https://x.example/d) or <https://y.example>'), 'see the docs <https://x.example/d> or https://y.example');
    assert.equal(renderPlain('[https://x.example](https://x.example)'), 'https://x.example');
    assert.equal(renderPlain('line one\nline two'), 'line one\nline two');
  });

  it('leaves what is not markup alone', () => {
    for (const text of ['snake_case_name and a__b__c', '2 * 3 * 4', 'echo: hello there', 'a <b> c', 'use `npm test`']) assert.equal(renderPlain(text), text);
  });

  it('indents code and drops the fences; nothing inside a fence is touched', () => {
    assert.equal(renderPlain('Run:\n```sh\n**not bold** x\n```\ndone'), 'Run:\n    **not bold** x\ndone');
  });
});

describe('email render: markdown → HTML', () => {
  it('renders paragraphs, emphasis, links, code, lists and headings', () => {
    const html = renderHtml('# Plan\n\nTry **Luigi** at [the square](https://l.example/?a=1&b=2).\nSecond line\n\n- one\n- `two`\n\n```\n<code> & more\n```');
    assert.match(html, /<h2>Plan<\/h2>/);
    assert.match(html, /<p>Try <strong>Luigi<\/strong> at <a href="https:\/\/l.example\/\?a=1&amp;b=2">the square<\/a>.<br>\nSecond line<\/p>/);
    assert.match(html, /<ul><li>one<\/li><li><code>two<\/code><\/li><\/ul>/);
    assert.match(html, /<pre><code>&lt;code&gt; &amp; more<\/code><\/pre>/);
  });

  it('escapes HTML and refuses unsafe links', () => {
    const html = renderHtml('<script>alert(1)</script> [x](javascript:alert(1)) [y](https://a.example/"onmouseover=")');
    assert.doesNotMatch(html, /<script>|href="javascript|"onmouseover/);
    assert.match(html, /&lt;script&gt;/);
  });
});

describe('email errors: SMTP replies → SendError', () => {
  const smtp = (code: string, responseCode?: number): Error => Object.assign(new Error('failed'), { code, ...(responseCode ? { responseCode, response: `${responseCode} something` } : {}) });

  it('5xx is permanent, 4xx and network trouble retry, a failed login retries', () => {
    assert.equal(toSendError(smtp('EENVELOPE', 550), 'sending').permanent, true);
    assert.equal(toSendError(smtp('EMESSAGE', 552), 'sending').permanent, true);
    assert.equal(toSendError(smtp('EENVELOPE', 451), 'sending').permanent, false);
    assert.equal(toSendError(smtp('EENVELOPE', 421), 'sending').permanent, false);
    assert.equal(toSendError(smtp('ECONNECTION'), 'sending').permanent, false);
    assert.equal(toSendError(smtp('ETIMEDOUT'), 'sending').permanent, false);
    assert.equal(toSendError(smtp('EAUTH', 535), 'sending').permanent, false);
    const error = toSendError(smtp('EENVELOPE', 550), 'sending the reply');
    assert.ok(error instanceof SendError);
    assert.match(error.message, /^sending the reply: EENVELOPE: 550 something$/);
  });
});

describe('email thread book', () => {
  const target = (n: number, chat = '<root@x>') => ({ id: `<m${n}@x>`, chat, address: 'alice@x', subject: 'Lunch', references: n > 1 ? ['<root@x>'] : [] });

  it('finds a mail by id and the latest of a thread, also after a restart', async () => {
    const state = testChannelState('email');
    const book = new ThreadBook({ state });
    await book.record(target(1));
    await book.record(target(2));
    await book.record(target(3, '<other@x>'));
    const again = new ThreadBook({ state });
    await again.reload();
    assert.equal(again.byId('<m1@x>')?.subject, 'Lunch');
    assert.equal(again.byChat('<root@x>')?.id, '<m2@x>');
    assert.equal(again.byChat('<other@x>')?.id, '<m3@x>');
    assert.equal(again.byId('<nope@x>'), undefined);
  });

  it('stays bounded', async () => {
    const book = new ThreadBook({ state: testChannelState('email'), limit: 3 });
    for (let n = 1; n <= 10; n++) await book.record(target(n, `<t${n}@x>`));
    assert.equal(book.byId('<m1@x>'), undefined);
    assert.equal(book.byId('<m10@x>')?.chat, '<t10@x>');
  });
});
