/**
 * Markdown tokens → HTML, for the channels whose platform takes HTML: the inline rules
 * (Telegram's small subset, Matrix's formatted_body, a mail's HTML part) and the blocks
 * (Matrix, mail). Everything the model wrote is escaped; the only tags are the ones written
 * here, so they always nest, and a link is kept only with a safe scheme.
 */
import { hasScheme, itemTokens, renderInline, taskBox, type InlineRules, type MarkedToken, type Token, type Tokens } from './markdown.ts';

export interface HtmlOptions {
  /** Tag names for bold, italic and strikethrough (`b`/`i`/`s` for Telegram, `strong`/`em`/`del` for Matrix). */
  readonly tags: { readonly bold: string; readonly italic: string; readonly strike: string };
  /** URL schemes a link may have (others stay as written, as text), e.g. `['https://', 'mailto:']`. */
  readonly schemes: readonly string[];
  /** Escapes text (at least & < >). */
  readonly escape: (text: string) => string;
  /** What a line break inside a paragraph becomes. @default '\n' (kept as it is) */
  readonly lineBreak?: string;
}

/** Escapes an attribute value. */
export const attribute = (text: string): string => text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

/** The inline rules for HTML with these tags and schemes. */
export function htmlInline(options: HtmlOptions): InlineRules {
  const { bold, italic, strike } = options.tags;
  const { escape } = options;
  const lineBreak = options.lineBreak ?? '\n';
  const text = (value: string): string => (lineBreak === '\n' ? escape(value) : escape(value).replace(/\n/g, lineBreak));
  const anchor = (href: string, label: string): string => `<a href="${attribute(href)}">${label}</a>`;
  return {
    text,
    code: (code) => `<code>${escape(code)}</code>`,
    strong: (inner) => `<${bold}>${inner}</${bold}>`,
    em: (inner) => `<${italic}>${inner}</${italic}>`,
    del: (inner) => `<${strike}>${inner}</${strike}>`,
    link: (href, label, token) => (hasScheme(href, options.schemes) ? anchor(href, label) : text(token.raw)),
    image: (href, alt, token) => (hasScheme(href, options.schemes) ? anchor(href, escape(alt.trim() || href)) : text(token.raw)),
    br: () => lineBreak,
  };
}

export interface HtmlBlockOptions extends HtmlOptions {
  /** Added to a heading's level (a mail's title is its subject: `#` becomes h2). @default 0 */
  readonly headingShift?: number;
}

/** Block tokens → HTML, one string per block. */
export function htmlBlocks(tokens: readonly Token[], options: HtmlBlockOptions): string[] {
  const rules = htmlInline(options);
  const block = (token: MarkedToken): string => {
    switch (token.type) {
      case 'paragraph':
        return `<p>${renderInline(token.tokens, rules)}</p>`;
      case 'text':
        return token.tokens ? renderInline(token.tokens, rules) : rules.text(token.text);
      case 'heading': {
        const level = Math.min(6, token.depth + (options.headingShift ?? 0));
        return `<h${level}>${renderInline(token.tokens, rules)}</h${level}>`;
      }
      case 'code':
        return `<pre><code${codeClass(token.lang)}>${options.escape(token.text)}</code></pre>`;
      case 'blockquote':
        return `<blockquote>${htmlBlocks(token.tokens, options).join('')}</blockquote>`;
      case 'list':
        return list(token, options);
      case 'hr':
        return '<hr />';
      case 'table':
        return table(token, rules);
      case 'space':
        return '';
      default: // raw HTML, link definitions: shown as written
        return token.raw.trim() === '' ? '' : `<p>${rules.text(token.raw.trim())}</p>`;
    }
  };
  return tokens.map((token) => block(token as MarkedToken)).filter((html) => html !== '');
}

/** ` class="language-x"` for a fence's info string, or nothing. */
export function codeClass(lang: string | undefined): string {
  const language = (lang ?? '').split(/\s/, 1)[0]!.replace(/[^\w+#.-]/g, '');
  return language === '' ? '' : ` class="language-${language}"`;
}

function list(token: Tokens.List, options: HtmlBlockOptions): string {
  const tag = token.ordered ? 'ol' : 'ul';
  const start = token.ordered && typeof token.start === 'number' && token.start !== 1 ? ` start="${token.start}"` : '';
  const items = token.items.map((item) => `<li>${taskBox(item)}${htmlBlocks(itemTokens(item), options).join('')}</li>`);
  return `<${tag}${start}>${items.join('')}</${tag}>`;
}

function table(token: Tokens.Table, rules: InlineRules): string {
  const cell = (tag: string, c: Tokens.TableCell): string => `<${tag}>${renderInline(c.tokens, rules)}</${tag}>`;
  const head = `<thead><tr>${token.header.map((c) => cell('th', c)).join('')}</tr></thead>`;
  const body = token.rows.length === 0 ? '' : `<tbody>${token.rows.map((row) => `<tr>${row.map((c) => cell('td', c)).join('')}</tr>`).join('')}</tbody>`;
  return `<table>${head}${body}</table>`;
}
