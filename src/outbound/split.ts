/**
 * Splits a reply into parts that fit a platform's message limit, between markdown blocks
 * (paragraphs, lists, code blocks, tables, quotes, as marked lexes them), and only a block
 * too long alone is cut: a list between its items, a table between its rows (its header
 * repeated), anything else at a line break, else a space, else between code points (never
 * inside a UTF-16 surrogate pair). A cut never leaves markup open: a code fence is closed
 * and reopened with its info string, bold / italic / strikethrough / code spans are closed
 * and reopened, so every part renders on its own.
 */
import { lexBlocks, lexInline, type MarkedToken, type Token } from './markdown.ts';

export interface SplitOptions {
  /** Size of a text as the platform counts it. @default UTF-16 length (Telegram, Discord) */
  readonly measure?: (text: string) => number;
}

type Measure = (text: string) => number;

/** Parts of `text`, in order, each at most `limit` as measured. */
export function splitMessage(text: string, limit: number, options: SplitOptions = {}): string[] {
  const measure = options.measure ?? ((s: string) => s.length);
  if (!(limit >= 64)) throw new RangeError(`limit must be at least 64 (room for a reopened code fence), got ${limit}`);
  // a blank reply is no part at all, short or long (a platform refuses an empty message: Telegram with a 400)
  if (measure(text) <= limit) return text.trim() === '' ? [] : [text];
  const pieces = lexBlocks(text).flatMap((token) => blockPieces(token, limit, measure));
  return pack(pieces, limit, measure)
    .map(tidy)
    .filter((part) => part.trim() !== '');
}

interface Piece {
  /** The text, with the line break or space cut at after it (dropped when a part ends there). */
  readonly text: string;
  /** Its size, that line break or space left out. */
  readonly size: number;
}

const piece = (text: string, measure: Measure): Piece => ({ text, size: measure(text) });

