/**
 * Splits a reply into parts that fit a platform's message limit: on paragraph, then line, then
 * word boundaries, and only as a last resort inside a word (never inside a UTF-16 surrogate
 * pair). A code fence is never left open: a part that ends inside one closes it, and the next
 * part reopens it with the same info string, so every part renders on its own.
 */

export interface SplitOptions {
  /** Size of a text as the platform counts it. @default UTF-16 length (Telegram, Discord) */
  readonly measure?: (text: string) => number;
}

const FENCE = /^\s{0,3}(`{3,}|~{3,})(.*)$/;

/** Parts of `text`, in order, each at most `limit` as measured. */
export function splitMessage(text: string, limit: number, options: SplitOptions = {}): string[] {
  const measure = options.measure ?? ((s: string) => s.length);
  if (!(limit >= 64)) throw new RangeError(`limit must be at least 64 (room for a reopened code fence), got ${limit}`);
  // a blank reply is no part at all, short or long (a platform refuses an empty message: Telegram with a 400)
  if (measure(text) <= limit) return text.trim() === '' ? [] : [text];
  // Measuring every candidate part in full made a reply of 100 000 short lines take seconds
  // (minutes with a rendering measure), blocking the daemon: parts are first built on sums of
  // line sizes and checked once; only a measure that is far from additive needs the full way.
  const parts = split(text, limit, measure, true);
  return parts.every((part) => measure(part) <= limit) ? parts : split(text, limit, measure, false);
}

/**
 * The splitting itself. With `estimate`, a line joins the part when the part's size so far
 * plus the line's own size fits (exact when the measure is additive, as a length is); the
 * part is measured in full only when that sum does not fit.
 */
function split(text: string, limit: number, measure: (s: string) => number, estimate: boolean): string[] {
  const parts: string[] = [];
  let lines: string[] = [];
  let fence: Fence | undefined; // the fence open at the end of `lines`
  let estimated = 0; // measure(lines.join('\n')), summed line by line since the last full measure

  const size = (candidate: readonly string[], open: Fence | undefined): number => measure(candidate.join('\n')) + (open ? measure(`\n${open.marker}`) : 0);
  const push = (line: string): void => {
    estimated += (lines.length > 0 ? 1 : 0) + measure(line);
    lines.push(line);
  };
  const fits = (line: string, open: Fence | undefined): boolean => {
    const closing = open ? measure(`\n${open.marker}`) : 0;
    if (estimate && estimated + (lines.length > 0 ? 1 : 0) + measure(line) + closing <= limit) return true;
    const exact = size([...lines, line], open);
    if (exact > limit) return false;
    estimated = exact - closing - measure(line) - (lines.length > 0 ? 1 : 0);
    return true;
  };

  // The line that reopens a fence in the next part: its opening line, or only its marker when
  // that line is long (an opener longer than the limit made every later part too long).
  const reopener = (open: Fence): string => (measure(open.opener) <= limit / 4 ? open.opener : open.marker);

  const flush = (): void => {
    if (lines.length === 0) return;
    // Prefer to end the part at its last paragraph break, when that keeps at least half of it.
    const cut = paragraphCut(lines, measure, limit);
    const keep = cut === undefined ? lines : lines.slice(0, cut);
    const rest = cut === undefined ? [] : lines.slice(cut + 1);
    // A part that ends inside a fence closes it; the next one reopens it (its first line opens it again).
    const open = fenceAfter(keep);
    parts.push([...keep, ...(open ? [open.marker] : [])].join('\n'));
    lines = open ? [reopener(open), ...rest] : rest;
    estimated = lines.length === 0 ? 0 : measure(lines.join('\n'));
    fence = fenceAfter(lines);
  };

  for (const line of text.split('\n')) {
    const nextFence = stepFence(line, fence);
    if (fits(line, nextFence)) {
      push(line);
      fence = nextFence;
      continue;
    }
    flush();
    if (fits(line, nextFence)) {
      push(line);
      fence = nextFence;
      continue;
    }
    // One line alone is too long: cut it by words (or by force), each piece on its own part.
    // (a line that opens a fence needs room for its closing marker too)
    const held = fence ?? nextFence;
    for (const piece of cutLine(line, limit - size(lines, held) - 1 - (held ? measure(`\n${held.marker}`) : 0), limit - (fence ? measure(`${reopener(fence)}\n\n${fence.marker}`) : 0), measure)) {
      // the piece may open a fence (an over-long opening line): its closing marker must fit too
      if (lines.length > 0 && size([...lines, piece], stepFence(piece, fence)) > limit) flush();
      push(piece);
      fence = stepFence(piece, fence);
    }
    fence = nextFence;
  }
  if (lines.length > 0) parts.push(lines.join('\n'));
  return parts.filter((part) => part.trim() !== '');
}

interface Fence {
  /** The backticks or tildes that close it. */
  readonly marker: string;
  /** The opening line, info string included, to reopen it in the next part. */
  readonly opener: string;
}

function stepFence(line: string, open: Fence | undefined): Fence | undefined {
  const match = FENCE.exec(line);
  if (!match) return open;
  const marker = match[1]!;
  if (open) return marker[0] === open.marker[0] && marker.length >= open.marker.length && match[2]!.trim() === '' ? undefined : open;
  return { marker, opener: line.trimStart() };
}

function fenceAfter(lines: readonly string[]): Fence | undefined {
  let open: Fence | undefined;
  for (const line of lines) open = stepFence(line, open);
  return open;
}

/** Index of the last blank line outside a fence past half the limit, if any. */
function paragraphCut(lines: readonly string[], measure: (s: string) => number, limit: number): number | undefined {
  let open: Fence | undefined;
  let best: number | undefined;
  let length = 0;
  for (let i = 0; i < lines.length; i++) {
    length += measure(lines[i]!) + 1;
    if (lines[i]!.trim() === '' && !open && i > 0 && length >= limit / 2) best = i;
    open = stepFence(lines[i]!, open);
  }
  return best;
}

/** Cuts one long line into pieces: at spaces when possible, else by force between code points. */
function cutLine(line: string, firstRoom: number, room: number, measure: (s: string) => number): string[] {
  const pieces: string[] = [];
  let rest = line;
  let budget = Math.max(8, firstRoom);
  for (;;) {
    let end = largestPrefix(rest, budget, measure);
    if (end >= rest.length) break; // the rest fits
    const space = rest.lastIndexOf(' ', end);
    if (space > end / 2) end = space;
    pieces.push(rest.slice(0, end));
    rest = rest.slice(end);
    if (rest.startsWith(' ')) rest = rest.slice(1);
    budget = Math.max(8, room);
  }
  if (rest !== '') pieces.push(rest);
  return pieces;
}

/**
 * The longest prefix that fits `budget` (at least one character), never ending between the
 * halves of a surrogate pair. Gallops from `budget` characters up before it bisects, so a
 * piece costs measures of about its own size, not of the whole line (a line of a million
 * characters was measured whole for each of its pieces).
 */
function largestPrefix(text: string, budget: number, measure: (s: string) => number): number {
  const fits = (n: number): boolean => measure(text.slice(0, n)) <= budget;
  let low = 0; // fits (or nothing)
  let high = Math.min(text.length, Math.max(1, budget));
  while (high < text.length && fits(high)) {
    low = high;
    high = Math.min(text.length, high * 2);
  }
  if (high === text.length && fits(high)) return high;
  // the answer is in [low, high): fits(low), not fits(high)
  while (high - low > 1) {
    const mid = Math.floor((low + high) / 2);
    if (fits(mid)) low = mid;
    else high = mid;
  }
  const end = Math.max(1, low);
  const code = text.charCodeAt(end - 1);
  return code >= 0xd800 && code <= 0xdbff && end > 1 ? end - 1 : end;
}
