/**
 * The console's markdown, parsed into plain data (no markup, no DOM) that markdown.tsx turns
 * into Preact elements: fenced code, inline code, bold, italic, links (http/https/mailto only),
 * headings, lists and paragraphs. Kept apart from the rendering so node tests can fuzz it.
 * Every loop consumes at least one line or character, so any text parses in linear-ish time.
 */

export type Inline =
  | { readonly kind: 'text'; readonly text: string }
  | { readonly kind: 'code'; readonly text: string }
  | { readonly kind: 'strong'; readonly children: readonly Inline[] }
  | { readonly kind: 'em'; readonly text: string }
  | { readonly kind: 'link'; readonly href: string; readonly text: string };

export type Block =
  | { readonly kind: 'code'; readonly text: string }
  | { readonly kind: 'heading'; readonly children: readonly Inline[] }
  | { readonly kind: 'list'; readonly ordered: boolean; readonly items: ReadonlyArray<readonly Inline[]> }
  | { readonly kind: 'paragraph'; readonly lines: ReadonlyArray<readonly Inline[]> };

// (A link's label holds no "[" and its address no "(": each try then stops at the next one,
// so a line of "[[[[…" or "[a](x[a](x…" is read in linear time, not quadratic.)
const inlinePattern = /(`[^`\n]+`)|(\*\*[^*\n]+\*\*)|(\*[^*\n]+\*|_[^_\n]+_)|(\[[^[\]\n]+\]\([^()\s]+\))|(https?:\/\/[^\s<>()]+)/g;
/** Any line opening with three or more backticks opens a fence, whatever its info string (```c++, ```js title="x"). */
const fenceOpen = /^(`{3,})/;
const listItem = /^\s*([-*]|\d+\.)\s+/;

/** Only these schemes become links; `javascript:`, `data:` and the rest stay text. */
export function safeHref(href: string): string | undefined {
  return /^(https?:|mailto:)/i.test(href) ? href : undefined;
}

export function parseInline(text: string): Inline[] {
  const out: Inline[] = [];
  let last = 0;
  for (const match of text.matchAll(inlinePattern)) {
    const at = match.index ?? 0;
    if (at > last) out.push({ kind: 'text', text: text.slice(last, at) });
    const [whole, code, bold, italic, link, url] = match;
    if (code) out.push({ kind: 'code', text: code.slice(1, -1) });
    else if (bold) out.push({ kind: 'strong', children: parseInline(bold.slice(2, -2)) });
    else if (italic) out.push({ kind: 'em', text: italic.slice(1, -1) });
    else if (link) {
      const m = /^\[([^\]]+)\]\(([^)]+)\)$/.exec(link)!;
      const href = safeHref(m[2]!);
      out.push(href ? { kind: 'link', href, text: m[1]! } : { kind: 'text', text: whole });
    } else if (url) out.push({ kind: 'link', href: url, text: url });
    last = at + whole.length;
  }
  if (last < text.length) out.push({ kind: 'text', text: text.slice(last) });
  return out;
}

export function parseBlocks(text: string): Block[] {
  const blocks: Block[] = [];
  const lines = text.replace(/\r\n/g, '\n').split('\n');
  let i = 0;
  while (i < lines.length) {
    const line = lines[i]!;
    const fence = fenceOpen.exec(line);
    if (fence) {
      // Closed by a line of at least as many backticks and nothing else (CommonMark's rule).
      const close = new RegExp(`^\`{${fence[1]!.length},}\\s*$`);
      const body: string[] = [];
      i++;
      while (i < lines.length && !close.test(lines[i]!)) body.push(lines[i++]!);
      i++;
      blocks.push({ kind: 'code', text: body.join('\n') });
      continue;
    }
    const heading = /^(#{1,4})\s+(.*)$/.exec(line);
    if (heading) {
      blocks.push({ kind: 'heading', children: parseInline(heading[2]!) });
      i++;
      continue;
    }
    if (listItem.test(line)) {
      const ordered = /^\s*\d+\./.test(line);
      const items: Inline[][] = [];
      while (i < lines.length && listItem.test(lines[i]!)) items.push(parseInline(lines[i++]!.replace(listItem, '')));
      blocks.push({ kind: 'list', ordered, items });
      continue;
    }
    if (line.trim() === '') {
      i++;
      continue;
    }
    // The first line is taken whatever it is: a paragraph always consumes a line, so the loop ends.
    const para: Inline[][] = [parseInline(lines[i++]!)];
    while (i < lines.length && lines[i]!.trim() !== '' && !fenceOpen.test(lines[i]!) && !listItem.test(lines[i]!)) para.push(parseInline(lines[i++]!));
    blocks.push({ kind: 'paragraph', lines: para });
  }
  return blocks;
}
