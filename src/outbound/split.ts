/**
 * Splits a reply into parts that fit a platform's message limit, between markdown blocks
 * (paragraphs, lists, code blocks, tables, quotes, as marked lexes them), and only a block
 * too long alone is cut: a list between its items, a table between its rows (its header
 * repeated), anything else at a line break, else a space, else between code points (never
 * inside a UTF-16 surrogate pair). A cut never leaves markup open: a code fence is closed
 * and reopened with its info string, bold / italic / strikethrough / code spans are closed
 * and reopened (split-markup.ts), so every part renders on its own.
 */
import { hang, lexBlocks, prefixLines, type MarkedToken, type Tokens } from './markdown.ts';
import { type Fence, type Measure, fenceAfter, firstFence, inlineSpans, markers, reopener, type Span } from './split-markup.ts';

export interface SplitOptions {
  /** Size of a text as the platform counts it. @default UTF-16 length (Telegram, Discord) */
  readonly measure?: (text: string) => number;
}

/** Parts of `text`, in order, each at most `limit` as measured. */
export function splitMessage(text: string, limit: number, options: SplitOptions = {}): string[] {
  const measure = options.measure ?? ((s: string) => s.length);
  if (!(limit >= 64)) throw new RangeError(`limit must be at least 64 (room for a reopened code fence), got ${limit}`);
  // a blank reply is no part at all, short or long (a platform refuses an empty message: Telegram with a 400)
  if (measure(text) <= limit) return text.trim() === '' ? [] : [text];
  return pack(textPieces(text, limit, measure), limit, measure)
    .map(tidy)
    .flatMap((part) => (measure(part) <= limit ? [part] : forced(part, limit, measure)))
    .filter((part) => part.trim() !== '');
}

/**
 * A piece of the text that fits a part alone. A piece of a block cut in the middle carries
 * the markup that makes it whole: `open` is written before it when it starts a part (a
 * reopened fence, reopened emphasis), `close` after it when it ends one; in the middle of a
 * part, where the next piece of the same block follows, neither is needed.
 */
interface Piece {
  readonly open: string;
  readonly text: string;
  readonly close: string;
  /** The line break or space cut at, after the text: kept between pieces in one part. */
  readonly gap: string;
  /** Size of `open + text + close`. */
  readonly size: number;
}

const piece = (text: string, measure: Measure): Piece => ({ open: '', text, close: '', gap: '', size: measure(text) });

/** The text of a part made of `pieces`. */
function join(pieces: readonly Piece[]): string {
  const last = pieces.length - 1;
  return pieces[0]!.open + pieces.map((piece, i) => piece.text + (i < last ? piece.gap : '')).join('') + pieces[last]!.close;
}

/** A block as pieces that each fit alone: the block itself, or the block cut. */
function blockPieces(token: MarkedToken, limit: number, measure: Measure): Piece[] {
  const size = measure(token.raw);
  if (size <= limit) return [{ open: '', text: token.raw, close: '', gap: '', size }];
  switch (token.type) {
    case 'list':
      return listPieces(token, limit, measure);
    case 'blockquote':
      return nestedPieces(token.text, (text) => prefixLines(text, '> '), limit, measure);
    case 'table':
      return tablePieces(token.raw, limit, measure);
    default:
      return cutBlock(token.raw, token.type === 'paragraph' || token.type === 'html' ? token.type : 'text', limit, measure);
  }
}

/** Pieces of the blocks of a text, each within `limit`. */
function textPieces(text: string, limit: number, measure: Measure): Piece[] {
  return lexBlocks(text).flatMap((token) => blockPieces(token, limit, measure));
}

/**
 * Parts from pieces, in order: a piece joins the part while the sizes summed fit (exact for
 * an additive measure, as a length is); a part is then measured whole once, and only one
 * over the limit (a measure far from additive) is packed again piece by piece, measured whole.
 */
function pack(pieces: readonly Piece[], limit: number, measure: Measure): string[] {
  const parts: string[] = [];
  let group: Piece[] = [];
  let sum = 0;
  const flush = (): void => {
    if (group.length === 0) return;
    const part = join(group);
    parts.push(...(group.length === 1 || measure(part) <= limit ? [part] : packExactly(group, limit, measure)));
    group = [];
    sum = 0;
  };
  for (const piece of pieces) {
    if (sum + piece.size > limit) flush();
    group.push(piece);
    sum += piece.size;
  }
  flush();
  return parts;
}