/** A block as pieces that each fit alone: the block itself, or the block cut. */
function blockPieces(token: MarkedToken, limit: number, measure: Measure): Piece[] {
  const size = measure(token.raw);
  if (size <= limit) return [{ text: token.raw, size }];
  if (token.type === 'list') return listPieces(token.items.map((item) => item.raw), token.raw, limit, measure);
  if (token.type === 'table') return tablePieces(token.raw, limit, measure);
  return cutBlock(token.raw, token.type === 'paragraph', limit, measure);
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
    const part = group.map((piece) => piece.text).join('');
    if (group.length === 1 || measure(part) <= limit) parts.push(part);
    else parts.push(...packExactly(group, limit, measure));
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

/** Packs pieces measuring each candidate part whole (the longest run that fits, found by bisection). */
function packExactly(pieces: readonly Piece[], limit: number, measure: Measure): string[] {
  const parts: string[] = [];
  let from = 0;
  while (from < pieces.length) {
    const join = (to: number): string => pieces.slice(from, to).map((piece) => piece.text).join('');
    let low = from + 1; // a piece alone fits
    let high = pieces.length;
    while (low < high) {
      const mid = Math.ceil((low + high) / 2);
      if (measure(join(mid)) <= limit) low = mid;
      else high = mid - 1;
    }
    parts.push(join(low));
    from = low;
  }
  return parts;
}

/** A part without the blank lines and trailing spaces left at its cut points. */
function tidy(part: string): string {
  return part.replace(/^\n+/, '').trimEnd();
}

// ---- cutting one block --------------------------------------------------------------------

/** A list too long: its items, each cut when too long itself (what follows the last item stays with it). */
function listPieces(items: readonly string[], raw: string, limit: number, measure: Measure): Piece[] {
  const texts = [...items];
  const used = texts.reduce((sum, item) => sum + item.length, 0);
  texts[texts.length - 1] += raw.slice(used);
  return texts.flatMap((item) => (measure(item) <= limit ? [piece(item, measure)] : cutBlock(item, false, limit, measure)));
}

/** A table too long: groups of rows, each behind the table's header and delimiter row. */
function tablePieces(raw: string, limit: number, measure: Measure): Piece[] {
  const lines = raw.replace(/\n+$/, '').split('\n');
  const head = `${lines.slice(0, 2).join('\n')}\n`;
  const room = limit - measure(head);
  if (room < limit / 2) return cutBlock(raw, false, limit, measure);
  const rows = lines.slice(2).map((line) => `${line}\n`);
  const groups = pack(
    rows.flatMap((row) => (measure(row) <= room ? [piece(row, measure)] : cutBlock(row, false, room, measure))),
    room,
    measure,
  );
  return groups.map((group) => piece(`${head}${tidy(group)}\n`, measure));
}

/**
 * Cuts a block's text into pieces within `limit`: at the last line break that keeps at least
 * half a piece, else the last space, else by force. Code fences left open at a cut are closed
 * there and reopened after it; in a paragraph, so are emphasis and code spans. Text cut at a
 * space that would start a block in the next part (`~~~`, `# `, `> `) is escaped.
 */
function cutBlock(text: string, paragraph: boolean, limit: number, measure: Measure): Piece[] {
  const fence = firstFence(text);
  // room for what a cut adds: a closing and a reopening fence, closing and reopening markers
  const reserve = (fence ? measure(`${reopener(fence, limit, measure)}\n\n${fence.marker}`) : paragraph ? measure('*'.repeat(16)) : 0) + measure('\\');
  const budget = Math.max(8, limit - reserve);
  const spans = paragraph ? inlineSpans(text) : [];
  const cuts = cutPoints(text, budget, measure, spans.filter((span) => span.atomic));
  const pieces: Piece[] = [];
  let open: Fence | undefined;
  for (let i = 0; i < cuts.length; i++) {
    const start = i === 0 ? 0 : skipSpace(text, cuts[i - 1]!);
    const end = cuts[i]!;
    const marks = paragraph ? markers(spans, start, end, text.length) : { open: '', close: '' };
    // text cut at a space starts a line in the next part: a "~~~" or "# " there would open a fence or a heading
    const midLine = i > 0 && text[cuts[i - 1]!] !== '\n' && !open && marks.open === '' && /^[`~#>\-+*=|]/.test(text.slice(start, start + 1));
    const body = (midLine ? '\\' : '') + text.slice(start, end);
    const before = open ? `${reopener(open, limit, measure)}\n` : '';
    open = fenceAfter(body, open);
    const after = open && end < text.length ? `\n${open.marker}` : '';
    const marked = before + marks.open + body + marks.close + after;
    const whole = measure(marked) <= limit ? marked : before + body + after;
    const next = i + 1 < cuts.length ? skipSpace(text, end) : text.length;
    pieces.push({ text: whole + text.slice(end, next), size: measure(whole) });
  }
  return pieces;
}

/** Where the next piece starts after a cut at `at`: past the line break or space cut at. */
function skipSpace(text: string, at: number): number {
  return text[at] === '\n' || text[at] === ' ' ? at + 1 : at;
}

/**
 * End offsets of the pieces of `text`, each within `budget`: at a line break, else a space,
 * else by force — never inside an atomic span (a link) when a cut before it keeps half a piece.
 */
function cutPoints(text: string, budget: number, measure: Measure, atomic: readonly Span[]): number[] {
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
    while (next < atomic.length && atomic[next]!.end <= cut) next++;
    const inside = atomic[next];
    if (inside && inside.start < cut && inside.start > half) cut = text.lastIndexOf(' ', inside.start) > half ? text.lastIndexOf(' ', inside.start) : inside.start;
    cuts.push(cut);
    start = skipSpace(text, cut);
  }
  cuts.push(text.length);
  return cuts;
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

// ---- fences -------------------------------------------------------------------------------

interface Fence {
  /** The backticks or tildes that close it. */
  readonly marker: string;
  /** The opening line, info string included, to reopen it in the next part. */
  readonly opener: string;
}

const FENCE = /^ {0,3}(`{3,}|~{3,})(.*)$/;

/** The line that reopens a fence in the next part: its opening line, or only its marker when that line is long. */
function reopener(fence: Fence, limit: number, measure: Measure): string {
  return measure(fence.opener) <= limit / 4 ? fence.opener : fence.marker;
}

function stepFence(line: string, open: Fence | undefined): Fence | undefined {
  const match = FENCE.exec(line);
  if (!match) return open;
  const marker = match[1]!;
  if (open) return marker[0] === open.marker[0] && marker.length >= open.marker.length && match[2]!.trim() === '' ? undefined : open;
  if (marker[0] === '`' && match[2]!.includes('`')) return undefined; // not a fence: an inline code span
  return { marker, opener: line.trimStart() };
}

/** The fence open after `text`, given the one open before it. */
function fenceAfter(text: string, open: Fence | undefined): Fence | undefined {
  let fence = open;
  for (const line of text.split('\n')) fence = stepFence(line, fence);
  return fence;
}

function firstFence(text: string): Fence | undefined {
  for (const line of text.split('\n')) {
    const fence = stepFence(line, undefined);
    if (fence) return fence;
  }
  return undefined;
}

// ---- inline markup across a cut -----------------------------------------------------------

interface Span {
  readonly start: number;
  readonly end: number;
  /** The markers that open and close it (`**`, `~~`, a run of backticks). */
  readonly open: string;
  readonly close: string;
  /** A link or image (or a long code span): reopening cannot mend it, so no cut goes inside when it can be helped. */
  readonly atomic: boolean;
}

/** The spans of a paragraph's inline markup, outer ones first, by offset. */
function inlineSpans(text: string): Span[] {
  const spans: Span[] = [];
  const walk = (tokens: readonly Token[], from: number): void => {
    let at = from;
    for (const token of tokens as readonly MarkedToken[]) {
      if (!text.startsWith(token.raw, at)) return; // tokens that do not retrace the text: no spans past here
      const start = at;
      spans.push(...spanOf(token, start));
      if ((token.type === 'strong' || token.type === 'em' || token.type === 'del') && token.tokens.length > 0) {
        walk(token.tokens, start + token.raw.indexOf(token.tokens[0]!.raw));
      }
      at = start + token.raw.length;
    }
  };
  walk(lexInline(text), 0);
  return spans;
}

function spanOf(token: MarkedToken, start: number): Span[] {
  const end = start + token.raw.length;
  switch (token.type) {
    case 'strong':
    case 'em':
    case 'del': {
      const content = token.tokens.map((child) => child.raw).join('');
      const at = token.raw.indexOf(content);
      return [{ start, end, open: token.raw.slice(0, at), close: token.raw.slice(at + content.length), atomic: false }];
    }
    case 'codespan': {
      // three backticks or more reopened at the start of a line would open a code fence instead
      const ticks = /^`+/.exec(token.raw)![0];
      return [{ start, end, open: ticks, close: ticks, atomic: ticks.length >= 3 }];
    }
    case 'link':
    case 'image':
      return [{ start, end, open: '', close: '', atomic: true }];
    default:
      return [];
  }
}

/** Markers to reopen at `start` and to close at `end` (the spans cut there). */
function markers(spans: readonly Span[], start: number, end: number, length: number): { open: string; close: string } {
  let open = '';
  let close = '';
  for (const span of spans) {
    if (span.atomic) continue;
    if (start > 0 && span.start < start && start < span.end) open += span.open;
    if (end < length && span.start < end && end < span.end) close = span.close + close;
  }
  return { open, close };
}
