import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { chunkContent, DISCORD_LIMIT, measureDiscord, renderDiscord } from './render.ts';

describe('discord rendering', () => {
  it('passes what Discord renders itself through unchanged', () => {
    const markdown = [
      '# Title',
      '### Small title',
      '**bold** *italic* ~~gone~~ `code` [link](https://example.org)',
      '> quoted',
      '- item',
      '1. first',
      'snake_case and 2 * 3 * 4 stay as they are',
    ].join('\n');
    assert.equal(renderDiscord(markdown), markdown);
  });

  it('turns a table into an aligned code block without inline markup', () => {
    const markdown = ['Scores:', '', '| Name | Score |', '|:-----|------:|', '| **Alice** | 10 |', '| `Bob` | 7 |', '', 'done'].join('\n');
    assert.equal(
      renderDiscord(markdown),
      ['Scores:', '', '```', 'Name  | Score', '------+------', 'Alice | 10', 'Bob   | 7', '```', '', 'done'].join('\n'),
    );
  });

  it('makes headings deeper than ### bold, rules a line, images links, task boxes symbols', () => {
    assert.equal(renderDiscord('#### Deep heading ##'), '**Deep heading**');
    assert.equal(renderDiscord('###### Deepest'), '**Deepest**');
    assert.equal(renderDiscord('a\n\n---\n\nb'), 'a\n\n──────────\n\nb');
    assert.equal(renderDiscord('see ![a chart](https://x.org/c.png) and ![](https://x.org/d.png)'), 'see [a chart](https://x.org/c.png) and https://x.org/d.png');
    assert.equal(renderDiscord('- [ ] todo\n- [x] done'), '- ☐ todo\n- ☑ done');
  });

  it('never touches code fences', () => {
    const markdown = ['```md', '#### not a heading', '| a | b |', '|---|---|', '---', '```', '~~~', '![x](y)', '~~~'].join('\n');
    assert.equal(renderDiscord(markdown), markdown);
  });

  it('closes a fence that raw HTML leaves open, as it closes one a code block leaves open', () => {
    // CommonMark reads "<b>" and the lines after it to a blank line as one HTML block, so the
    // ``` in it opens no fence there; Discord reads no HTML and opens one (found by the fuzz
    // suite, seed 2119109992)
    assert.equal(renderDiscord('<b>\n```'), '<b>\n```\n```');
    assert.equal(renderDiscord('<div>\n~~~~ts\nx\n```\n\nafter'), '<div>\n~~~~ts\nx\n```\n~~~~\n\nafter');
    assert.equal(renderDiscord('<b>\n```js\nx\n```\ny'), '<b>\n```js\nx\n```\ny');
    assert.equal(renderDiscord('```\nnever closed'), '```\nnever closed\n```');
  });

  it('measures the rendered length', () => {
    assert.equal(measureDiscord('#### abc'), '**abc**'.length);
    assert.equal(measureDiscord('plain'), 5);
  });

  it('cuts over-long content at line breaks, then spaces, never inside a surrogate pair', () => {
    const lines = Array.from({ length: 60 }, (_, i) => `line ${i} ${'x'.repeat(40)}`).join('\n');
    const chunks = chunkContent(lines);
    assert.ok(chunks.length > 1);
    for (const chunk of chunks) assert.ok(chunk.length <= DISCORD_LIMIT);
    assert.equal(chunks.join('\n'), lines);
    const emoji = '😀'.repeat(1500);
    const parts = chunkContent(emoji);
    for (const part of parts) assert.doesNotMatch(part, /^[\udc00-\udfff]|[\ud800-\udbff]$/);
    assert.equal(parts.join(''), emoji);
    assert.deepEqual(chunkContent('short'), ['short']);
  });
});
