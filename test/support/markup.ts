/** Checks on rendered and split markup, shared by the splitter's and the renderers' tests. */
import { lexBlocks } from '../../src/outbound/markdown.ts';

const FENCE = /^ {0,3}(`{3,}|~{3,})([^\n]*)$/; // ("." would stop at U+2028; spaces only, as CommonMark: a BOM or NBSP before ``` makes no fence)

/** A line of a text, and whether it opens or closes a top-level code fence, or is code inside one. */
export interface FencedLine {
  readonly text: string;
  readonly fence: boolean;
  readonly code: boolean;
}

/** The lines of a text read for top-level code fences (line by line, as CommonMark opens and closes them). */
export function fenceLines(lines: readonly string[]): { readonly lines: FencedLine[]; readonly open: boolean } {
  let open: string | undefined;
  const read = lines.map((text): FencedLine => {
    const match = FENCE.exec(text);
    if (open === undefined) {
      if (!match || (match[1]![0] === '`' && match[2]!.includes('`'))) return { text, fence: false, code: false }; // (a backtick fence's info string holds no backtick: "``` `" is no fence)
      open = match[1];
      return { text, fence: true, code: false };
    }
    if (!match || match[1]![0] !== open[0] || match[1]!.length < open.length || match[2]!.trim() !== '') return { text, fence: false, code: true };
    open = undefined;
    return { text, fence: true, code: false };
  });
  return { lines: read, open: open !== undefined };
}

/** Whether a code fence is opened in `text` and not closed (a part must render on its own). */
export function unclosedFence(text: string): boolean {
  return fenceLines(text.split('\n')).open;
}

/**
 * {@link unclosedFence} for markdown as CommonMark reads it (the splitter's parts): lines of an
 * HTML block are no fence lines ("<b>" then "```" is HTML to a blank line; fuzz seed 176872038).
 * Not for what a platform gets back (Discord, Slack): they know no HTML blocks.
 */
export function unclosedMarkdownFence(markdown: string): boolean {
  return unclosedFence(lexBlocks(markdown).map((token) => (token.type === 'html' ? token.raw.replace(/[^\n]+/g, '') : token.raw)).join(''));
}

/** Whether every tag is closed in order (void tags excepted). */
export function balancedHtml(html: string): boolean {
  const stack: string[] = [];
  for (const match of html.matchAll(/<(\/?)([a-z][a-z0-9]*)\b[^>]*?(\/?)>/gi)) {
    const name = match[2]!.toLowerCase();
    if (match[3] === '/' || ['br', 'hr', 'img', 'meta'].includes(name)) continue;
    if (match[1] === '') stack.push(name);
    else if (stack.pop() !== name) return false;
  }
  return stack.length === 0;
}
