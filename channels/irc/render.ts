/**
 * IRC has plain text lines of at most 512 bytes, as the server relays them. A reply's
 * markdown is flattened to plain text (emphasis markers dropped, links as "text (url)",
 * code kept verbatim line by line, headings as plain lines, list bullets kept), then every
 * line is cut on word boundaries so that the whole relayed line
 * `:nick!user@host PRIVMSG <target> :<text>\r\n` fits in 512 bytes — never inside a UTF-8
 * character, nor inside a grapheme (an emoji with its modifiers) unless one alone is too long.
 */
import { lex, plainBlocks, plainTextRules } from '../../src/outbound/markdown.ts';

/** The most bytes one IRC line may have, CR LF included (RFC 1459 / 2812). */
export const IRC_LINE_BYTES = 512;
/** Prefix length assumed while our own `:nick!user@host` is not known yet. */
export const CONSERVATIVE_PREFIX_BYTES = 100;

const plainInline = plainTextRules((url) => `(${url})`);

/** Markdown → plain text lines (blank lines dropped: IRC cannot send an empty message). */
export function flattenMarkdown(markdown: string): string[] {
  // no control characters: \x01 would make a line a CTCP request, others are formatting codes.
  // They go after lexing: taken out before, "\x02~~~ text" would become a fence and hide its text.
  return plainBlocks(lex(markdown), plainInline, (code) => code)
    .replace(/\t/g, '    ')
    // eslint-disable-next-line no-control-regex
    .replace(/[\x00-\x09\x0b-\x1f\x7f]/g, '')
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => line.trimEnd());
}

/** Bytes the server adds around our text: `:prefix PRIVMSG target :` and CR LF. */
export function overheadBytes(target: string, prefixBytes: number = CONSERVATIVE_PREFIX_BYTES): number {
  return prefixBytes + byteLength(` PRIVMSG ${target} :`) + 2;
}

/** Text bytes that fit in one PRIVMSG to `target`, given our prefix (`:nick!user@host`) length. */
export function textBudget(target: string, prefixBytes: number = CONSERVATIVE_PREFIX_BYTES): number {
  return Math.max(16, IRC_LINE_BYTES - overheadBytes(target, prefixBytes));
}

/** Cuts one line into pieces of at most `maxBytes` UTF-8 bytes, on spaces where it can. */
export function splitLine(line: string, maxBytes: number): string[] {
  if (byteLength(line) <= maxBytes) return [line];
  const pieces: string[] = [];
  let current = '';
  for (const word of line.split(/(?<= )/)) {
    // `word` keeps its trailing space: joining pieces back restores the line
    if (byteLength(current + word.trimEnd()) <= maxBytes) {
      current += word;
      continue;
    }
    if (current.trim() !== '') pieces.push(current.trimEnd());
    let rest = word;
    while (byteLength(rest.trimEnd()) > maxBytes) {
      const [head, tail] = cutAtBytes(rest, maxBytes);
      pieces.push(head);
      rest = tail;
    }
    current = rest;
  }
  if (current.trim() !== '') pieces.push(current.trimEnd());
  return pieces;
}

/** The longest prefix of `text` within `maxBytes`, cut between graphemes (code points if one grapheme is larger). */
function cutAtBytes(text: string, maxBytes: number): [string, string] {
  let used = 0;
  let end = 0;
  for (const { segment } of graphemes.segment(text)) {
    const size = byteLength(segment);
    if (used + size > maxBytes) break;
    used += size;
    end += segment.length;
  }
  if (end === 0) {
    // a single grapheme over the limit (a long chain of combining marks): cut between code points
    for (const point of text) {
      const size = byteLength(point);
      if (used + size > maxBytes) break;
      used += size;
      end += point.length;
    }
  }
  return [text.slice(0, end), text.slice(end)];
}

const graphemes = new Intl.Segmenter(undefined, { granularity: 'grapheme' });

export function byteLength(text: string): number {
  return Buffer.byteLength(text, 'utf8');
}

/**
 * The PRIVMSG texts for one reply part to `target`, in order. `lead` (e.g. "alice: ") starts
 * the first line.
 */
export function renderLines(markdown: string, target: string, prefixBytes?: number, lead = ''): string[] {
  const budget = textBudget(target, prefixBytes);
  const lines = flattenMarkdown(markdown);
  if (lines.length > 0 && lead !== '') lines[0] = lead + lines[0]!;
  return lines.flatMap((line) => splitLine(line, budget));
}
