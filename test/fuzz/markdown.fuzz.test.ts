/**
 * Properties of splitting and rendering markdown, for every channel: on structured replies
 * (paragraphs with emphasis, code spans and links, headings, lists, task lists, code fences,
 * tables, quotes) and on any text, the splitter's parts stay within the channel's limit,
 * every part renders to balanced markup on its own, and no text is lost: every word of the
 * text is in what each renderer makes of it, in order, and in the parts joined, raw and
 * rendered (see textWords for what counts as markup, not words); on structured replies the
 * visible text of the parts, joined, is moreover the visible text of the reply.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { DISCORD_LIMIT, measureDiscord, renderDiscord } from '../../channels/discord/render.ts';
import { renderHtml as emailHtml, renderPlain as emailPlain } from '../../channels/email/render.ts';
import { renderLines as ircLines } from '../../channels/irc/render.ts';
import { MATRIX_LIMIT, measure as matrixMeasure, renderHtml as matrixHtml } from '../../channels/matrix/render.ts';
import { measureMrkdwn, renderMrkdwn } from '../../channels/slack/render.ts';
import { measure as telegramMeasure, renderHtml as telegramHtml, TELEGRAM_LIMIT, visibleText } from '../../channels/telegram/render.ts';
import { inlineText, lex, type MarkedToken, type Token } from '../../src/outbound/markdown.ts';
import { splitMessage } from '../../src/outbound/split.ts';
import { fuzz, markdownText } from '../support/fuzz.ts';
import { balancedHtml, fenceLines, unclosedFence } from '../support/markup.ts';

// ---- structured replies -------------------------------------------------------------------

const plainWords = ['alpha', 'beta', 'gamma', 'δέλτα', '😀', 'snake_case', '2 * 3', 'a<b', 'x&y', 'ok.'];
// (`reply` has no stray intraword "*" as in "2*3": CommonMark may pair it with one far away, and
// a cut between the two changes that pairing, which the visible-text equality below would see;
// `anyReply` has them, for the property that holds whatever the pairing: every word kept)
const strayWords = [...plainWords, '2*3*4', 'a*b', 'x_y_z', '**un', 'closed*', '_', '~~', '`tick'];

/** Structured replies built of `list`'s words and long runs of "z". */
function replyOf(list: readonly string[]): fc.Arbitrary<string> {
  const word = fc.oneof({ weight: 6, arbitrary: fc.constantFrom(...list) }, { weight: 1, arbitrary: fc.integer({ min: 20, max: 300 }).map((n) => 'z'.repeat(n)) });
  const words = (max: number): fc.Arbitrary<string> => fc.array(word, { minLength: 1, maxLength: max }).map((list) => list.join(' '));
  const inline = fc.oneof(
    { weight: 5, arbitrary: words(12) },
    { weight: 1, arbitrary: words(6).map((text) => `**${text}**`) },
    { weight: 1, arbitrary: words(6).map((text) => `*${text}*`) },
    { weight: 1, arbitrary: words(6).map((text) => `~~${text}~~`) },
    { weight: 1, arbitrary: words(4).map((text) => `\`${text}\``) },
    // (short labels: a link longer than a part cannot be kept whole, and is cut as text)
    { weight: 1, arbitrary: fc.array(fc.constantFrom('alpha', 'beta', 'δέλτα', '😀'), { minLength: 1, maxLength: 3 }).map((label) => `[${label.join(' ')}](https://example.org/${label.length})`) },
  );
  const paragraph = fc.array(inline, { minLength: 1, maxLength: 20 }).map((parts) => parts.join(' '));
  const block = fc.oneof(
    { weight: 6, arbitrary: paragraph },
    { weight: 1, arbitrary: fc.tuple(fc.integer({ min: 1, max: 6 }), words(6)).map(([level, text]) => `${'#'.repeat(level)} ${text}`) },
    { weight: 2, arbitrary: fc.tuple(fc.boolean(), fc.array(fc.tuple(fc.constantFrom('', '[ ] ', '[x] '), paragraph), { minLength: 1, maxLength: 12 })).map(([ordered, items]) => items.map(([box, text], i) => `${ordered ? `${i + 1}.` : '-'} ${box}${text}`).join('\n')) },
    { weight: 2, arbitrary: fc.tuple(fc.constantFrom('```', '```ts', '~~~', '````md'), fc.array(words(10), { maxLength: 40 })).map(([fence, lines]) => [fence, ...lines, fence.replace(/[^`~]/g, '')].join('\n')) },
    { weight: 1, arbitrary: fc.array(fc.tuple(words(3), words(3)), { minLength: 1, maxLength: 30 }).map((rows) => ['| name | value |', '| --- | --- |', ...rows.map(([a, b]) => `| ${a} | ${b} |`)].join('\n')) },
    { weight: 1, arbitrary: fc.array(paragraph, { minLength: 1, maxLength: 4 }).map((lines) => lines.map((line) => `> ${line}`).join('\n')) },
    { weight: 1, arbitrary: fc.constant('---') },
  );
  return fc.array(block, { minLength: 1, maxLength: 10 }).map((blocks) => blocks.join('\n\n'));
}
const reply = replyOf(plainWords);
const anyReply = replyOf(strayWords);

// ---- what a reader sees ---------------------------------------------------------------------

/**
 * The text a markdown shows, markup left out and whitespace removed: inline text, code,
 * table cells (not the header: a table cut between parts repeats it), no bullets or numbers.
 */
function visible(markdown: string): string {
  const walk = (tokens: readonly Token[]): string =>
    (tokens as readonly MarkedToken[])
      .map((token) => {
        switch (token.type) {
          case 'paragraph':
          case 'heading':
          case 'text':
            return token.tokens ? inlineText(token.tokens) : token.text;
          case 'code':
            return token.text;
          case 'table':
            return token.rows.map((row) => row.map((cell) => inlineText(cell.tokens)).join('')).join('');
          case 'blockquote':
            return walk(token.tokens);
          case 'list':
            return token.items.map((item) => walk(item.tokens)).join('');
          case 'space':
          case 'hr':
          case 'checkbox':
            return '';
          default:
            return token.raw;
        }
      })
      .join('');
  // (a table row too long for any part is sent as its text, pipes shown)
  return walk(lex(markdown)).replace(/[\s|]+/g, '');
}

// ---- balanced output, per platform ----------------------------------------------------------


/** Whether the markdown a platform gets back (Discord, Slack) has its code fences closed. */
const fencesClosed = (text: string): boolean => !unclosedFence(text);

const channels = [
  { name: 'telegram', limit: TELEGRAM_LIMIT, measure: telegramMeasure, balanced: (part: string) => balancedHtml(telegramHtml(part)) },
  { name: 'discord', limit: DISCORD_LIMIT, measure: measureDiscord, balanced: (part: string) => fencesClosed(renderDiscord(part)) },
  { name: 'slack', limit: 4000, measure: measureMrkdwn, balanced: (part: string) => fencesClosed(renderMrkdwn(part)) && !/[<>]/.test(renderMrkdwn(part).replace(/<(?:https?:|mailto:)[^<>]*>/g, '').replace(/^(?:> ?)+/gm, '')) },
  { name: 'matrix', limit: MATRIX_LIMIT, measure: matrixMeasure, balanced: (part: string) => balancedHtml(matrixHtml(part)) },
  { name: 'email', limit: 2000, measure: (part: string) => part.length, balanced: (part: string) => balancedHtml(emailHtml(part)) },
  { name: 'small', limit: 64, measure: (part: string) => part.length, balanced: (part: string) => balancedHtml(telegramHtml(part)) },
  { name: 'utf8 bytes', limit: 300, measure: (part: string) => Buffer.byteLength(part, 'utf8'), balanced: (part: string) => balancedHtml(matrixHtml(part)) },
] as const;

// ---- nothing lost: every word, in order ------------------------------------------------------

/**
 * The words of a markdown's text, in order: runs of letters and digits. Left out, as markup
 * rather than text (every renderer drops or rewrites them, as CommonMark means them):
 * - a code fence line, in a quote or list item too (its info string: "ts" of ```ts is no word of the code);
 * - a list item's number and task box ("3." is renumbered from the list's start, "[x]" is ☑);
 * - a link's title and a reference link's label (`[a](u "title")`, `[a][ref]`: never shown);
 * - a numeric character reference, which is its character (`&#65;` is "A").
 */
const FENCE_LINE = /^(?:[ \t]*(?:>|(?:[-*+]|\d{1,9}[.)])(?=[ \t])))*[ \t]*(`{3,}|~{3,})/; // (in quotes and list items too)
function textWords(markdown: string): string[] {
  return (
    markdown
      .split(/\r\n?|\n/)
      .filter((line) => !FENCE_LINE.test(line))
      .map((line) =>
        line.replace(/^(?:[ \t]*(?:>|[-*+]|\d{1,9}[.)])(?=[ \t]|$)[ \t]*)+(?:\[[ xX]\](?=[ \t]))?/, (prefix) => prefix.replace(/\d+|\[[ xX]\]/g, ' ')),
      )
      .join('\n')
      .replace(/(\]\([^()\s]*)\s+(?:"[^"]*"|'[^']*'|\([^()]*\))\s*\)/g, '$1)')
      .replace(/\]\[[^\]]*\]/g, ']')
      .replace(/&#(?:\d{1,7}|[xX][0-9a-fA-F]{1,6});/g, ' ')
      .match(/[\p{L}\p{N}]+/gu) ?? []
  );
}

/**
 * Whether every word of `words` is in `shown`, in order: each one a run of its letters and
 * digits (markup, spaces and line breaks between them left out: a word cut at a part's or a
 * line's limit counts as kept when its pieces follow one another), after the one before.
 */
function wordsInOrder(words: readonly string[], shown: string): string | undefined {
  const stream = (shown.match(/[\p{L}\p{N}]+/gu) ?? []).join('');
  let at = 0;
  for (const [i, word] of words.entries()) {
    const found = stream.indexOf(word, at);
    if (found < 0) return `word ${i} ${JSON.stringify(word)} lost (after ${JSON.stringify(words.slice(Math.max(0, i - 3), i))})`;
    at = found + word.length;
  }
  return undefined;
}

/** HTML as a reader takes it in: the text, each link's target after its label. */
const readHtml = (html: string): string => visibleText(html.replace(/<a\s[^>]*?href="([^"]*)"[^>]*>([\s\S]*?)<\/a>/g, '$2 $1'));
/** Slack mrkdwn as a reader takes it in: `<url|label>` as "label url". */
const readMrkdwn = (mrkdwn: string): string => visibleText(mrkdwn.replace(/<([^<>|]*)\|([^<>]*)>/g, '$2 $1').replace(/<([^<>|]*)>/g, '$1'));
/**
 * Raw markdown sent as it is (the splitter's parts, Discord): a reopened fence's info string is no
 * word. A line inside a code block is code, whatever it starts with: a long code line cut by force
 * may go on as "* ~~~~ alpha", no fence in a list item there (fuzz seed 1339066485).
 */
const readMarkdown = (markdown: string): string =>
  fenceLines(markdown.split(/\r\n?|\n/))
    .lines.filter((line) => !line.fence && (line.code || !FENCE_LINE.test(line.text)))
    .map((line) => line.text)
    .join('\n');

/** Every renderer, as what its reader gets. */
const readers = [
  { name: 'telegram', read: (text: string) => readHtml(telegramHtml(text)) },
  { name: 'discord', read: (text: string) => readMarkdown(renderDiscord(text)) },
  { name: 'slack', read: (text: string) => readMrkdwn(renderMrkdwn(text)) },
  { name: 'matrix', read: (text: string) => readHtml(matrixHtml(text)) },
  { name: 'email html', read: (text: string) => readHtml(emailHtml(text)) },
  { name: 'email plain', read: (text: string) => emailPlain(text) },
  { name: 'irc', read: (text: string) => ircLines(text, '#chan').join('\n') },
] as const;

const inputs = [
  { name: 'structured replies', arbitrary: anyReply, runs: 40 },
  { name: 'any text', arbitrary: markdownText(), runs: 60 },
] as const;

describe('markdown: nothing lost (every word of the text, in order)', () => {
  for (const input of inputs) {
    for (const reader of readers) {
      it(`${reader.name} renders every word of ${input.name}`, (t) => {
        fuzz(t, `words ${reader.name} ${input.name}`, input.arbitrary, (text) => {
          const lost = wordsInOrder(textWords(text), reader.read(text));
          assert.equal(lost, undefined, lost);
        }, { runs: input.runs });
      });
    }

    for (const channel of channels) {
      it(`${channel.name}: the parts of ${input.name}, split at ${channel.limit} and joined, hold every word`, (t) => {
        fuzz(t, `words split ${channel.name} ${input.name}`, input.arbitrary, (text) => {
          const parts = splitMessage(text, channel.limit, { measure: channel.measure });
          const words = textWords(text);
          const raw = wordsInOrder(words, parts.map(readMarkdown).join('\n'));
          assert.equal(raw, undefined, raw);
          // and rendered part by part, as the platform gets them
          const reader = readers.find((r) => r.name === (channel.name === 'small' ? 'telegram' : channel.name === 'utf8 bytes' ? 'matrix' : channel.name === 'email' ? 'email html' : channel.name))!;
          const rendered = wordsInOrder(words, parts.map(reader.read).join('\n'));
          assert.equal(rendered, undefined, rendered);
        }, { runs: Math.ceil(input.runs / 2) });
      });
    }
  }
});

describe('markdown split and render (properties)', () => {
  for (const channel of channels) {
    // (visible-text equality, stronger than every word kept: at the smallest limit, 64, a long
    // quote's pieces can be cut as text, their markup lost at the cut, so it is checked from 128
    // up there; every word kept is checked at every limit, in the suite above)
    const limit = Math.max(128, channel.limit);
    it(`${channel.name}: parts within ${limit}, each balanced, the visible text kept`, (t) => {
      fuzz(t, `markdown ${channel.name}`, reply, (text) => {
        const parts = splitMessage(text, limit, { measure: channel.measure });
        for (const part of parts) {
          assert.ok(channel.measure(part) <= limit, `a part of ${channel.measure(part)} > ${limit}`);
          assert.ok(channel.balanced(part), `unbalanced: ${JSON.stringify(part.slice(0, 200))}`);
        }
        assert.equal(visible(parts.join('\n\n')), visible(text), 'the parts show what the reply shows');
      }, { runs: channel.limit > 1000 ? 30 : 100 });
    });

    it(`${channel.name}: any text splits within the limit into balanced parts`, (t) => {
      fuzz(t, `markdown any ${channel.name}`, markdownText(), (text) => {
        for (const part of splitMessage(text, channel.limit, { measure: channel.measure })) {
          assert.ok(channel.measure(part) <= channel.limit, `a part of ${channel.measure(part)} > ${channel.limit}`);
          assert.ok(channel.balanced(part), `unbalanced: ${JSON.stringify(part.slice(0, 200))}`);
        }
      }, { runs: channel.limit > 1000 ? 30 : 100 });
    });
  }
});
