/**
 * Markdown (as models write it) → Matrix `org.matrix.custom.html`, plus the message contents
 * the channel sends (text, edits, files) with their relations (threads, replies, edits).
 *
 * The plain `body` is the markdown itself — what Element sends when a person types markdown,
 * and readable in clients that show no HTML. The HTML uses the tags the Matrix spec suggests
 * (strong, em, del, code, pre, a, h1–h6, ul/ol/li, p, br, blockquote, hr); `&`, `<`, `>` and
 * `"` are escaped everywhere, links are kept only for http(s), mailto and matrix URIs.
 */
import { HOLD_MARKERS, renderInlineHtml } from '../../src/outbound/inline-html.ts';

/** Characters per message the channel allows (Matrix itself limits an event to 64 KiB of JSON). */
export const MATRIX_LIMIT = 16_000;
/** Bytes of content JSON a message may take, below the 65,536-byte event limit (room for ids, relations, signatures). */
export const MAX_CONTENT_BYTES = 60_000;

export function escapeHtml(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

/** Renders markdown to Matrix HTML. Never throws; markup it cannot pair up stays literal. */
export function renderHtml(markdown: string): string {
  const blocks = renderBlocks(markdown.replace(HOLD_MARKERS, '').replace(/\r\n?/g, '\n').split('\n'));
  // One paragraph needs no <p> around it (as Element sends it).
  return blocks.length === 1 && blocks[0]!.startsWith('<p>') && blocks[0]!.endsWith('</p>') ? blocks[0]!.slice(3, -4) : blocks.join('');
}

/** Quotes nested deeper than this stay as their text: each level is a call (5000 "> " overflowed the stack). */
const MAX_QUOTE_DEPTH = 32;

function renderBlocks(lines: readonly string[], depth = 0): string[] {
  const out: string[] = [];
  let paragraph: string[] = [];
  const flush = (): void => {
    if (paragraph.length > 0) out.push(`<p>${paragraph.map(renderInline).join('<br />')}</p>`);
    paragraph = [];
  };
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    const fence = /^\s{0,3}(`{3,}|~{3,})\s*([^\s`]*)[^`]*$/.exec(line);
    if (fence) {
      flush();
      const marker = fence[1]!;
      const closing = new RegExp(`^\\s{0,3}${marker[0] === '`' ? '`' : '~'}{${marker.length},}\\s*$`);
      const body: string[] = [];
      i++;
      while (i < lines.length && !closing.test(lines[i]!)) body.push(lines[i++]!);
      const language = fence[2]!.replace(/[^\w+#.-]/g, '');
      out.push(`<pre><code${language ? ` class="language-${language}"` : ''}>${escapeHtml(body.join('\n'))}</code></pre>`);
      continue;
    }
    if (/^\s*$/.test(line)) {
      flush();
      continue;
    }
    const heading = /^\s{0,3}(#{1,6})\s+(.*?)(\s+#+)?\s*$/.exec(line);
    if (heading) {
      flush();
      const level = heading[1]!.length;
      out.push(`<h${level}>${renderInline(heading[2]!)}</h${level}>`);
      continue;
    }
    if (/^\s{0,3}([-*_])(\s*\1){2,}\s*$/.test(line)) {
      flush();
      out.push('<hr />');
      continue;
    }
    if (/^\s{0,3}>/.test(line) && depth < MAX_QUOTE_DEPTH) {
      flush();
      const quoted: string[] = [];
      while (i < lines.length && /^\s{0,3}>/.test(lines[i]!)) quoted.push(lines[i++]!.replace(/^\s{0,3}>\s?/, ''));
      i--;
      out.push(`<blockquote>${renderBlocks(quoted, depth + 1).join('')}</blockquote>`);
      continue;
    }
    if (LIST_ITEM.test(line)) {
      flush();
      const items: string[] = [];
      const kind = listKind(line);
      const indent = LIST_ITEM.exec(line)![1]!.length;
      const sameList = (next: string): boolean => {
        const item = LIST_ITEM.exec(next);
        if (item) return item[1]!.length > indent || listKind(next) === kind; // a top-level item of the other kind starts a new list
        return items.length > 0 && /^\s{2,}\S/.test(next);
      };
      while (i < lines.length && sameList(lines[i]!)) items.push(lines[i++]!);
      i--;
      out.push(renderList(items));
      continue;
    }
    paragraph.push(line);
  }
  flush();
  return out;
}

const LIST_ITEM = /^(\s*)([-*+]|\d{1,9}[.)])\s+(.*)$/;
const listKind = (line: string): 'ol' | 'ul' => (/\d/.test(LIST_ITEM.exec(line)?.[2] ?? '') ? 'ol' : 'ul');

/** A run of list lines: items at the first line's indentation, deeper ones as nested lists. */
function renderList(lines: readonly string[]): string {
  const first = LIST_ITEM.exec(lines[0]!)!;
  const indent = first[1]!.length;
  const ordered = /\d/.test(first[2]!);
  const start = ordered ? Number.parseInt(first[2]!, 10) : 1;
  const items: Array<{ text: string; children: string[] }> = [];
  for (const line of lines) {
    const item = LIST_ITEM.exec(line);
    if (item && item[1]!.length <= indent) items.push({ text: item[3]!, children: [] });
    else if (items.length > 0) items.at(-1)!.children.push(line);
  }
  const html = items.map(({ text, children }) => {
    const nested = children.filter((line) => LIST_ITEM.test(line));
    const continuation = children.length > 0 && nested.length === 0 ? children.map((line) => `<br />${renderInline(line.trim())}`).join('') : '';
    return `<li>${renderInline(text)}${continuation}${nested.length > 0 ? renderList(children.filter((l) => l.trim() !== '')) : ''}</li>`;
  });
  const tag = ordered ? 'ol' : 'ul';
  return `<${tag}${ordered && start !== 1 ? ` start="${start}"` : ''}>${html.join('')}</${tag}>`;
}

const inline = { tags: { bold: 'strong', italic: 'em', strike: 'del' }, safeUrl: /^(https?:\/\/|mailto:|matrix:)/i, escape: escapeHtml } as const;

/** Inline markdown: code spans, links, bold, italic, strikethrough, backslash escapes. */
export function renderInline(text: string): string {
  return renderInlineHtml(text, inline);
}

// ---- message contents ----------------------------------------------------------------------

export type Content = Record<string, unknown>;

/** A text message: the markdown as `body`, its HTML as `formatted_body`; mentions nobody (no accidental pings). */
export function textContent(markdown: string, options: { html?: boolean } = {}): Content {
  const base: Content = { msgtype: 'm.text', body: markdown, 'm.mentions': {} };
  return options.html === false ? base : { ...base, format: 'org.matrix.custom.html', formatted_body: renderHtml(markdown) };
}

/** The fields of an edit (m.replace): the new content, with the "* " fallback for clients without edits. */
export function editContent(eventId: string, markdown: string, options: { html?: boolean } = {}): Content {
  const next = textContent(markdown, options);
  const fallback: Content = { ...next, body: `* ${markdown}` };
  if (typeof next.formatted_body === 'string') fallback.formatted_body = `* ${next.formatted_body}`;
  return { ...fallback, 'm.new_content': next, 'm.relates_to': { rel_type: 'm.replace', event_id: eventId } };
}

/**
 * Where a reply goes. In a thread: the thread relation, with `m.in_reply_to` as the fallback
 * for clients without threads (`is_falling_back`), pointing at `latest` (the event answered,
 * or the thread's newest event we know). Outside threads: a real reply to `replyTo` (in rooms),
 * or nothing (DMs, where quoting is only clutter).
 */
export function relation(options: { thread?: string | undefined; replyTo?: string | undefined; latest?: string | undefined; direct?: boolean }): Content | undefined {
  if (options.thread !== undefined && options.thread !== '') {
    return { rel_type: 'm.thread', event_id: options.thread, is_falling_back: true, 'm.in_reply_to': { event_id: options.latest ?? options.replyTo ?? options.thread } };
  }
  if (options.replyTo !== undefined && options.direct !== true) return { 'm.in_reply_to': { event_id: options.replyTo } };
  return undefined;
}

/** A file message for an uploaded `mxc://` URI. */
export function fileContent(file: { name: string; url: string; mime: string; size: number }): Content {
  return { msgtype: 'm.file', body: file.name, filename: file.name, url: file.url, info: { mimetype: file.mime, size: file.size }, 'm.mentions': {} };
}

const utf8 = new TextEncoder();

/**
 * Length of a markdown part as the channel counts it: its characters, but more when the event
 * it makes (markdown body + HTML) would come near Matrix's 64 KiB event limit (long CJK text,
 * markup that escapes to much longer HTML).
 */
export function measure(markdown: string): number {
  const bytes = utf8.encode(JSON.stringify(markdown)).length + utf8.encode(JSON.stringify(renderHtml(markdown))).length;
  return Math.max(markdown.length, Math.ceil((bytes * MATRIX_LIMIT) / MAX_CONTENT_BYTES));
}
