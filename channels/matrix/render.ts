/**
 * Markdown (as models write it) → Matrix `org.matrix.custom.html`, plus the message contents
 * the channel sends (text, edits, files) with their relations (threads, replies, edits).
 *
 * The plain `body` is the markdown itself — what Element sends when a person types markdown,
 * and readable in clients that show no HTML. The HTML uses the tags the Matrix spec suggests
 * (strong, em, del, code, pre, a, h1–h6, ul/ol/li, p, br, blockquote, hr); `&`, `<`, `>` and
 * `"` are escaped everywhere, links are kept only for http(s), mailto and matrix URIs.
 */
import { htmlBlocks } from '../../src/outbound/html.ts';
import { lex } from '../../src/outbound/markdown.ts';

/** Characters per message the channel allows (Matrix itself limits an event to 64 KiB of JSON). */
export const MATRIX_LIMIT = 16_000;
/** Bytes of content JSON a message may take, below the 65,536-byte event limit (room for ids, relations, signatures). */
export const MAX_CONTENT_BYTES = 60_000;

export function escapeHtml(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

const html = { tags: { bold: 'strong', italic: 'em', strike: 'del' }, schemes: ['http://', 'https://', 'mailto:', 'matrix:'], escape: escapeHtml, lineBreak: '<br />' } as const;

/** Renders markdown to Matrix HTML. Never throws; every tag it writes is closed. */
export function renderHtml(markdown: string): string {
  const blocks = htmlBlocks(lex(markdown), html);
  // One paragraph needs no <p> around it (as Element sends it).
  return blocks.length === 1 && blocks[0]!.startsWith('<p>') && blocks[0]!.endsWith('</p>') ? blocks[0]!.slice(3, -4) : blocks.join('');
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

/**
 * An image clients show inline: `m.image` with info {mimetype, size, w, h}
 * (matrix-org/matrix-spec data/event-schemas/schema/m.room.message$m.image.yaml and
 * core-event-schema/msgtype_infos/image_info.yaml; `body` is the file name when `filename` is
 * the same, so no caption).
 */
export function imageContent(file: { name: string; url: string; mime: string; size: number; width: number; height: number }): Content {
  return {
    msgtype: 'm.image',
    body: file.name,
    filename: file.name,
    url: file.url,
    info: { mimetype: file.mime, size: file.size, w: file.width, h: file.height },
    'm.mentions': {},
  };
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
