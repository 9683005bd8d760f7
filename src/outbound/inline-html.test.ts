import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { renderInlineHtml, type InlineHtmlOptions } from './inline-html.ts';

const escape = (text: string): string => text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
const options: InlineHtmlOptions = { tags: { bold: 'b', italic: 'i', strike: 's' }, safeUrl: /^https?:\/\//, escape };

describe('renderInlineHtml', () => {
  it('renders emphasis, code and safe links, escaping everything else', () => {
    assert.equal(renderInlineHtml('**bold** _it_ ~~gone~~ `a<b` [x](https://e.org/?a=1&b="2")', options), '<b>bold</b> <i>it</i> <s>gone</s> <code>a&lt;b</code> <a href="https://e.org/?a=1&amp;b=&quot;2&quot;">x</a>');
  });

  it('leaves unsafe links, crossing emphasis and escaped markup literal', () => {
    assert.equal(renderInlineHtml('[x](javascript:alert(1))', options), '[x](javascript:alert(1))');
    assert.equal(renderInlineHtml('**a *b** c*', options), '**a *b** c*');
    assert.equal(renderInlineHtml('\\*not italic\\* <script>', options), '*not italic* &lt;script&gt;');
  });

  it('uses the tag names it is given', () => {
    assert.equal(renderInlineHtml('**a** *b*', { ...options, tags: { bold: 'strong', italic: 'em', strike: 'del' } }), '<strong>a</strong> <em>b</em>');
  });
});
