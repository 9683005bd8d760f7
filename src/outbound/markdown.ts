/**
 * Markdown as models write it → tokens, for the renderers of every channel and the splitter.
 * The lexing is marked's (CommonMark + GFM: tables, strikethrough, task lists, bare URLs);
 * this module only guards it against inputs that would stall the daemon, and walks its
 * inline tokens for the renderers, which each map them to their platform's markup.
 *
 * Guards (marked is quadratic or recursive on these; a reply is enough to trigger them):
 * - container markers (`>`, list bullets) nested deeper than {@link MAX_NESTING} on one line
 *   are escaped (they show as written), and a list line indented past {@link MAX_INDENT}
 *   columns is brought back to it (3000 nested list levels took minutes and 4 GB);
 * - inline text with many delimiters (`*`, `_`, `[`…) is lexed in runs of at most
 *   {@link INLINE_RUN} characters, cut at a line break or a space (each delimiter was
 *   scanned ahead to the end of its paragraph: 40 000 characters of `_a` took 3 s);
 * - inline text is lexed without GFM's stops for bare URLs and e-mail addresses (see
 *   {@link INLINE_TEXT}: a long run of `#`, `-`, `=` or `|` before an "@" was quadratic).
 */
import { createRequire } from 'node:module';
import type * as Marked from 'marked';
import type { Lexer, MarkedToken, Token, Tokens } from 'marked';

export type { MarkedToken, Token, Tokens };

/**
 * marked, loaded on the first text lexed rather than at start: its import builds its rules
 * (a few ms before "ready", and memory an idle daemon never uses), and a daemon lexes nothing
 * until its first reply. Node (≥ 22.12) loads an ES module with require(), synchronously;
 * Node's module cache makes every later call a lookup.
 */
const require = createRequire(import.meta.url);
const marked = (): typeof Marked => require('marked') as typeof Marked;

/** Container markers (quotes, list items) kept on one line; deeper ones are shown as text. */
export const MAX_NESTING = 12;
/** Columns a list line may be indented by. */
export const MAX_INDENT = 48;
/** Characters of inline markdown lexed at once (emphasis does not pair across runs). */
export const INLINE_RUN = 1000;
/** Delimiters an inline text may hold and still be lexed whole, however long. */
const MAX_DELIMITERS = 256;

/**
 * marked's GFM inline text rule without its stops for bare URLs and e-mail addresses (which
 * {@link newLexer}'s tokenizer never links). The stop before e-mail characters followed by "@" scanned the
 * whole run at every character of it, making a text token of one character each time: 40 000
 * characters of `#`, `-`, `=`, `|` (or letters) before an "@" took a second or more.
 */
const INLINE_TEXT = /^(`+|~+|[^`~])(?:(?=[`~])|(?= {2,}\n)|[\s\S]*?(?:(?=[\\<![`*~_]|\b_|$)|[^ ](?= {2,}\n)))/;

/**
 * A lexer of its own for each text (marked keeps state on the lexer, its options and its
 * tokenizer), whose tokenizer has no GFM bare-URL links: a URL in the text stays text (every
 * platform links it itself), and a link is only what was written as one.
 */
function newLexer(): Lexer {
  const { Lexer, Tokenizer } = marked();
  const tokenizer = new Tokenizer();
  tokenizer.url = () => undefined;
  const lexer = new Lexer({ gfm: true, tokenizer });
  // (the lexer has just given the tokenizer marked's shared rules: this copies them, it changes nothing shared)
  tokenizer.rules = { ...tokenizer.rules, inline: { ...tokenizer.rules.inline, text: INLINE_TEXT } };
  return lexer;
}

/** Block tokens of `markdown`, their inline tokens lexed too. Never throws. */
export function lex(markdown: string): MarkedToken[] {
  return lexWith(markdown, true);
}

/**
 * Block tokens only (no inline lexing): what the splitter cuts between. The `raw` of the
 * tokens, joined, is the text {@link normalize} made of `markdown`.
 */
export function lexBlocks(markdown: string): MarkedToken[] {
  return lexWith(markdown, false);
}