/** Packs pieces measuring each candidate part whole (the longest run that fits). */
function packExactly(pieces: readonly Piece[], limit: number, measure: Measure): string[] {
  const parts: string[] = [];
  for (let from = 0; from < pieces.length; ) {
    const to = from + longestRun(pieces.length - from, (count) => measure(join(pieces.slice(from, from + count))) <= limit);
    parts.push(join(pieces.slice(from, to)));
    from = to;
  }
  return parts;
}

/**
 * The largest count in [1, available] that `fits` (1 when none does). Gallops up from 1
 * before it bisects, so it measures about as much as the run it finds, not all that is left.
 */
function longestRun(available: number, fits: (count: number) => boolean): number {
  let low = 1;
  let high = 2;
  while (high <= available && fits(high)) {
    low = high;
    high *= 2;
  }
  high = Math.min(high, available + 1); // fits(low); not fits(high), or high is past the end
  while (high - low > 1) {
    const mid = Math.floor((low + high) / 2);
    if (fits(mid)) low = mid;
    else high = mid;
  }
  return low;
}

/** The last resort for a part the cutting above left too long: cut as plain text, markup or not. */
function forced(part: string, limit: number, measure: Measure): string[] {
  const cuts = cutPoints(part, limit, limit, measure, [], () => true);
  return cuts.map((end, i) => part.slice(i === 0 ? 0 : skipSpace(part, cuts[i - 1]!), end));
}

/** A part without the blank lines and trailing spaces left at its cut points. */
function tidy(part: string): string {
  return part.replace(/^\n+/, '').trimEnd();
}

// ---- cutting one block --------------------------------------------------------------------

/** A list too long: its items, an item too long cut as blocks behind its bullet (what follows the last item stays with it). */
function listPieces(list: Tokens.List, limit: number, measure: Measure): Piece[] {
  const used = list.items.reduce((sum, item) => sum + item.raw.length, 0);
  const pieces = list.items.flatMap((item) => {
    if (measure(item.raw) <= limit) return [piece(item.raw, measure)];
    const marker = ITEM_MARKER.exec(item.raw)?.[0];
    // a bullet alone on its line ("-\n  text"): cut as text; cut as blocks, its raw text lexed as
    // the same list again, without end (a RangeError: fuzz seed 791415196)
    if (marker === undefined) return cutBlock(item.raw, 'text', limit, measure);
    // the item's first piece behind its bullet; the others as its text (in the part of the first, lazy lines of it)
    // (a blank line after those: "2. b" after text would continue it, not start an item)
    return nestedPieces(item.text, (text, first) => (first ? marker + hang(text, marker.length) : `${text}\n`), limit, measure);
  });
  const last = pieces.pop()!;
  return [...pieces, { ...last, gap: last.gap + list.raw.slice(used) }];
}

/** A list item's bullet or number, its task box and the spaces after them. */
const ITEM_MARKER = /^ {0,3}(?:[-+*]|\d{1,9}[.)])(?:[ \t]+\[[ xX]\])?[ \t]+/;

/**
 * Pieces of a container's content (a quote's, a list item's), cut as blocks of their own to
 * the limit less what wrapping adds to a line, and each wrapped back (`> `, the bullet); a
 * wrapped piece still too long (wrapping adds to every line) is cut as text.
 */
function nestedPieces(content: string, wrap: (text: string, first: boolean) => string, limit: number, measure: Measure): Piece[] {
  const wrapped = (inner: number): { readonly text: string; readonly size: number; readonly inner: number }[] =>
    pack(textPieces(content, inner, measure), inner, measure)
      .map(tidy)
      .filter((text) => text.trim() !== '')
      .map((text, i) => {
        const whole = `${wrap(text, i === 0)}\n`;
        return { text: whole, size: measure(whole), inner: measure(text) };
      });
  let texts = wrapped(Math.max(32, limit - measure(wrap('', true)) - 1));
  // once more with the room that the widest overflow's own wrapping leaves (more tries were
  // exponential in the depth of nesting); the room less the overflow could cut at the same
  // place again, as a piece is often shorter than the room it was cut to
  const over = texts.filter((text) => text.size > limit);
  if (over.length > 0) texts = wrapped(Math.max(32, Math.min(...over.map((text) => text.inner - (text.size - limit)))));
  return texts.flatMap(({ text, size }) => (size <= limit ? [piece(text, measure)] : cutBlock(text, 'text', limit, measure)));
}

