import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { inlineText, lex, lexBlocks, lexInline, MAX_NESTING, normalize, tableLines, type Tokens } from './markdown.ts';

describe('markdown lexing', () => {
  it('gives blocks whose raw text, joined, is the text', () => {
    const text = '# T\r\n\npara **b**\n- a\n- b\n\n```js\nx\n```\n| a |\n|---|\n| 1 |\n> q';
    assert.equal(lexBlocks(text).map((token) => token.raw).join(''), normalize(text));
  });

  it('leaves a bare URL as text (platforms link it themselves)', () => {
    assert.deepEqual(lexInline('see https://x.org now').map((token) => token.type), ['text']);
  });

  it('lexes a long run of e-mail characters before an "@" in linear time (GFM\'s e-mail stop cut a token per character: quadratic, fuzz seed 99024049)', () => {
    const began = performance.now();
    for (const unit of ['#', '-', '=', '|', 'a', '#-=|']) {
      const text = `${unit.repeat(40_000 / unit.length)}@ and x@y.org`;
      assert.equal(inlineText(lexInline(text)), text, unit);
    }
    // (about 20 ms now; each unit took 1 to 3 s before)
    assert.ok(performance.now() - began < 2000, `${Math.round(performance.now() - began)} ms`);
  });

  it('cuts the spaces that end a line to two (still a hard break), so a long run of them lexes in linear time', () => {
    assert.equal(normalize(`a${' '.repeat(10)}\nb   `), 'a  \nb   ', 'the last line has no break to keep');
    assert.equal(normalize('a  \nb \nc'), 'a  \nb \nc');
    const tokens = lex(`a${' '.repeat(40_000)}\r\nb`);
    assert.deepEqual((tokens[0] as Tokens.Paragraph).tokens.map((token) => token.type), ['text', 'br', 'text']);
    const began = performance.now();
    lex(`.${' '.repeat(200_000)}\n`);
    // (a few ms now; 40 000 spaces took 1.7 s before, 200 000 about 40 s)
    assert.ok(performance.now() - began < 5000, `${Math.round(performance.now() - began)} ms`);
  });

  it('escapes container markers nested past the limit, and lexes them fast', () => {
    assert.equal(normalize('> '.repeat(MAX_NESTING + 2) + 'x'), `${'> '.repeat(MAX_NESTING)}\\> > x`);
    const began = performance.now();
    lex('> '.repeat(50_000) + 'deep');
    lex(Array.from({ length: 3000 }, (_, i) => ' '.repeat(i * 2) + '- x').join('\n'));
    assert.ok(performance.now() - began < 5000, 'deep nesting lexed in time');
  });

  it('keeps emphasis as written in a long paragraph with few delimiters', () => {
    assert.equal(inlineText(lexInline(`**${'x'.repeat(4096)}**`)), 'x'.repeat(4096));
  });

  it('lays a table out as aligned lines', () => {
    const table = lex('| Name | Score |\n|:--|--:|\n| **Alice** | 10 |')[0] as Tokens.Table;
    assert.deepEqual(tableLines(table), ['Name  | Score', '------+------', 'Alice | 10']);
  });
});
