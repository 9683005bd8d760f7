/**
 * Inline markdown (as models write it) → HTML, for channels whose platform takes HTML
 * (Telegram's small subset, Matrix's formatted_body): code spans, backslash escapes, autolinks,
 * links with a safe scheme, bold, italic, strikethrough. Never throws; emphasis that does not
 * nest properly stays literal, and a link with another scheme stays as written.
 */

export interface InlineHtmlOptions {
  /** Tag names for bold, italic and strikethrough (`b`/`i`/`s` for Telegram, `strong`/`em`/`del` for Matrix). */
  readonly tags: { readonly bold: string; readonly italic: string; readonly strike: string };
  /** Link targets allowed (others are left as text). */
  readonly safeUrl: RegExp;
  /** Escapes text (at least & < >). */
  readonly escape: (text: string) => string;
}

/** Placeholders for finished HTML while the rest is escaped; callers strip them from input. */
export const HOLD_MARKERS = /[\uE000\uE001]/g;

const attribute = (text: string): string => text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

export function renderInlineHtml(text: string, options: InlineHtmlOptions): string {
  const { escape } = options;
  const held: string[] = [];
  const hold = (html: string): string => `\uE000${held.push(html) - 1}\uE001`;
  const link = (url: string, label: string): string => `<a href="${attribute(url)}">${label}</a>`;
  // code spans first: nothing inside them is markup
  const rest = replaceCodeSpans(text, (code) => hold(`<code>${escape(code.replace(/^ (.*) $/, '$1'))}</code>`))
    .replace(/\\([!-/:-@[-`{-~])/g, (_, char: string) => hold(escape(char)))
    .replace(/<((?:https?:\/\/|mailto:)[^\s<>]+)>/g, (whole, url: string) => (options.safeUrl.test(url) ? hold(link(url, escape(url))) : whole))
    // [^[\]\n]: a label holds no bracket (CommonMark: "[a [b](u)" is "[a " and a link), and a run of "[" stays linear
    .replace(/\[([^[\]\n]+)\]\(\s*([^\s()]+(?:\([^\s()]*\))?[^\s()]*)(?:\s+"[^"]*")?\s*\)/g, (whole, label: string, url: string) =>
      options.safeUrl.test(url) ? hold(link(url, styled(escape(label), options.tags))) : whole,
    );
  return styled(escape(rest), options.tags).replace(/\uE000(\d+)\uE001/g, (_, n: string) => held[Number(n)]!);
}

/**
 * Replaces every code span: an opening run of backticks, then the next run of exactly as
 * many. Where no later run is that long, a shorter opening is tried (its other backticks
 * become code), as the regex `/(`+)([\s\S]*?[^`])\1(?!`)/g` this replaces did — which took
 * cubic time on a long run of backticks (5000 of them: 17 s, blocking the daemon). Linear:
 * runs are found once, and each run's best closing is found from the right.
 */
export function replaceCodeSpans(text: string, render: (code: string) => string): string {
  const runs = [...text.matchAll(/`+/g)].map((match) => ({ start: match.index, length: match[0].length }));
  // closing[i]: the run that closes run i (the longest opening that has one), found right to left
  const closing: Array<{ readonly run: number; readonly ticks: number } | undefined> = [];
  const nearest = new Map<number, number>(); // run length → the nearest later run of that length
  for (let i = runs.length - 1; i >= 0; i--) {
    const { length } = runs[i]!;
    for (let ticks = length; ticks >= 1; ticks--) {
      const run = nearest.get(ticks);
      if (run !== undefined) {
        closing[i] = { run, ticks };
        break;
      }
    }
    nearest.set(length, i);
  }
  let out = '';
  let copied = 0;
  for (let i = 0; i < runs.length; i++) {
    const close = closing[i];
    if (!close) continue;
    const open = runs[i]!;
    const end = runs[close.run]!;
    out += text.slice(copied, open.start) + render(text.slice(open.start + close.ticks, end.start));
    copied = end.start + end.length;
    i = close.run;
  }
  return out + text.slice(copied);
}

/** Emphasis on escaped text, or the text as it is when the markup does not pair up. */
function styled(escaped: string, tags: InlineHtmlOptions['tags']): string {
  const { bold: b, italic: i, strike: s } = tags;
  const html = escaped
    .replace(/\*\*\*(?=[^\s*])([\s\S]*?[^\s*])\*\*\*/g, `<${b}><${i}>$1</${i}></${b}>`)
    .replace(/\*\*(?=\S)([\s\S]*?\S)\*\*/g, `<${b}>$1</${b}>`)
    .replace(/(^|[^\w])__(?=\S)([\s\S]*?\S)__(?!\w)/g, `$1<${b}>$2</${b}>`)
    .replace(/~~(?=\S)([\s\S]*?\S)~~/g, `<${s}>$1</${s}>`)
    .replace(/(^|[^\w*])\*(?=[^\s*])([^*]*?[^\s*])\*(?![\w*])/g, `$1<${i}>$2</${i}>`)
    .replace(/(^|[^\w])_(?=[^\s_])([^_]*?[^\s_])_(?!\w)/g, `$1<${i}>$2</${i}>`);
  return balanced(html) ? html : escaped;
}

/** Whether the tags emphasis added nest properly (crossing markup like `**a *b** c*` does not). */
function balanced(html: string): boolean {
  const stack: string[] = [];
  for (const match of html.matchAll(/<(\/?)([a-z]+)[^>]*>/g)) {
    if (match[1] === '') stack.push(match[2]!);
    else if (stack.pop() !== match[2]) return false;
  }
  return stack.length === 0;
}