/** A table too long: runs of rows, each behind the table's header and delimiter row. */
function tablePieces(raw: string, limit: number, measure: Measure): Piece[] {
  const lines = raw.replace(/\n+$/, '').split('\n');
  const head = lines.slice(0, 2);
  const rows = lines.slice(2);
  const table = (from: number, to: number): string => `${[...head, ...rows.slice(from, to)].join('\n')}\n`;
  if (rows.length === 0 || measure(table(0, 0)) > limit / 2) return cutBlock(raw, 'text', limit, measure);
  const pieces: Piece[] = [];
  let headerSent = false;
  for (let from = 0; from < rows.length; ) {
    if (measure(table(from, from + 1)) > limit) {
      // a row too long even alone: cut as text, behind the header while no run of rows has carried it
      pieces.push(...cutBlock(`${headerSent ? '' : `${head.join('\n')}\n`}${rows[from]}\n`, 'text', limit, measure));
      headerSent = true;
      from++;
      continue;
    }
    // (the widths of a rendered table's columns depend on all its rows: every run is measured whole)
    const to = from + longestRun(rows.length - from, (count) => measure(table(from, from + count)) <= limit);
    pieces.push(piece(table(from, to), measure));
    headerSent = true;
    from = to;
  }
  return pieces;
}

/**
 * Cuts a block's text into pieces within `limit`: at the last line break that keeps at least
 * half a piece, else the last space, else by force. Code fences left open at a cut are closed
 * there and reopened after it; in a paragraph, so are emphasis and code spans. Text cut at a
 * space that would start a block in the next part (`~~~`, `# `, `> `) is escaped. An HTML block
 * (`kind` 'html') holds no fence: it is cut as text, and its fence-like lines escaped where a
 * piece is no longer HTML.
 */
