import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { htmlToText } from '../../test/peers/matrix.ts';
import { editContent, escapeHtml, fileContent, MATRIX_LIMIT, measure, relation, renderHtml, textContent } from './render.ts';

describe('matrix render: markdown → org.matrix.custom.html', () => {
  it('renders bold, italic, strikethrough, code and links', () => {
    assert.equal(renderHtml('**bold** and *italic* and _it_ and __b__ and ~~gone~~'), '<strong>bold</strong> and <em>italic</em> and <em>it</em> and <strong>b</strong> and <del>gone</del>');
    assert.equal(renderHtml('***both***'), '<strong><em>both</em></strong>');
    assert.equal(renderHtml('use `npm test` now'), 'use <code>npm test</code> now');
    assert.equal(renderHtml('[docs](https://example.com/a?b=1&c=2)'), '<a href="https://example.com/a?b=1&amp;c=2">docs</a>');
    assert.equal(renderHtml('see <https://x.org/a>'), 'see <a href="https://x.org/a">https://x.org/a</a>');
    assert.equal(renderHtml('**bold with `code` inside**'), '<strong>bold with <code>code</code> inside</strong>');
  });

  it('escapes HTML everywhere, also inside code, and keeps unsafe links as text', () => {
    assert.equal(renderHtml('a < b && c > d "q"'), 'a &lt; b &amp;&amp; c &gt; d &quot;q&quot;');
    assert.equal(renderHtml('<img src=x onerror=alert(1)>'), '&lt;img src=x onerror=alert(1)&gt;');
    assert.equal(renderHtml('`<b>`'), '<code>&lt;b&gt;</code>');
    assert.equal(renderHtml('[x](javascript:alert(1))'), '[x](javascript:alert(1))');
    assert.equal(renderHtml('[x](https://a.org/"onmouseover=")'), '<a href="https://a.org/&quot;onmouseover=&quot;">x</a>');
    assert.equal(escapeHtml('<&>"'), '&lt;&amp;&gt;&quot;');
    assert.equal(renderHtml('**a *b** c*'), '<em><em>a <em>b</em></em> c</em>', 'crossing markup pairs as CommonMark pairs it, into tags that nest');
  });

  it('renders fenced code with a language class, and closes a fence left open (streaming)', () => {
    assert.equal(renderHtml('before\n```ts\nconst x = 1 < 2;\n```\nafter'), '<p>before</p><pre><code class="language-ts">const x = 1 &lt; 2;</code></pre><p>after</p>');
    assert.equal(renderHtml('```\nplain\n  indented\n```'), '<pre><code>plain\n  indented</code></pre>');
    assert.equal(renderHtml('```js\nstreaming, not closed yet'), '<pre><code class="language-js">streaming, not closed yet</code></pre>');
    assert.equal(renderHtml('```\n**not bold** in code\n```'), '<pre><code>**not bold** in code</code></pre>');
  });

  it('renders line breaks, paragraphs, headings, lists, quotes and rules', () => {
    assert.equal(renderHtml('line one\nline two'), 'line one<br />line two');
    assert.equal(renderHtml('one\n\ntwo'), '<p>one</p><p>two</p>');
    assert.equal(renderHtml('# Title\n### Small'), '<h1>Title</h1><h3>Small</h3>');
    assert.equal(renderHtml('- a\n- b\n  - nested\n1. one\n2. two'), '<ul><li>a</li><li>b<ul><li>nested</li></ul></li></ul><ol><li>one</li><li>two</li></ol>');
    assert.equal(renderHtml('3. three\n4. four'), '<ol start="3"><li>three</li><li>four</li></ol>');
    assert.equal(renderHtml('> quoted\n> **more**\n\nafter'), '<blockquote><p>quoted<br /><strong>more</strong></p></blockquote><p>after</p>');
    assert.equal(renderHtml('a\n\n***\n\nb'), '<p>a</p><hr /><p>b</p>');
  });

  it('shows as the text it was written as (what a client displays)', () => {
    const markdown = 'Hello **there** & welcome\nsecond line\n\n- one\n- two';
    assert.equal(htmlToText(renderHtml(markdown)), 'Hello there & welcome\nsecond line\n\none\ntwo');
  });
});

describe('matrix render: contents and relations', () => {
  it('sends the markdown as body and the HTML as formatted_body, mentioning nobody; plain when HTML is off', () => {
    assert.deepEqual(textContent('**hi**'), { msgtype: 'm.text', body: '**hi**', 'm.mentions': {}, format: 'org.matrix.custom.html', formatted_body: '<strong>hi</strong>' });
    assert.deepEqual(textContent('**hi**', { html: false }), { msgtype: 'm.text', body: '**hi**', 'm.mentions': {} });
  });

  it('edits with m.replace, m.new_content and the "* " fallback', () => {
    assert.deepEqual(editContent('$orig', 'new *text*'), {
      msgtype: 'm.text',
      body: '* new *text*',
      'm.mentions': {},
      format: 'org.matrix.custom.html',
      formatted_body: '* new <em>text</em>',
      'm.new_content': { msgtype: 'm.text', body: 'new *text*', 'm.mentions': {}, format: 'org.matrix.custom.html', formatted_body: 'new <em>text</em>' },
      'm.relates_to': { rel_type: 'm.replace', event_id: '$orig' },
    });
  });

  it('builds thread relations with the reply fallback, room replies, and nothing in DMs', () => {
    assert.deepEqual(relation({ thread: '$root', replyTo: '$asked' }), { rel_type: 'm.thread', event_id: '$root', is_falling_back: true, 'm.in_reply_to': { event_id: '$asked' } });
    assert.deepEqual(relation({ thread: '$root', latest: '$last' }), { rel_type: 'm.thread', event_id: '$root', is_falling_back: true, 'm.in_reply_to': { event_id: '$last' } });
    assert.deepEqual(relation({ thread: '$root' }), { rel_type: 'm.thread', event_id: '$root', is_falling_back: true, 'm.in_reply_to': { event_id: '$root' } });
    assert.deepEqual(relation({ replyTo: '$asked' }), { 'm.in_reply_to': { event_id: '$asked' } });
    assert.equal(relation({ replyTo: '$asked', direct: true }), undefined);
    assert.equal(relation({}), undefined);
  });

  it('describes an uploaded file', () => {
    assert.deepEqual(fileContent({ name: 'a.pdf', url: 'mxc://s/id', mime: 'application/pdf', size: 3 }), {
      msgtype: 'm.file',
      body: 'a.pdf',
      filename: 'a.pdf',
      url: 'mxc://s/id',
      info: { mimetype: 'application/pdf', size: 3 },
      'm.mentions': {},
    });
  });

  it('measures characters, but more when the event would near the 64 KiB limit', () => {
    assert.equal(measure('hello'), 5);
    assert.equal(measure('a'.repeat(MATRIX_LIMIT)), MATRIX_LIMIT);
    const cjk = '漢'.repeat(MATRIX_LIMIT);
    assert.ok(measure(cjk) > MATRIX_LIMIT, 'three bytes a character, twice (body and HTML), is over the event limit');
    const fits = '漢'.repeat(9000);
    assert.ok(measure(fits) <= MATRIX_LIMIT, 'counted as fitting…');
    assert.ok(new TextEncoder().encode(JSON.stringify(textContent(fits))).length < 60_000, '…and it does fit');
  });
});
