import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { htmlBlocks, htmlInline, type HtmlOptions } from './html.ts';
import { lex, lexInline, renderInline } from './markdown.ts';

const escape = (text: string): string => text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
const options: HtmlOptions = { tags: { bold: 'b', italic: 'i', strike: 's' }, schemes: ['http://', 'https://'], escape };
const inline = (markdown: string, with_: HtmlOptions = options): string => renderInline(lexInline(markdown), htmlInline(with_));

describe('HTML from markdown tokens', () => {
  it('renders emphasis, code and safe links, escaping everything else', () => {
    assert.equal(inline('**bold** _it_ ~~gone~~ `a<b` [x](https://e.org/?a=1&b="2")'), '<b>bold</b> <i>it</i> <s>gone</s> <code>a&lt;b</code> <a href="https://e.org/?a=1&amp;b=&quot;2&quot;">x</a>');
  });

  it('leaves unsafe links and escaped markup literal, raw HTML as text; crossing emphasis nests', () => {
    assert.equal(inline('[x](javascript:alert(1))'), '[x](javascript:alert(1))');
    assert.equal(inline('\\*not italic\\* <script>'), '*not italic* &lt;script&gt;');
    assert.equal(inline('**a *b** c*'), '<i><i>a <i>b</i></i> c</i>');
  });

  it('uses the tag names it is given', () => {
    assert.equal(inline('**a** *b*', { ...options, tags: { bold: 'strong', italic: 'em', strike: 'del' } }), '<strong>a</strong> <em>b</em>');
  });

  it('renders blocks: tables, task lists, nested quotes, a fence\'s language', () => {
    assert.equal(htmlBlocks(lex('| a | b |\n|---|---|\n| 1 | **2** |'), options).join(''), '<table><thead><tr><th>a</th><th>b</th></tr></thead><tbody><tr><td>1</td><td><b>2</b></td></tr></tbody></table>');
    assert.equal(htmlBlocks(lex('- [ ] todo\n- [x] done'), options).join(''), '<ul><li>☐ todo</li><li>☑ done</li></ul>');
    assert.equal(htmlBlocks(lex('> a\n>> b'), options).join(''), '<blockquote><p>a</p><blockquote><p>b</p></blockquote></blockquote>');
    assert.equal(htmlBlocks(lex('```js title="x"\n1 < 2\n```'), options).join(''), '<pre><code class="language-js">1 &lt; 2</code></pre>');
  });
});