function cutBlock(text: string, kind: 'paragraph' | 'html' | 'text', limit: number, measure: Measure): Piece[] {
  const paragraph = kind === 'paragraph';
  // (a ``` line in an HTML block opens no fence: CommonMark reads the block as HTML to its end)
  const fence = kind === 'html' ? undefined : firstFence(text);
  const spans = paragraph ? inlineSpans(text) : [];
  // room for what a cut adds: a closing and a reopening fence, closing and reopening markers, an escape
  const markup = fence ? measure(`${reopener(fence, limit, measure)}\n\n${fence.marker}`) : spans.some((span) => !span.atomic) ? measure('*'.repeat(16)) : 0;
  const clean = (cut: number): boolean => {
    if (spans.some((span) => !span.atomic && ((cut > span.start && cut < span.start + span.open.length) || (cut > span.end - span.close.length && cut < span.end)))) return false; // inside a marker
    const next = skipSpace(text, cut);
    // a cut at a space would start a line with the run of backticks or tildes after it: inside a
    // fence such a line can close it, and "~~~~ *x*" is read as a fence line (fuzz seed 1355296298)
    if (text[cut] !== '\n' && /^(?:`{3}|~{3})/.test(text.slice(next, next + 3))) return false;
    const close = markers(spans, 0, cut, text.length).close;
    const open = markers(spans, next, text.length, text.length).open;
    return !(close !== '' && close[0] === text[cut - 1]) && !(open !== '' && open.at(-1) === text[next]);
  };
  const cutWithin = (budget: number): Piece[] => {
    const cuts = cutPoints(text, budget, limit - measure('\\'), measure, spans.filter((span) => span.atomic), clean);
    const pieces: Piece[] = [];
    let open: Fence | undefined;
    for (let i = 0; i < cuts.length; i++) {
      const start = i === 0 ? 0 : skipSpace(text, cuts[i - 1]!);
      const end = cuts[i]!;
      const marks = paragraph ? markers(spans, start, end, text.length) : { open: '', close: '' };
      // text cut at a space starts a line in the next part: a "~~~" or "# " there would open a fence or a heading
      const midLine = i > 0 && text[cuts[i - 1]!] !== '\n' && !open && marks.open === '' && BLOCK_START.test(text.slice(start, start + 8));
      const cutText = text.slice(start, end);
      // reopened markers that run into the text would open a block too: "~~" reopened before "~~~~ x" is a fence
      const merged = i > 0 && !open && marks.open !== '' && BLOCK_START.test(marks.open + cutText.slice(0, 8)) ? '\\' : '';
      // without its markers (the fallback below) the text itself starts the line
      const bare = i > 0 && text[cuts[i - 1]!] !== '\n' && !open && marks.open !== '' && BLOCK_START.test(cutText.slice(0, 8)) ? '\\' : '';
      const firstEscaped = midLine || merged !== '' || bare !== '';
      const body =
        kind === 'html' && i > 0
          ? escapeFenceLines(cutText, 0, firstEscaped) // out of the HTML block, a ``` line would open a fence (fuzz seed 176872038)
          : kind !== 'html' && !fence && end < text.length && text[end] !== '\n'
            ? escapeFenceLines(cutText, cutText.lastIndexOf('\n') + 1, firstEscaped) // the line cut short
            : cutText;
      const reopened = open ? `${reopener(open, limit, measure)}\n` : '';
      const before = reopened + (midLine ? '\\' : '');
      open = kind === 'html' ? undefined : fenceAfter((firstEscaped ? '\\' : '') + body, open); // (an escaped "```" opens nothing)
      const after = open && end < text.length ? `\n${open.marker}` : '';
      const gap = text.slice(end, i + 1 < cuts.length ? skipSpace(text, end) : text.length);
      const size = measure(before + marks.open + merged + body + marks.close + after);
      // markers that alone open a fence at a line start ("~~" reopened twice is "~~~~") are not reopened: the piece goes without them
      const fenceByMarkers = i > 0 && /^(?:~{3}|`{3})/.test(marks.open);
      pieces.push(size <= limit && !fenceByMarkers ? { open: before + marks.open + merged, text: body, close: marks.close + after, gap, size } : { open: before + bare, text: body, close: after, gap, size: measure(before + bare + body + after) });
    }
    return pieces;
  };
  // the cuts measure the text as it stands; in a fence it is code, which a measure of the rendered
  // text can count otherwise ("x\n---" is a heading outside one, its "---" not shown): a piece over
  // the limit there is cut again, to its own text's size less the overflow, as a part cut as text
  // would leave the fence open (fuzz seed 1310476373)
  let budget = Math.max(8, limit - markup - measure('\\'));
  for (let tries = 0; ; tries++) {
    const pieces = cutWithin(budget);
    const over = fence ? pieces.filter((piece) => piece.size > limit) : [];
    if (over.length === 0 || tries === 3 || budget === 8) return pieces;
    budget = Math.max(8, Math.min(budget - 1, ...over.map((piece) => measure(piece.text) - (piece.size - limit))));
  }
}

/**
 * A piece's text with its lines from offset `from` escaped where they would open a fence. For
 * a piece cut in the middle of its last line in a block that opens no fence: "``` x`" is no fence
 * (a backtick fence's info string holds no backtick), its first part "``` x" is one, left open
 * (fuzz seed 503829925). For a piece of an HTML block after its first: it is no longer HTML.
 * `firstEscaped`: the piece's first line is escaped already (`midLine`…).
 */
function escapeFenceLines(body: string, from: number, firstEscaped: boolean): string {
  // (only the lines from `from`: for a line cut short that is the last one, not the whole piece)
  const lines = body
    .slice(from)
    .split('\n')
    .map((line, i) => {
      if ((from === 0 && i === 0 && firstEscaped) || fenceAfter(line, undefined) === undefined) return line;
      const spaces = /^ */.exec(line)![0].length;
      return `${line.slice(0, spaces)}\\${line.slice(spaces)}`;
    });
  return body.slice(0, from) + lines.join('\n');
}

/** What opens a block at the start of a line: a fence, a heading, a quote, a bullet. */
const BLOCK_START = /^(?:`{3}|~{3}|#{1,6}(?![^ \t])|>|[-+*](?![^ \t]))/;

/** Where the next piece starts after a cut at `at`: past the line break or space cut at. */
function skipSpace(text: string, at: number): number {
  return text[at] === '\n' || text[at] === ' ' ? at + 1 : at;
}

/**
 * End offsets of the pieces of `text`, each within `budget`: at a line break, else a space,
 * else by force — at an earlier space when the markers closed or reopened there would run into
 * the text's own (`*a*` + `*`), and not inside an atomic span (a link) when it can be helped
 * (see {@link aroundSpan}).
 * `room` is the size a piece may reach when no markup is reopened around it.
 */
function cutPoints(text: string, budget: number, room: number, measure: Measure, atomic: readonly Span[], clean: (cut: number) => boolean): number[] {
  const cuts: number[] = [];
  let start = 0;
  let next = 0; // the first atomic span that may end after `start`
  for (;;) {
    const end = start + largestPrefix(text, start, budget, measure);
    if (end >= text.length) break;
    const half = start + (end - start) / 2;
    const line = text.lastIndexOf('\n', end);
    const space = text.lastIndexOf(' ', end);
    let cut = line > half ? line : space > half ? space : end;
    if (!clean(cut)) cut = cleaner(text, cut, half, start, clean) ?? cut;
    while (next < atomic.length && atomic[next]!.end <= cut) next++;
    const inside = atomic[next];
    if (inside && inside.start < cut) cut = aroundSpan(text, inside, start, half, (end) => measure(text.slice(start, end)) <= room) ?? cut;
    cuts.push(cut);
    start = skipSpace(text, cut);
  }
  cuts.push(text.length);
  return cuts;
}

/** A clean cut before `cut`: at one of the spaces before it past `half`, else a few characters before it. */
function cleaner(text: string, cut: number, half: number, start: number, clean: (cut: number) => boolean): number | undefined {
  for (let tries = 0, space = cut; tries < 8; tries++) {
    space = text.lastIndexOf(' ', space - 1);
    if (space <= half) break;
    if (clean(space)) return space;
  }
  for (let at = cut - 1; at > start && at >= cut - 16; at--) if (!betweenPair(text, at) && clean(at)) return at; // (fuzz seed 1187553780)
  return undefined;
}

/** Whether `at` falls between the halves of a UTF-16 surrogate pair. */
function betweenPair(text: string, at: number): boolean {
  const high = text.charCodeAt(at - 1);
  const low = text.charCodeAt(at);
  return high >= 0xd800 && high <= 0xdbff && low >= 0xdc00 && low <= 0xdfff;
}

/**
 * A cut outside an atomic span the cut falls into: before it (at a space) when that keeps
 * half a piece, else after it when the piece still fits `room`, else before it if that
 * leaves anything in the piece, else none.
 */
function aroundSpan(text: string, span: Span, start: number, half: number, fits: (end: number) => boolean): number | undefined {
  const space = text.lastIndexOf(' ', span.start);
  const before = space > start ? space : span.start;
  if (before > half) return before;
  if (fits(span.end)) return span.end;
  return before > start ? before : undefined;
}

/**
 * How many characters of `text` from `start` fit `budget` (at least one), never ending between
 * the halves of a surrogate pair. Gallops from `budget` characters up before it bisects, so a
 * piece costs measures of about its own size, not of the whole text.
 */
function largestPrefix(text: string, start: number, budget: number, measure: Measure): number {
  const available = text.length - start;
  const fits = (n: number): boolean => measure(text.slice(start, start + n)) <= budget;
  let low = 0; // fits (or nothing)
  let high = Math.min(available, Math.max(1, budget));
  while (high < available && fits(high)) {
    low = high;
    high = Math.min(available, high * 2);
  }
  if (high === available && fits(high)) return high;
  while (high - low > 1) {
    const mid = Math.floor((low + high) / 2);
    if (fits(mid)) low = mid;
    else high = mid;
  }
  const end = Math.max(1, low);
  const code = text.charCodeAt(start + end - 1);
  return code >= 0xd800 && code <= 0xdbff && end > 1 ? end - 1 : end;
}
