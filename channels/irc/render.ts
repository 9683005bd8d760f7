/**
 * IRC has plain text lines of at most 512 bytes, as the server relays them. A reply's
 * markdown is flattened to plain text (emphasis markers dropped, links as "text (url)",
 * code kept verbatim line by line, headings as plain lines, list bullets kept), then every
 * line is cut on word boundaries so that the whole relayed line
 * `:nick!user@host PRIVMSG <target> :<text>\r\n` fits in 512 bytes — never inside a UTF-8
 * character, nor inside a grapheme (an emoji with its modifiers) unless one alone is too long.
 */

/** The most bytes one IRC line may have, CR LF included (RFC 1459 / 2812). */
export const IRC_LINE_BYTES = 512;
/** Prefix length assumed while our own `:nick!user@host` is not known yet. */
export const CONSERVATIVE_PREFIX_BYTES = 100;

const FENCE = /^ {0,3}(`{3,}|~{3,})/;

/** Markdown → plain text lines (blank lines dropped: IRC cannot send an empty message). */
export function flattenMarkdown(markdown: string): string[] {
  const out: string[] = [];
  let fence: string | undefined;
  for (const raw of markdown.replace(/\r\n?/g, '\n').split('\n')) {
    // no control characters: \x01 would make a line a CTCP request, others are formatting codes
    // eslint-disable-next-line no-control-regex
    const line = raw.replace(/\t/g, '    ').replace(/[\x00-\x1f\x7f]/g, '');
    const marker = FENCE.exec(line)?.[1];
    if (fence !== undefined) {
      if (marker !== undefined && marker[0] === fence[0] && marker.length >= fence.length && line.trim() === marker) {
        fence = undefined;
        continue;
      }
      if (line.trim() !== '') out.push(line);
      continue;
    }
    if (marker !== undefined) {
      fence = marker;
      continue;
    }
    const flat = flattenLine(line);
    if (flat.trim() !== '') out.push(flat);
  }
  return out;
}

/** One markdown line outside a code fence → plain text. */
export function flattenLine(line: string): string {
  if (/^ {0,3}([-*_])( *\1){2,} *$/.test(line)) return '---'; // a thematic break, kept as a plain separator
  let text = line;
  const heading = /^ {0,3}#{1,6}\s+(.*?)(\s+#+)?\s*$/.exec(text);
  if (heading) text = heading[1]!;
  // keep the bullet (or number) and the indentation, flatten what follows
  const bullet = /^(\s*(?:[-*+]|\d{1,9}[.)])\s+)(.*)$/.exec(text);
  const lead = bullet ? bullet[1]!.replace(/^(\s*)[*+](\s)/, '$1-$2') : '';
  const body = bullet ? bullet[2]! : text;
  return lead + flattenInline(body);
}

/** Inline markdown → plain text; inline code is kept with its backticks, its content untouched. */
export function flattenInline(text: string): string {
  const parts = text.split(/(`+[^`]*?`+)/);
  return parts.map((part, index) => (index % 2 === 1 ? part : flattenProse(part))).join('');
}

function flattenProse(text: string): string {
  // backslash escapes are set aside first, so an escaped `*` never reads as emphasis
  const escaped: string[] = [];
  const protectedText = text.replace(/\\([\\`*_{}[\]()#+\-.!~>|])/g, (_, char: string) => `\uE000${escaped.push(char) - 1}\uE001`);
  return (
    protectedText
      // images and links: ![alt](url) / [text](url "title") → "text (url)"
      // [^[\]]: a label holds no "[" (as in CommonMark), and a run of "[" stays linear
      .replace(/!?\[([^[\]]*)\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g, (_, label: string, url: string) => {
        const shown = label.trim();
        return shown === '' || shown === url ? url : `${shown} (${url})`;
      })
      // autolinks <https://…>
      .replace(/<((?:https?|mailto):[^>\s]+)>/g, '$1')
      // bold, then italic, then strikethrough; `_` only at word edges (snake_case stays)
      .replace(/(\*\*|__)(?=\S)([\s\S]*?\S)\1/g, '$2')
      .replace(/(^|[^\w*])\*(?=\S)([^*]*?\S)\*(?![\w*])/g, '$1$2')
      .replace(/(^|[^\w])_(?=\S)([^_]*?\S)_(?!\w)/g, '$1$2')
      .replace(/~~(?=\S)([\s\S]*?\S)~~/g, '$1')
      .replace(/\uE000(\d+)\uE001/g, (_, index: string) => escaped[Number(index)]!)
  );
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
