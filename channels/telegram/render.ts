/**
 * Markdown (as models write it) → Telegram HTML (parse_mode "HTML"), and the visible text
 * Telegram shows for it. Telegram's HTML is small: <b>, <i>, <s>, <u>, <code>, <pre>,
 * <a href>, <blockquote>; only & < > (and " in attributes) need escaping. Newlines are kept
 * as they are. Telegram counts its 4096-character limit on the visible text, so that is what
 * `visibleLength` measures.
 */
import { HOLD_MARKERS, renderInlineHtml } from '../../src/outbound/inline-html.ts';

/** Telegram's message-length limit, in visible characters. */
export const TELEGRAM_LIMIT = 4096;

export function escapeHtml(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

/** Renders markdown to Telegram HTML. Never throws; markup it cannot pair up stays literal. */
export function renderHtml(markdown: string): string {
  const lines = markdown.replace(HOLD_MARKERS, '').replace(/\r\n?/g, '\n').split('\n');
  const out: string[] = [];
  let quote: string[] | undefined;
  const flushQuote = (): void => {
    if (quote) out.push(`<blockquote>${quote.join('\n')}</blockquote>`);
    quote = undefined;
  };
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    const fence = /^\s{0,3}(`{3,}|~{3,})\s*([^\s`]*)[^`]*$/.exec(line);
    if (fence) {
      flushQuote();
      const marker = fence[1]!;
      const body: string[] = [];
      i++;
      while (i < lines.length && !new RegExp(`^\\s{0,3}${marker[0] === '`' ? '`' : '~'}{${marker.length},}\\s*$`).test(lines[i]!)) body.push(lines[i++]!);
      const language = fence[2]!.replace(/[^\w+#.-]/g, '');
      const code = escapeHtml(body.join('\n'));
      out.push(language ? `<pre><code class="language-${language}">${code}</code></pre>` : `<pre>${code}</pre>`);
      continue;
    }
    const quoted = /^\s{0,3}>\s?(.*)$/.exec(line);
    if (quoted) {
      (quote ??= []).push(renderInline(quoted[1]!));
      continue;
    }
    flushQuote();
    out.push(renderLine(line));
  }
  flushQuote();
  return out.join('\n');
}

function renderLine(line: string): string {
  const heading = /^\s{0,3}#{1,6}\s+(.*?)(\s+#+)?\s*$/.exec(line);
  if (heading) return `<b>${renderInline(heading[1]!)}</b>`;
  if (/^\s{0,3}([-*_])(\s*\1){2,}\s*$/.test(line)) return '———';
  const bullet = /^(\s*)[-*+]\s+(.*)$/.exec(line);
  if (bullet) return `${bullet[1]}• ${renderInline(bullet[2]!)}`;
  return renderInline(line);
}

const inline = { tags: { bold: 'b', italic: 'i', strike: 's' }, safeUrl: /^(https?:\/\/|tg:\/\/|mailto:)/i, escape: escapeHtml } as const;

/** Inline markdown: code spans, links, bold, italic, strikethrough, backslash escapes. */
export function renderInline(text: string): string {
  return renderInlineHtml(text, inline);
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

/** Length of a markdown part as Telegram counts it (visible characters, UTF-16 units). */
export function measure(markdown: string): number {
  return plainText(markdown).length;
}
