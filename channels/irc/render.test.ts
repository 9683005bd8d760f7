import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { byteLength, CONSERVATIVE_PREFIX_BYTES, flattenMarkdown, IRC_LINE_BYTES, renderLines, splitLine, textBudget } from './render.ts';

const graphemes = (text: string): string[] => [...new Intl.Segmenter(undefined, { granularity: 'grapheme' }).segment(text)].map((s) => s.segment);

/** Every piece is within the budget, is valid UTF-8 on its own and (`whole`) never ends inside a grapheme. */
function assertClean(pieces: readonly string[], original: string, maxBytes: number, whole = true): void {
  for (const piece of pieces) {
    assert.ok(byteLength(piece) <= maxBytes, `a piece of ${byteLength(piece)} bytes is over ${maxBytes}`);
    assert.equal(Buffer.from(piece, 'utf8').toString('utf8'), piece, 'a piece round-trips as UTF-8');
    assert.doesNotMatch(piece, /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/, 'no lone surrogate (a character cut in half)');
  }
  if (!whole) return;
  const originalGraphemes = new Set(graphemes(original));
  for (const piece of pieces) for (const g of graphemes(piece)) assert.ok(originalGraphemes.has(g), `grapheme ${JSON.stringify(g)} was cut`);
}

describe('irc render: markdown → plain text', () => {
  it('drops emphasis markers but keeps snake_case, arithmetic and inline code', () => {
    assert.deepEqual(flattenMarkdown('**bold**, *italic*, _under_, __strong__, ~~gone~~ and `a*b*c`'), ['bold, italic, under, strong, gone and `a*b*c`']);
    assert.deepEqual(flattenMarkdown('use snake_case_names and 2 * 3 * 4'), ['use snake_case_names and 2 * 3 * 4']);
    assert.deepEqual(flattenMarkdown('a**b**c and \\*literal\\*'), ['abc and *literal*']);
  });

  it('writes links as "text (url)", images as "alt (url)", bare and auto links as the url', () => {
    assert.deepEqual(flattenMarkdown('see [the docs](https://example.org/docs "Docs") or <https://x.test/a>'), ['see the docs (https://example.org/docs) or https://x.test/a']);
    assert.deepEqual(flattenMarkdown('![a cat](https://img.test/cat.png) [https://a.test](https://a.test)'), ['a cat (https://img.test/cat.png) https://a.test']);
  });

  it('keeps code fences as their lines (verbatim, no markers), headings as plain lines, bullets kept', () => {
    const markdown = ['# Title', '', 'Some *text*.', '', '```ts', 'const x = **y**;', '  indented()', '', '```', '', '* one', '  - nested **bold**', '1. first', '> quoted', '---'].join('\n');
    assert.deepEqual(flattenMarkdown(markdown), ['Title', 'Some text.', 'const x = **y**;', '  indented()', '- one', '  - nested bold', '1. first', '> quoted', '---']);
  });

  it('skips blank lines and removes control characters (no CTCP injection)', () => {
    assert.deepEqual(flattenMarkdown('one\n\n\n\x01ACTION hacks\x01\r\ntwo\x02bold\x0f\t!'), ['one', 'ACTION hacks', 'twobold    !']);
    assert.deepEqual(flattenMarkdown('\n \n'), []);
  });
});

describe('irc render: 512-byte lines', () => {
  it('splits on word boundaries, every word kept in order', () => {
    const words = Array.from({ length: 300 }, (_, i) => `word${i}`);
    const pieces = splitLine(words.join(' '), 100);
    assert.ok(pieces.length > 1);
    assertClean(pieces, words.join(' '), 100);
    assert.deepEqual(pieces.join(' ').split(' '), words);
    for (const piece of pieces) assert.equal(piece, piece.trim(), 'no space left at either end');
  });

  it('cuts a word longer than a line without cutting a character', () => {
    const long = 'x'.repeat(250);
    assert.deepEqual(splitLine(`a ${long} b`, 100), ['a', 'x'.repeat(100), 'x'.repeat(100), 'x'.repeat(50) + ' b']);
  });

  it('never cuts a UTF-8 character or an emoji / CJK grapheme, at any budget', () => {
    const samples = [
      'é🎉中'.repeat(120),
      '漢字かな交じり文の長い行です。'.repeat(40),
      '👨‍👩‍👧‍👦👍🏽🇫🇷'.repeat(60),
      'mixed ascii and 絵文字 🎉🎉 and more words '.repeat(30),
    ];
    for (const text of samples) {
      const largest = Math.max(...graphemes(text).map((g) => Buffer.byteLength(g)));
      for (const budget of [17, 31, 100, 389, 459]) {
        const pieces = splitLine(text, budget);
        // a grapheme larger than the budget (the 25-byte family emoji at 17) is cut between code points
        assertClean(pieces, text, budget, largest <= budget);
        assert.equal(pieces.join('').replace(/ /g, ''), text.replace(/ /g, ''), 'nothing lost or doubled');
      }
    }
  });

  it('cuts between code points only when one grapheme alone is over the budget', () => {
    const zalgo = 'a' + '\u0301'.repeat(40); // one grapheme of 81 bytes
    const pieces = splitLine(zalgo, 20);
    for (const piece of pieces) assert.ok(byteLength(piece) <= 20);
    assert.equal(pieces.join(''), zalgo);
  });

  it('sizes lines so the relayed ":nick!user@host PRIVMSG target :text\\r\\n" fits 512 bytes', () => {
    const prefix = ':switchboard!~switchboa@127.0.0.1';
    const text = 'a long line of words 🎉 中文 '.repeat(100);
    for (const target of ['#switchboard', 'alice']) {
      const lines = renderLines(text, target, byteLength(prefix));
      assert.ok(lines.length > 3);
      for (const line of lines) assert.ok(byteLength(`${prefix} PRIVMSG ${target} :${line}\r\n`) <= IRC_LINE_BYTES);
      // the longest lines use (nearly) the whole budget
      assert.ok(Math.max(...lines.map(byteLength)) > textBudget(target, byteLength(prefix)) - 30);
    }
    // our prefix unknown: a conservative 100-byte prefix is assumed
    assert.equal(textBudget('#c'), IRC_LINE_BYTES - CONSERVATIVE_PREFIX_BYTES - byteLength(' PRIVMSG #c :') - 2);
    for (const line of renderLines(text, '#c')) assert.ok(byteLength(line) <= textBudget('#c'));
  });

  it('puts the lead ("alice: ") on the first line only', () => {
    assert.deepEqual(renderLines('first\nsecond', '#c', 40, 'alice: '), ['alice: first', 'second']);
    assert.deepEqual(renderLines('', '#c', 40, 'alice: '), []);
  });
});
