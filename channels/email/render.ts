/**
 * Replies are written in markdown; a mail carries them as plain text (markdown flattened
 * lightly: emphasis markers, heading hashes and link syntax removed, code indented) and, when
 * configured, as an HTML alternative.
 */

import { HOLD_MARKERS, renderInlineHtml } from '../../src/outbound/inline-html.ts';

const fence = /^\s*(```|~~~)/;

/** Splits markdown into code-fence blocks and the prose between them. */
function blocks(markdown: string): Array<{ code: boolean; lines: string[] }> {
  const result: Array<{ code: boolean; lines: string[] }> = [];
  let current: { code: boolean; lines: string[]; language?: string } = { code: false, lines: [] };
  for (const line of markdown.replace(/\r\n?/g, '\n').split('\n')) {
    if (fence.test(line)) {
      if (current.lines.length > 0 || current.code) result.push(current);
      current = { code: !current.code, lines: [] };
      continue;
    }
    current.lines.push(line);
  }
  if (current.lines.length > 0) result.push(current);
  return result;
}

/** Inline markdown → plain text. */
function plainInline(line: string): string {
  return line
    .replace(/<(https?:\/\/[^>\s]+)>/g, '$1')
    .replace(/!\[([^\][]*)\]\(([^)\s]+)\)/g, (_, alt: string, url: string) => (alt ? `${alt} <${url}>` : url))
    .replace(/\[([^\][]+)\]\(([^)\s]+)\)/g, (_, text: string, url: string) => (text === url ? url : `${text} <${url}>`))
    .replace(/\*\*(?=\S)(.+?)(?<=\S)\*\*/g, '$1')
    .replace(/(^|\W)__(?=\S)(.+?)(?<=\S)__(?!\w)/g, '$1$2')
    .replace(/(^|[^\w*])\*(?=[^\s*])([^*]+?)(?<=[^\s*])\*(?![\w*])/g, '$1$2')
    .replace(/~~(?=\S)(.+?)(?<=\S)~~/g, '$1')
    .replace(/\\([\\`*_{}[\]()#+\-.!>~|])/g, '$1');
}

/** Markdown → the plain-text body of a mail. (A link label holds no "[": one attempt per "[", linear on a long run of them.) */
export function renderPlain(markdown: string): string {
  const out: string[] = [];
  for (const block of blocks(markdown)) {
    if (block.code) {
      out.push(...block.lines.map((line) => (line === '' ? '' : `    ${line}`)));
      continue;
    }
    for (const line of block.lines) {
      const heading = /^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
      if (heading) {
        out.push(plainInline(heading[1]!));
        continue;
      }
      out.push(plainInline(line.replace(/^(\s*)[*+](\s+)/, '$1-$2')).trimEnd());
    }
  }
  return out.join('\n').trim();
}

export function escapeHtml(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

const inline = { tags: { bold: 'strong', italic: 'em', strike: 'del' }, safeUrl: /^(https?:|mailto:)/i, escape: escapeHtml } as const;

/** Inline markdown → HTML (the renderer Telegram and Matrix use too). */
const htmlInline = (line: string): string => renderInlineHtml(line.replace(HOLD_MARKERS, ''), inline);

/** Markdown → a small, self-contained HTML document for the alternative part. */
export function renderHtml(markdown: string): string {
  const out: string[] = [];
  for (const block of blocks(markdown)) {
    if (block.code) {
      out.push(`<pre><code>${escapeHtml(block.lines.join('\n'))}</code></pre>`);
      continue;
    }
    let paragraph: string[] = [];
    let list: { tag: 'ul' | 'ol'; items: string[] } | undefined;
    const flush = (): void => {
      if (paragraph.length > 0) out.push(`<p>${paragraph.join('<br>\n')}</p>`);
      paragraph = [];
      if (list) out.push(`<${list.tag}>${list.items.map((item) => `<li>${item}</li>`).join('')}</${list.tag}>`);
      list = undefined;
    };
    for (const line of block.lines) {
      const heading = /^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$/.exec(line);
      const bullet = /^\s*[-*+]\s+(.*)$/.exec(line);
      const numbered = /^\s*\d+[.)]\s+(.*)$/.exec(line);
      const quote = /^\s*>\s?(.*)$/.exec(line);
      if (line.trim() === '') {
        flush();
      } else if (heading) {
        flush();
        const level = Math.min(heading[1]!.length + 1, 6);
        out.push(`<h${level}>${htmlInline(heading[2]!)}</h${level}>`);
      } else if (bullet || numbered) {
        const tag = bullet ? 'ul' : 'ol';
        if (paragraph.length > 0 || (list && list.tag !== tag)) flush();
        list ??= { tag, items: [] };
        list.items.push(htmlInline((bullet ?? numbered)![1]!));
      } else if (quote) {
        flush();
        out.push(`<blockquote>${htmlInline(quote[1]!)}</blockquote>`);
      } else {
        if (list) flush();
        paragraph.push(htmlInline(line));
      }
    }
    flush();
  }
  return `<!DOCTYPE html><html><head><meta charset="utf-8"></head><body>\n${out.join('\n')}\n</body></html>`;
}
