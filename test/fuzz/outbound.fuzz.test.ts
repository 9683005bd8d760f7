/**
 * Fuzzing what goes out: the splitter with every channel's limit and measure, and every
 * channel's renderer, on any unicode (lone surrogates, joiners, bidi controls, emoji, very
 * long lines, markup fragments). No part over the limit, no text lost, markup balanced where
 * the renderer promises it, never an exception.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { chunkContent, DISCORD_LIMIT, measureDiscord, renderDiscord } from '../../channels/discord/render.ts';
import { renderHtml as emailHtml, renderPlain as emailPlain } from '../../channels/email/render.ts';
import { byteLength, overheadBytes, renderLines } from '../../channels/irc/render.ts';
import { MATRIX_LIMIT, measure as matrixMeasure, renderHtml as matrixHtml } from '../../channels/matrix/render.ts';
import { measureMrkdwn, renderMrkdwn } from '../../channels/slack/render.ts';
import { measure as telegramMeasure, renderHtml as telegramHtml, TELEGRAM_LIMIT, visibleText } from '../../channels/telegram/render.ts';
import { splitMessage } from '../../src/outbound/split.ts';
import { fuzz, markdownText, nastyText } from '../support/fuzz.ts';
import { balancedHtml, unclosedMarkdownFence } from '../support/markup.ts';

/**
 * A text without whitespace and the characters of fence and quote markers: the parts add markers
 * (a reopened fence, a quote's ">" on a piece of it), and may drop a blank quote line (">" alone
 * shows nothing: fuzz seed 823719238).
 */
const strip = (text: string): string => text.replace(/[\s`~>]/g, '');
/** Whether `small` is `big` with characters left out (greedy, linear). */
function isSubsequence(small: string, big: string): boolean {
  let at = 0;
  for (let i = 0; i < big.length && at < small.length; i++) if (big[i] === small[at]) at++;
  return at === small.length;
}


const channels = [
  { name: 'telegram', limit: TELEGRAM_LIMIT, measure: telegramMeasure },
  { name: 'discord', limit: DISCORD_LIMIT, measure: measureDiscord },
  { name: 'slack', limit: 4000, measure: measureMrkdwn },
  { name: 'matrix', limit: MATRIX_LIMIT, measure: matrixMeasure },
  { name: 'small', limit: 64, measure: (text: string) => text.length },
  { name: 'utf8 bytes', limit: 100, measure: (text: string) => Buffer.byteLength(text, 'utf8') },
] as const;

describe('splitter (fuzz)', () => {
  for (const channel of channels) {
    it(`${channel.name}: every part within ${channel.limit}, fences closed, no word lost`, (t) => {
      fuzz(t, `split ${channel.name}`, markdownText(), (text) => {
        const parts = splitMessage(text, channel.limit, { measure: channel.measure });
        for (const [i, part] of parts.entries()) {
          assert.ok(channel.measure(part) <= channel.limit, `a part of ${channel.measure(part)} > ${channel.limit}`);
          assert.ok(part.trim() !== '');
          // the last part may end inside a fence the text itself never closed
          if (i < parts.length - 1) assert.ok(!unclosedMarkdownFence(part), 'a part ends inside a code fence');
        }
        // nothing lost: the text's characters (whitespace and fence and quote markers aside) all come back, in order;
        // the parts only add (the markers and info strings of reopened fences)
        assert.ok(isSubsequence(strip(text), strip(parts.join('\n'))), 'characters were lost');
      }, { runs: channel.name === 'telegram' || channel.name === 'slack' ? 40 : 120 });
    });
  }
});

/** Tokens of letters and digits: what no renderer may drop (markup, link targets and a fence's info string aside). */
const tokens = (text: string): string[] =>
  text
    .split(/\r\n?|\n/)
    .filter((line) => !/^(?:\s{0,3}>)*\s{0,3}(`{3,}|~{3,})/.test(line)) // a fence line (in a quote too): its info string is markup
    .join('\n')
    .match(/[\p{L}\p{N}]+/gu) ?? [];