/** Inline tokens of one run of inline markdown (a paragraph's text). */
export function lexInline(markdown: string): MarkedToken[] {
  const lexer = newLexer();
  const tokens: Token[] = [];
  inlineRuns(lexer, markdown, tokens);
  return tokens as MarkedToken[];
}

function lexWith(markdown: string, inline: boolean): MarkedToken[] {
  const source = normalize(markdown);
  const lexer = newLexer();
  try {
    const tokens = lexer.blockTokens(source, []);
    if (inline) {
      for (const { src, tokens: into } of lexer.inlineQueue) inlineRuns(lexer, src, into);
    }
    return tokens as MarkedToken[];
  } catch {
    // marked's "infinite loop" guard: show the text as it is rather than nothing
    return [{ type: 'paragraph', raw: source, text: source, tokens: [{ type: 'text', raw: source, text: source, escaped: false }] }];
  }
}

function inlineRuns(lexer: Lexer, source: string, into: Token[]): void {
  let at = 0;
  // a run with few delimiters is lexed whole: its cost is their number times its length
  while (source.length - at > INLINE_RUN && delimiters(source, at) > MAX_DELIMITERS) {
    const window = source.slice(at, at + INLINE_RUN);
    // emphasis seldom spans a line, less often a sentence: cut at the last of those, else at a space
    const half = INLINE_RUN / 2;
    const cut = [window.lastIndexOf('\n'), window.lastIndexOf('. '), window.lastIndexOf(' ')].find((index) => index > half);
    const end = cut === undefined ? INLINE_RUN : cut + 1;
    lexer.inlineTokens(source.slice(at, at + end), into);
    at += end;
  }
  lexer.inlineTokens(source.slice(at), into);
}

/** Delimiters (emphasis, link, tag openers) marked scans ahead from, counted up to one over the most. */
function delimiters(source: string, from: number): number {
  let count = 0;
  for (let i = from; i < source.length && count <= MAX_DELIMITERS; i++) if ('*_~[<'.includes(source[i]!)) count++;
  return count;
}

/**
 * The text as it is lexed: line breaks as `\n`, deep
 * nesting guarded (see the module comment), and spaces that end a line cut to two. One pass
 * over the lines.
 *
 * Two or more spaces before a line break are a hard break, and nothing shows more of them; but
 * marked's inline text rule stops before `/ {2,}\n/` at every space of such a run, making a token
 * of one character each time with a scan of the whole run: 40 000 spaces before a line break took
 * 1.7 s to split (the slow-inputs fuzz found it).
 */
export function normalize(markdown: string): string {
  return markdown
    .replace(/\r\n?/g, '\n')
    .split('\n')
    .map((line, index, lines) => guardLine(index < lines.length - 1 ? hardBreakCut(line) : line))
    .join('\n');
}

/** The line with the spaces that end it cut to two (a scan from the end: no regex backtracking over other runs). */
function hardBreakCut(line: string): string {
  let end = line.length;
  while (end > 0 && line.charCodeAt(end - 1) === 32) end--;
  return line.length - end > 2 ? `${line.slice(0, end)}  ` : line;
}

function guardLine(line: string): string {
  let i = 0;
  let markers = 0;
  for (;;) {
    while (line[i] === ' ' || line[i] === '\t') i++;
    if (markers === 0 && i > MAX_INDENT && isListMarker(line, i)) return ' '.repeat(MAX_INDENT) + guardLine(line.slice(i));
    const length = line[i] === '>' ? 1 : isListMarker(line, i);
    if (length === 0) return line;
    if (++markers > MAX_NESTING) return `${line.slice(0, i)}\\${line.slice(i)}`;
    i += length;
  }
}

/** Length of the list marker (`-`, `*`, `+`, `1.`, `1)`) at `i` followed by a space, or 0. */
function isListMarker(line: string, i: number): number {
  let end = i;
  if (line[i] === '-' || line[i] === '*' || line[i] === '+') end = i + 1;
  else {
    while (end - i < 9 && line.charCodeAt(end) >= 48 && line.charCodeAt(end) <= 57) end++;
    if (end === i || (line[end] !== '.' && line[end] !== ')')) return 0;
    end++;
  }
  return line[end] === ' ' || line[end] === '\t' ? end - i : 0;
}

