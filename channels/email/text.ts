/**
 * The new text of a mail: the plain part (or the HTML part turned into text) without the
 * quoted history a reply carries ("On … wrote:" and the "> " lines under it, Outlook's
 * "-----Original Message-----" block) and without the signature ("-- " and after).
 */
import { convert } from 'html-to-text';

/** Text of an HTML body: blockquotes become "> " lines (so quote stripping sees them), images are dropped. */
export function htmlToPlain(html: string): string {
  return convert(html, {
    wordwrap: false,
    // Mail nests a few dozen levels at most; thousands of unclosed tags (hostile or broken) would
    // overflow the stack in html-to-text's recursion (fuzz seed 1232040579). Deeper nodes are dropped.
    limits: { maxDepth: 200 },
    selectors: [
      { selector: 'img', format: 'skip' },
      { selector: 'a', options: { hideLinkHrefIfSameAsText: true, ignoreHref: false } },
      { selector: 'h1', options: { uppercase: false } },
      { selector: 'h2', options: { uppercase: false } },
      { selector: 'h3', options: { uppercase: false } },
      { selector: 'table', format: 'dataTable' },
    ],
  });
}

// "On Mon, 1 Jan 2024 at 10:00, Alice <a@b.c> wrote:" and its translations; Gmail may wrap it over two lines.
const attribution = [
  /^on\b.{0,300}\bwrote:?$/i,
  /^le\b.{0,300}\ba écrit\s*:?$/i,
  /^am\b.{0,300}\bschrieb\b.{0,100}:?$/i,
  /^el\b.{0,300}\bescribió:?$/i,
  /^op\b.{0,300}\bschreef\b.{0,100}:?$/i,
  /^il\b.{0,300}\bha scritto:?$/i,
];
const isAttribution = (line: string): boolean => attribution.some((pattern) => pattern.test(line.trim()));
/** Outlook and others put the earlier mail under a separator line instead of quoting it. */
const historySeparator = /^\s*(-{2,}\s*original message\s*-{2,}|_{10,}|-{5,}\s*(ursprüngliche nachricht|message d'origine|mensaje original)\s*-{5,})\s*$/i;
/** Outlook's header block of the quoted mail: "From: …" followed by "Sent:" / "Date:" within the next lines. */
const outlookFrom = /^\s*\*?(from|von|de):\*?\s/i;
const outlookSent = /^\s*\*?(sent|date|gesendet|envoyé|enviado):\*?\s/i;
/** RFC 3676's signature separator ("-- "); many clients lose the trailing space. */
const signature = /^-- ?$/;
const mobileFooter = /^(sent from my \S+.*|get outlook for \S+.*|sent from (mail|yahoo mail) for .*)$/i;

/**
 * The new part of a mail's text: quoted history and the signature removed, blank lines
 * squeezed. When nothing would be left (a mail that is all quote) the whole text is kept.
 */
export function stripQuotesAndSignature(text: string): string {
  const lines = text.replace(/\r\n?/g, '\n').split('\n');
  const kept: string[] = [];
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    if (signature.test(line) || historySeparator.test(line)) break;
    if (outlookFrom.test(line) && lines.slice(i + 1, i + 5).some((next) => outlookSent.test(next)) && quotedBlockFollows(lines, i)) break;
    if (isAttribution(line) && quoteFollows(lines, i + 1)) continue;
    // the attribution wrapped over two lines: "On Mon, … Alice <" + "a@b.c> wrote:"
    if (i + 1 < lines.length && isAttribution(`${line} ${lines[i + 1]!}`) && !isAttribution(lines[i + 1]!) && quoteFollows(lines, i + 2)) {
      i++;
      continue;
    }
    if (/^\s*>/.test(line)) continue;
    kept.push(line.trimEnd());
  }
  while (kept.length > 0 && mobileFooter.test(kept.at(-1)!.trim())) kept.pop();
  const result = squeeze(kept);
  return result === '' ? squeeze(lines.map((line) => line.trimEnd())) : result;
}

/** After line `from` (blank lines skipped) comes a quoted line, or nothing at all. */
function quoteFollows(lines: readonly string[], from: number): boolean {
  for (let i = from; i < lines.length; i++) {
    if (lines[i]!.trim() === '') continue;
    return /^\s*>/.test(lines[i]!);
  }
  return true;
}

/** An Outlook header block ends in a blank line followed by more text: everything from it is history. */
function quotedBlockFollows(lines: readonly string[], from: number): boolean {
  return lines.slice(from, from + 8).some((line) => /^\s*\*?(subject|betreff|objet|asunto):\*?\s/i.test(line));
}

function squeeze(lines: readonly string[]): string {
  return lines
    .join('\n')
    .replace(/\n{3,}/g, '\n\n')
    .trim();
}
