/**
 * Markdown (as models write it) → Telegram HTML (parse_mode "HTML"), and the visible text
 * Telegram shows for it. Telegram's HTML is small: <b>, <i>, <s>, <u>, <code>, <pre>,
 * <a href>, <blockquote>; only & < > (and " in attributes) need escaping. Newlines are kept
 * as they are. Telegram counts its 4096-character limit on the visible text, so that is what
 * `visibleLength` measures.
 */
import { codeClass, htmlInline } from '../../src/outbound/html.ts';
import { lex, listText, prefixLines, renderInline, tableLines, type MarkedToken, type Token } from '../../src/outbound/markdown.ts';

/** Telegram's message-length limit, in visible characters. */
export const TELEGRAM_LIMIT = 4096;
/**
 * The Bot API server refuses a text longer than this many bytes of raw UTF-8 — the HTML as
 * sent, tags and escapes included — before it parses any entity (tdlib/telegram-bot-api,
 * telegram-bot-api/Client.cpp, get_formatted_text: `text.size() > (1 << 15)` → 400 "Bad Request:
 * text is too long"). Markup-heavy text (links, `&`, bold runs) reaches it well under 4096
 * visible characters.
 */
export const TELEGRAM_RAW_LIMIT = 1 << 15;

export function escapeHtml(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

const inline = htmlInline({ tags: { bold: 'b', italic: 'i', strike: 's' }, schemes: ['http://', 'https://', 'tg://', 'mailto:'], escape: escapeHtml });

/** Renders markdown to Telegram HTML. Never throws; every tag it writes is closed. */
export function renderHtml(markdown: string): string {
  return blocks(lex(markdown), false);
}

/** Blocks one per line; `quoted` inside a quote (Telegram nests neither quotes nor code in one). */
function blocks(tokens: readonly Token[], quoted: boolean): string {
  return tokens.map((token) => block(token as MarkedToken, quoted)).join('\n');
}

function block(token: MarkedToken, quoted: boolean): string {
  switch (token.type) {
    case 'paragraph':
    case 'text':
      return token.tokens ? renderInline(token.tokens, inline) : escapeHtml(token.text);
    case 'heading':
      return `<b>${renderInline(token.tokens, inline)}</b>`;
    case 'hr':
      return '———';
    case 'code':
      return quoted ? escapeHtml(token.text) : pre(token.text, token.lang);
    case 'table':
      return quoted ? escapeHtml(tableLines(token).join('\n')) : pre(tableLines(token).join('\n'), undefined);
    case 'blockquote':
      return quoted ? prefixLines(blocks(token.tokens, true), '&gt; ') : `<blockquote>${blocks(token.tokens, true)}</blockquote>`;
    case 'list':
      return listText(token, '•', (tokens) => blocks(tokens, quoted));
    case 'space':
      return '';
    default: // raw HTML, link definitions: shown as written
      return escapeHtml(token.raw.replace(/\n+$/, ''));
  }
}

function pre(code: string, lang: string | undefined): string {
  const language = codeClass(lang);
  return language === '' ? `<pre>${escapeHtml(code)}</pre>` : `<pre><code${language}>${escapeHtml(code)}</code></pre>`;
}

const NAMED: Record<string, string> = { lt: '<', gt: '>', amp: '&', quot: '"' };

/** Decodes the entities Telegram understands; anything else stays as written. */
export function decodeEntities(text: string): string {
  return text.replace(/&(#x[0-9a-f]+|#\d+|[a-z]+);/gi, (whole, name: string) => {
    if (name[0] === '#') {
      const code = name[1] === 'x' || name[1] === 'X' ? Number.parseInt(name.slice(2), 16) : Number(name.slice(1));
      return code > 0 && code <= 0x10ffff ? String.fromCodePoint(code) : whole;
    }
    return NAMED[name.toLowerCase()] ?? whole;
  });
}

/** The text Telegram shows for a piece of its HTML: tags dropped, entities decoded. */
export function visibleText(html: string): string {
  return decodeEntities(html.replace(/<[^<>]*>/g, '')); // [^<>]: a run of "<" stays linear
}

/** What the markdown shows as once rendered: the plain-text fallback when Telegram rejects the markup. */
export function plainText(markdown: string): string {
  return visibleText(renderHtml(markdown));
}

/**
 * Length of a markdown part as Telegram counts it, against {@link TELEGRAM_LIMIT}: the visible
 * characters (UTF-16 units), or the raw UTF-8 bytes of its HTML scaled to the same limit
 * (32768 / 4096 = 8 bytes a unit), whichever is more — so a part within the limit passes both
 * of Telegram's checks. The outbox's splitter needs no other change.
 */
export function measure(markdown: string): number {
  const html = renderHtml(markdown);
  return Math.max(visibleText(html).length, Math.ceil((Buffer.byteLength(html, 'utf8') * TELEGRAM_LIMIT) / TELEGRAM_RAW_LIMIT));
}

/**
 * A part as it is sent: its HTML, rendered once, whether that is within Telegram's raw-text
 * limit (else it goes as plain text), and the plain text the fallback sends.
 */
export function rendered(markdown: string): { readonly html: string; readonly fitsRaw: boolean; plain(): string } {
  const html = renderHtml(markdown);
  return { html, fitsRaw: Buffer.byteLength(html, 'utf8') <= TELEGRAM_RAW_LIMIT, plain: () => visibleText(html) };
}