// ---- walking inline tokens ----------------------------------------------------------------

/** How one platform writes inline markup. `inner` is already rendered. */
export interface InlineRules {
  /** Plain text, escaped for the platform. */
  readonly text: (text: string) => string;
  readonly code: (code: string, raw: string) => string;
  readonly strong: (inner: string, raw: string) => string;
  /** Italic; `intraword` when it sits inside a word (`2*3*4`), where some platforms show no emphasis. */
  readonly em: (inner: string, raw: string, intraword: boolean) => string;
  readonly del: (inner: string, raw: string) => string;
  /** A link: `label` is rendered, `autolink` when the URL itself was written. */
  readonly link: (href: string, label: string, token: Tokens.Link) => string;
  readonly image: (href: string, alt: string, token: Tokens.Image) => string;
  /** A hard line break. */
  readonly br: () => string;
}

/** Renders inline tokens with a platform's rules; raw HTML in the markdown is text. */
export function renderInline(tokens: readonly Token[] | undefined, rules: InlineRules): string {
  if (!tokens) return '';
  let out = '';
  for (let i = 0; i < tokens.length; i++) out += renderOne(tokens[i] as MarkedToken, rules, tokens[i - 1], tokens[i + 1]);
  return out;
}

function renderOne(token: MarkedToken, rules: InlineRules, before: Token | undefined, after: Token | undefined): string {
  switch (token.type) {
    case 'text':
      return token.tokens ? renderInline(token.tokens, rules) : rules.text(token.text);
    case 'escape':
      return rules.text(token.text);
    case 'html':
      return rules.text(token.raw);
    case 'codespan':
      return rules.code(token.text, token.raw);
    case 'strong':
      return rules.strong(renderInline(token.tokens, rules), token.raw);
    case 'em': {
      // ***x*** lexes as em(strong(x)); every platform writes it bold outside, italic inside
      const only = token.tokens.length === 1 ? (token.tokens[0] as MarkedToken) : undefined;
      if (only?.type === 'strong') return rules.strong(rules.em(renderInline(only.tokens, rules), only.raw, false), token.raw);
      return rules.em(renderInline(token.tokens, rules), token.raw, intraword(before, after));
    }
    case 'del':
      return rules.del(renderInline(token.tokens, rules), token.raw);
    case 'link':
      return rules.link(token.href, renderInline(token.tokens, rules), token);
    case 'image':
      return rules.image(token.href, token.text, token);
    case 'br':
      return rules.br();
    case 'checkbox':
      return '';
    default:
      return rules.text(token.raw);
  }
}

const wordChar = /[\p{L}\p{N}]/u;
function intraword(before: Token | undefined, after: Token | undefined): boolean {
  return before !== undefined && after !== undefined && wordChar.test(before.raw.at(-1) ?? '') && wordChar.test(after.raw[0] ?? '');
}

/** The text inline tokens show, without any markup (link targets left out). */
export function inlineText(tokens: readonly Token[] | undefined): string {
  return renderInline(tokens, plainRules);
}

const same = (inner: string): string => inner;
const plainRules: InlineRules = { text: same, code: same, strong: same, em: same, del: same, link: (_href, label) => label, image: (_href, alt) => alt, br: () => '\n' };

/**
 * Rules for plain text (mail, IRC): markers dropped, code spans kept with their backticks,
 * a link as its label and `target(url)` ("docs <https://…>"), or as the URL alone when the
 * label is the URL.
 */
export function plainTextRules(target: (url: string) => string): InlineRules {
  const labelled = (href: string, label: string): string => {
    const shown = label.trim();
    return shown === '' || shown === href || `mailto:${shown}` === href ? href.replace(/^mailto:/i, '') : `${shown} ${target(href)}`;
  };
  return { ...plainRules, code: (_code, raw) => raw, link: (href, label) => labelled(href, label), image: (href, alt) => labelled(href, alt) };
}

