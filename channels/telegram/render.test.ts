import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseTelegramHtml } from '../../test/peers/telegram.ts';
import { decodeEntities, escapeHtml, measure, plainText, renderHtml, visibleText } from './render.ts';

/** Telegram would accept it, and shows this text. */
function shown(html: string): string {
  const parsed = parseTelegramHtml(html);
  assert.ok('text' in parsed, `Telegram would reject ${html}: ${JSON.stringify(parsed)}`);
  return parsed.text;
}

describe('telegram render: markdown → HTML', () => {
  it('renders bold, italic, strikethrough, code and links', () => {
    assert.equal(renderHtml('**bold** and *italic* and _it_ and __b__ and ~~gone~~'), '<b>bold</b> and <i>italic</i> and <i>it</i> and <b>b</b> and <s>gone</s>');
    assert.equal(renderHtml('***both***'), '<b><i>both</i></b>');
    assert.equal(renderHtml('use `npm test` now'), 'use <code>npm test</code> now');
    assert.equal(renderHtml('[docs](https://example.com/a?b=1&c=2)'), '<a href="https://example.com/a?b=1&amp;c=2">docs</a>');
    assert.equal(renderHtml('see <https://x.org/a>'), 'see <a href="https://x.org/a">https://x.org/a</a>');
    assert.equal(renderHtml('**bold with `code` inside**'), '<b>bold with <code>code</code> inside</b>');
  });

  it('escapes & < > everywhere, also inside code', () => {
    assert.equal(renderHtml('a < b && c > d'), 'a &lt; b &amp;&amp; c &gt; d');
    assert.equal(renderHtml('`<b>`'), '<code>&lt;b&gt;</code>');
    assert.equal(renderHtml('```html\n<p>&amp;</p>\n```'), '<pre><code class="language-html">&lt;p&gt;&amp;amp;&lt;/p&gt;</code></pre>');
    assert.equal(escapeHtml('<&>'), '&lt;&amp;&gt;');
  });

  it('renders fenced code with its language, and closes a fence left open', () => {
    assert.equal(renderHtml('before\n```ts\nconst x = 1;\n```\nafter'), 'before\n<pre><code class="language-ts">const x = 1;</code></pre>\nafter');
    assert.equal(renderHtml('```\nplain\n```'), '<pre>plain</pre>');
    assert.equal(renderHtml('```js\nstreaming, not closed yet'), '<pre><code class="language-js">streaming, not closed yet</code></pre>');
    assert.equal(renderHtml('```\n**not bold** in code\n```'), '<pre>**not bold** in code</pre>');
  });

  it('renders headings, bullets and quotes', () => {
    assert.equal(renderHtml('# Title\n- one\n* two'), '<b>Title</b>\n• one\n• two');
    assert.equal(renderHtml('> quoted\n> more\n\nafter'), '<blockquote>quoted\nmore</blockquote>\n\nafter');
    // a line right after a quote continues it (CommonMark's lazy continuation, as GitHub shows it)
    assert.equal(renderHtml('> quoted\nlazy'), '<blockquote>quoted\nlazy</blockquote>');
  });

  it('leaves what is not markup alone: snake_case, arithmetic, unsafe links, unpaired markers', () => {
    for (const text of ['snake_case_name', '2 * 3 * 4', 'unclosed **bold']) assert.equal(renderHtml(text), text);
    // crossing markers pair as CommonMark pairs them, into tags that nest
    assert.equal(renderHtml('**a *b** c*'), '<i><i>a <i>b</i></i> c</i>');
    assert.equal(renderHtml('[x](javascript:alert(1))'), '[x](javascript:alert(1))');
    assert.equal(renderHtml('\\*not italic\\*'), '*not italic*');
  });

  it('always produces HTML Telegram accepts', () => {
    const samples = ['**a *b** c*', '<script>alert(1)</script>', '***', '`unclosed', '[a](https://x.y/"><b>)', '> **q', '**x\ny**', '~~~\ncode\n~~~', '_a *b_ c*', 'a\u0000b\uE000c'];
    for (const sample of samples) shown(renderHtml(sample));
  });

  it('measures the visible text, which is what Telegram counts', () => {
    assert.equal(measure('**bold** [link](https://example.com/very/long/url)'), 'bold link'.length);
    assert.equal(measure('a < b'), 5);
    assert.equal(measure(`\`\`\`\n${'x'.repeat(100)}\n\`\`\``), 100);
    const long = `**${'x'.repeat(4096)}**`;
    assert.equal(measure(long), 4096);
    assert.equal(shown(renderHtml(long)).length, 4096);
  });

  it('measures the raw HTML too: 32 KiB of UTF-8 counts as the 4096 limit (Telegram refuses more before parsing it)', () => {
    assert.equal(measure('```ts\nx\n```'), Math.ceil('<pre><code class="language-ts">x</code></pre>'.length / 8), 'tags outweigh one visible character');
    const amps = '&'.repeat(4000); // 4000 visible, 20000 bytes as &amp;
    assert.equal(measure(amps), 4000);
    const links = Array.from({ length: 250 }, (_, i) => `[${i}](https://example.org/${'x'.repeat(120)})`).join(' ');
    const html = renderHtml(links);
    assert.ok(Buffer.byteLength(html) > 32_768 && shown(html).length < 1000, 'few visible characters, over 32 KiB of HTML');
    assert.equal(measure(links), Math.ceil(Buffer.byteLength(html) / 8));
    assert.ok(measure(links) > 4096);
  });

  it('gives the plain-text fallback: the visible text without markup', () => {
    assert.equal(plainText('**bold** & `code` [link](https://a.b)'), 'bold & code link');
    assert.equal(visibleText('<b>a &lt; b</b> &amp; &quot;c&quot; &#65;&#x42;'), 'a < b & "c" AB');
    assert.equal(decodeEntities('&nbsp; &bogus;'), '&nbsp; &bogus;', 'entities Telegram does not know stay as written');
  });
});
