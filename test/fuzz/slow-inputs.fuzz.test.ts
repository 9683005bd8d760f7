/**
 * Inputs that cannot stall it: every text parser and renderer runs in about linear time. A
 * regex that backtracks over a long run (`/[ \t]+\n/` on 160 000 spaces took 24 s) blocks the
 * event loop — every channel, every turn — for as long as it runs; a mail or a model reply
 * is enough to trigger one. Each function gets a long run of one unit (a space, a marker, a
 * tag opening…) between random text, at 10 000 and at 40 000 characters: four times the input may take
 * about four times as long, not sixteen (a ratio over 8, once the longer run takes over
 * 300 ms, fails: robust against a slow machine, and still catching every quadratic case found).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { renderDiscord, chunkContent } from '../../channels/discord/render.ts';
import { renderHtml as emailHtml, renderPlain as emailPlain } from '../../channels/email/render.ts';
import { htmlToPlain, stripQuotesAndSignature } from '../../channels/email/text.ts';
import { stripFormatting, addressing, parseCtcp } from '../../channels/irc/inbound.ts';
import { renderLines } from '../../channels/irc/render.ts';
import { stripMention, stripReplyFallback } from '../../channels/matrix/inbound.ts';
import { renderHtml as matrixHtml } from '../../channels/matrix/render.ts';
import { plainText as slackPlain, stripLeadingMention } from '../../channels/slack/inbound.ts';
import { renderMrkdwn } from '../../channels/slack/render.ts';
import { measure as telegramMeasure, renderHtml as telegramHtml, visibleText } from '../../channels/telegram/render.ts';
import { parseBlocks as consoleMarkdown } from '../../console/src/markdown-parse.ts';
import { parseToolCalls } from '../../src/agent/xml-tools.ts';
import { splitMessage } from '../../src/outbound/split.ts';
import { fuzz, nastyText } from '../support/fuzz.ts';

const functions: ReadonlyArray<readonly [string, (text: string) => unknown]> = [
  ['parseToolCalls', parseToolCalls],
  ['splitMessage', (text) => splitMessage(text, 4096)],
  ['splitMessage (Telegram measure)', (text) => splitMessage(text, 4096, { measure: telegramMeasure })],
  ['telegram renderHtml', telegramHtml],
  ['telegram visibleText', visibleText],
  ['discord renderDiscord', (text) => chunkContent(renderDiscord(text))],
  ['slack renderMrkdwn', renderMrkdwn],
  ['slack plainText', (text) => slackPlain(stripLeadingMention(text, 'U0BOT'))],
  ['matrix renderHtml', matrixHtml],
  ['matrix stripMention/ReplyFallback', (text) => stripMention(stripReplyFallback(text), { userId: '@bot:x', names: ['Bot'] })],
  ['irc renderLines', (text) => renderLines(text, '#chan')],
  ['irc inbound', (text) => [stripFormatting(text), addressing(text, ['Switchboard'], 'Testbot'), parseCtcp(text)]],
  ['email renderPlain', emailPlain],
  ['email renderHtml', emailHtml],
  ['email stripQuotesAndSignature', stripQuotesAndSignature],
  ['email htmlToPlain', htmlToPlain],
  ['console markdown', consoleMarkdown],
];

const unit = fc.constantFrom(' ', '\t', ' \n', '\n', '*', '**', '_', '~', '`', '```', '<', '>', '<tool_call ', '<tool_call>{', '{"', '[', '](', '\\', '&', '#', '-', '> ', '1. ', '|', '@', 'a', 'a ', '\x03', '\x01', 'é', '👍', '\uD800', ':');
const slowInput = fc.record({ head: nastyText(20), unit, tail: nastyText(20) });

/** The faster of two runs: a GC pause or a busy neighbour (tests run two at a time) slows one, rarely both. */
const timed = (run: (text: string) => unknown, text: string): number => {
  let best = Infinity;
  for (let i = 0; i < 2; i++) {
    const began = performance.now();
    run(text);
    best = Math.min(best, performance.now() - began);
  }
  return best;
};

describe('slow inputs (fuzz)', () => {
  for (const [name, run] of functions) {
    it(`${name} takes about linear time on a long run of one unit`, (t) => {
      fuzz(t, `slow ${name}`, slowInput, ({ head, unit: repeated, tail }) => {
        const of = (n: number): string => `${head}${repeated.repeat(Math.ceil(n / repeated.length))}${tail}`;
        const short = timed(run, of(10_000));
        const long = timed(run, of(40_000));
        assert.ok(long < 300 || long / Math.max(short, 1) < 8, `${Math.round(short)} ms for 10 000 characters, ${Math.round(long)} ms for 40 000, of ${JSON.stringify(repeated)}`);
      }, { runs: 8 });
    });
  }
});