// ---- blocks ---------------------------------------------------------------------------------

/**
 * Blocks flattened to plain text (mail, IRC): inline markup by `inline`, code blocks and
 * tables (as aligned lines) through `code` (indented for mail, as written for IRC), quotes as
 * "> " lines, lists with "-" bullets, raw HTML and link definitions as written.
 */
export function plainBlocks(tokens: readonly Token[], inline: InlineRules, code: (text: string) => string): string {
  const blocks = (inner: readonly Token[]): string => plainBlocks(inner, inline, code);
  return tokens
    .map((block) => {
      const token = block as MarkedToken;
      switch (token.type) {
        case 'paragraph':
        case 'text':
        case 'heading':
          return token.tokens ? renderInline(token.tokens, inline) : token.text;
        case 'code':
          return code(token.text);
        case 'table':
          return code(tableLines(token).join('\n'));
        case 'blockquote':
          return prefixLines(blocks(token.tokens), '> ');
        case 'list':
          return listText(token, '-', blocks);
        case 'hr':
          return '---'; // a thematic break, kept as a plain separator
        case 'space':
          return '';
        default: // raw HTML, link definitions: shown as written
          return token.raw.replace(/\n+$/, '');
      }
    })
    .join('\n');
}

/** A table as aligned monospace lines (header, rule, rows): for platforms without tables. */
export function tableLines(table: Tokens.Table, cell: (tokens: readonly Token[]) => string = inlineText): string[] {
  const rows = [table.header, ...table.rows].map((row) => row.map((c) => cell(c.tokens).replace(/\s+/g, ' ').trim()));
  const columns = Math.max(...rows.map((row) => row.length));
  const widths = Array.from({ length: columns }, (_, c) => Math.max(1, ...rows.map((row) => [...(row[c] ?? '')].length)));
  const format = (row: readonly string[]): string =>
    widths
      .map((width, c) => (row[c] ?? '') + ' '.repeat(width - [...(row[c] ?? '')].length))
      .join(' | ')
      .trimEnd();
  const [head, ...body] = rows;
  return [format(head!), widths.map((width) => '-'.repeat(width)).join('-+-'), ...body.map(format)];
}

/** A list item's blocks, without its task box (see {@link taskBox}). */
export function itemTokens(item: Tokens.ListItem): Token[] {
  return item.tokens.filter((token) => token.type !== 'checkbox');
}

/** The number or bullet of item `index` of a list, as shown. */
function itemMarker(list: Tokens.List, index: number, bullet: string): string {
  if (!list.ordered) return bullet;
  const start = typeof list.start === 'number' ? list.start : 1;
  return `${start + index}.`;
}

/** A task item's box as a symbol, or nothing. */
export function taskBox(item: Tokens.ListItem): string {
  if (!item.task) return '';
  return item.checked ? '☑ ' : '☐ ';
}

/**
 * A list as lines, for the platforms without lists: each item behind its bullet (or number),
 * its task box as a symbol, its other lines indented under its text.
 */
export function listText(list: Tokens.List, bullet: string, render: (tokens: readonly Token[]) => string): string {
  return list.items
    .map((item, i) => {
      const marker = `${itemMarker(list, i, bullet)} `;
      return marker + hang(taskBox(item) + render(itemTokens(item)), marker.length);
    })
    .join('\n');
}

/** Indents every line but the first by `width` spaces (a list item's continuation). */
export function hang(text: string, width: number): string {
  return text.replace(/\n(?=[^\n])/g, `\n${' '.repeat(width)}`);
}

/** Prefixes every line with `prefix` (a quote). */
export function prefixLines(text: string, prefix: string, blank = prefix.trimEnd()): string {
  return text
    .split('\n')
    .map((line) => (line === '' ? blank : prefix + line))
    .join('\n');
}

/** Whether `url` starts with one of `schemes` (case-insensitive), e.g. `['https://', 'mailto:']`. */
export function hasScheme(url: string, schemes: readonly string[]): boolean {
  const lower = url.slice(0, 16).toLowerCase();
  return schemes.some((scheme) => lower.startsWith(scheme));
}
