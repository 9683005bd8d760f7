/**
 * The markup a cut in splitMessage (split.ts) must mend: code fences, reopened with their info
 * string in the next part, and inline spans (bold, italic, strikethrough, code) closed before
 * a cut and reopened after it; links and images are kept whole where they can be.
 */
import { lexInline, type MarkedToken, type Token } from './markdown.ts';

/** Size of a text as the platform counts it. */
export type Measure = (text: string) => number;

// ---- fences -------------------------------------------------------------------------------

export interface Fence {
  /** The backticks or tildes that close it. */
  readonly marker: string;
  /** The opening line, info string included, to reopen it in the next part. */
  readonly opener: string;
}

// `s`: an info string may hold U+2028/U+2029, which `.` alone does not match (the line is already cut at "\n")
const FENCE = /^ {0,3}(`{3,}|~{3,})(.*)$/s;

/** The line that reopens a fence in the next part: its opening line, or only its marker when that line is long. */
export function reopener(fence: Fence, limit: number, measure: Measure): string {
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
export function fenceAfter(text: string, open: Fence | undefined): Fence | undefined {
  let fence = open;
  for (const line of text.split('\n')) fence = stepFence(line, fence);
  return fence;
}

/**
 * `text` with a fence it leaves open closed behind it. For a renderer that passes raw HTML
 * through to a platform that reads no HTML (Discord): CommonMark reads "<b>" and the lines
 * after it up to a blank line as one HTML block, where a ``` line opens no fence, but the
 * platform opens one there and shows the rest of the message as code.
 */
export function closeOpenFence(text: string): string {
  const open = fenceAfter(text, undefined);
  if (!open) return text;
  const breaks = /\n*$/.exec(text)![0];
  return `${text.slice(0, text.length - breaks.length)}\n${open.marker}${breaks}`;
}

export function firstFence(text: string): Fence | undefined {
  for (const line of text.split('\n')) {
    const fence = stepFence(line, undefined);
    if (fence) return fence;
  }
  return undefined;
}

// ---- inline markup across a cut -----------------------------------------------------------

export interface Span {
  readonly start: number;
  readonly end: number;
  /** The markers that open and close it (`**`, `~~`, a run of backticks). */
  readonly open: string;
  readonly close: string;
  /** A link or image (or a long code span): reopening cannot mend it, so no cut goes inside when it can be helped. */
  readonly atomic: boolean;
}

/** The spans of a paragraph's inline markup, outer ones first, by offset. */
export function inlineSpans(text: string): Span[] {
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
export function markers(spans: readonly Span[], start: number, end: number, length: number): { open: string; close: string } {
  let open = '';
  let close = '';
  for (const span of spans) {
    if (span.atomic) continue;
    if (start > 0 && span.start < start && start < span.end) open += span.open;
    if (end < length && span.start < end && end < span.end) close = span.close + close;
  }
  return { open, close };
}