/** A text with every character outside printable ASCII as its code point (fast-check prints some invisibly). */
const shown = (text: string): string => text.replace(/[^\x20-\x7e]/gu, (c) => `\\u{${c.codePointAt(0)!.toString(16)}}`);
const noLinks = nastyText(300).filter((text) => !/\]\(|<(https?|mailto):|&[#a-z0-9]+;/i.test(text));

describe('renderers (fuzz)', () => {
  it('telegram: balanced HTML Telegram accepts, every word visible', (t) => {
    fuzz(t, 'render telegram', noLinks, (text) => {
      const html = telegramHtml(text);
      assert.ok(balancedHtml(html), html);
      const visible = visibleText(html);
      for (const token of tokens(text)) assert.ok(visible.includes(token), `lost ${JSON.stringify(token)} of ${shown(text)}`);
    }, { runs: 300 });
  });

  it('matrix: balanced HTML, every word kept', (t) => {
    fuzz(t, 'render matrix', noLinks, (text) => {
      const html = matrixHtml(text);
      assert.ok(balancedHtml(html), html);
      // (a list's first number travels as <ol start="N">, or as <ol> when it is 1: the client shows
      // it, even for an empty item, "1)" alone: fuzz seed 969373074)
      const visible = visibleText(html.replace(/<br\s*\/?>/g, '\n').replace(/<ol(?: start="(\d+)")?>/g, (_, start?: string) => `${start ?? 1} `));
      for (const token of tokens(text)) assert.ok(visible.includes(token), `lost ${JSON.stringify(token)} of ${shown(text)}`);
    }, { runs: 300 });
  });

  it('email: balanced HTML, and a plain part keeping every word', (t) => {
    fuzz(t, 'render email', noLinks, (text) => {
      assert.ok(balancedHtml(emailHtml(text)), `unbalanced for ${shown(text)}`);
      const plain = emailPlain(text);
      for (const token of tokens(text)) assert.ok(plain.includes(token), `lost ${JSON.stringify(token)} of ${shown(text)}: ${shown(plain)}`);
    }, { runs: 300 });
  });

  it('discord: chunks within 2000, every word kept', (t) => {
    fuzz(t, 'render discord', markdownText(), (text) => {
      const chunks = chunkContent(renderDiscord(text));
      for (const chunk of chunks) assert.ok(chunk.length <= DISCORD_LIMIT);
      const joined = chunks.join('');
      for (const token of tokens(text.replace(/\]\([^)]*\)/g, ']'))) assert.ok(joined.includes(token) || joined.replace(/\s+/g, '').includes(token), `lost ${JSON.stringify(token)}`);
    }, { runs: 150 });
  });

  it('slack: mrkdwn with no raw < > & outside its own links, every word kept', (t) => {
    fuzz(t, 'render slack', noLinks, (text) => {
      const mrkdwn = renderMrkdwn(text);
      // (a line may start with ">": Slack's own quote marker)
      assert.doesNotMatch(mrkdwn.replace(/<(?:https?:|mailto:)[^<>]*>/g, '').replace(/^(?:> ?)+/gm, ''), /[<>]/);
      for (const token of tokens(text)) assert.ok(mrkdwn.includes(token), `lost ${JSON.stringify(token)} of ${shown(text)}`);
    }, { runs: 300 });
  });

  it('irc: lines within the byte budget, no line breaks, NUL or CTCP marker', (t) => {
    fuzz(t, 'render irc', fc.tuple(markdownText(), fc.constantFrom('#chan', 'alice', '#a-very-long-channel-name-indeed')), ([text, target]) => {
      for (const line of renderLines(text, target)) {
        assert.ok(byteLength(line) + overheadBytes(target) <= 512, `${byteLength(line)} bytes`);
        assert.doesNotMatch(line, /[\r\n\0\x01]/); // eslint-disable-line no-control-regex
      }
    }, { runs: 150 });
  });

  it('regression: thousands of nested quotes render (Matrix recursed once per level and overflowed the stack)', () => {
    const deep = '> '.repeat(5000) + 'deep';
    assert.ok(visibleText(matrixHtml(deep)).includes('deep'));
    assert.ok(renderMrkdwn('> '.repeat(50_000) + 'deep').endsWith('deep'));
  });
});
