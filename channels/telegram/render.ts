/**
 * Markdown (as models write it) → Telegram HTML (parse_mode "HTML"), and the visible text
 * Telegram shows for it. Telegram's HTML is small: <b>, <i>, <s>, <u>, <code>, <pre>,
 * <a href>, <blockquote>; only & < > (and " in attributes) need escaping. Newlines are kept
 * as they are. Telegram counts its 4096-character limit on the visible text, so that is what
 * `visibleLength` measures.
 */

/** Telegram's message-length limit, in visible characters. */
export const TELEGRAM_LIMIT = 4096;

export function escapeHtml(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

const escapeAttribute = (text: string): string => escapeHtml(text).replace(/"/g, '&quot;');

/** Renders markdown to Telegram HTML. Never throws; markup it cannot pair up stays literal. */
export function renderHtml(markdown: string): string {
  const lines = markdown.replace(/\uE000/g, '').replace(/\r\n?/g, '\n').split('\n');
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

const SAFE_URL = /^(https?:\/\/|tg:\/\/|mailto:)/i;

/** Inline markdown: code spans, links, bold, italic, strikethrough, backslash escapes. */
export function renderInline(text: string): string {
  const held: string[] = [];
  const hold = (html: string): string => `\uE000${held.push(html) - 1}\uE000`;
  const rest = text
    // code spans first: nothing inside them is markup
    .replace(/(`+)([\s\S]*?[^`])\1(?!`)/g, (_, _ticks: string, code: string) => hold(`<code>${escapeHtml(code.replace(/^ (.*) $/, '$1'))}</code>`))
    .replace(/\\([!-/:-@[-`{-~])/g, (_, char: string) => hold(escapeHtml(char)))
    .replace(/<(https?:\/\/[^\s<>]+)>/g, (_, url: string) => hold(`<a href="${escapeAttribute(url)}">${escapeHtml(url)}</a>`))
    .replace(/\[([^\]\n]+)\]\(\s*([^\s()]+(?:\([^\s()]*\))?[^\s()]*)(?:\s+"[^"]*")?\s*\)/g, (whole, label: string, url: string) =>
      SAFE_URL.test(url) ? hold(`<a href="${escapeAttribute(url)}">${styled(escapeHtml(label))}</a>`) : whole,
    );
  return styled(escapeHtml(rest)).replace(/\uE000(\d+)\uE000/g, (_, n: string) => held[Number(n)]!);
}

/** Emphasis on escaped text, or the text as it is when the markup does not pair up. */
function styled(escaped: string): string {
  const html = emphasis(escaped);
  return balanced(html) ? html : escaped;
}

/** Bold, italic and strikethrough on already-escaped text. */
function emphasis(text: string): string {
  return text
    .replace(/\*\*\*(?=[^\s*])([\s\S]*?[^\s*])\*\*\*/g, '<b><i>$1</i></b>')
    .replace(/\*\*(?=\S)([\s\S]*?\S)\*\*/g, '<b>$1</b>')
    .replace(/(^|[^\w])__(?=\S)([\s\S]*?\S)__(?!\w)/g, '$1<b>$2</b>')
    .replace(/~~(?=\S)([\s\S]*?\S)~~/g, '<s>$1</s>')
    .replace(/(^|[^\w*])\*(?=[^\s*])([^*]*?[^\s*])\*(?![\w*])/g, '$1<i>$2</i>')
    .replace(/(^|[^\w])_(?=[^\s_])([^_]*?[^\s_])_(?!\w)/g, '$1<i>$2</i>');
}

/** Whether the tags emphasis() added nest properly (crossing markup like `**a *b** c*` does not). */
function balanced(html: string): boolean {
  const stack: string[] = [];
  for (const match of html.matchAll(/<(\/?)([a-z]+)[^>]*>/g)) {
    if (match[1] === '') stack.push(match[2]!);
    else if (stack.pop() !== match[2]) return false;
  }
  return stack.length === 0;
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
  return decodeEntities(html.replace(/<[^>]*>/g, ''));
}

/** What the markdown shows as once rendered: the plain-text fallback when Telegram rejects the markup. */
export function plainText(markdown: string): string {
  return visibleText(renderHtml(markdown));
}

/** Length of a markdown part as Telegram counts it (visible characters, UTF-16 units). */
export function measure(markdown: string): number {
  return plainText(markdown).length;
}
