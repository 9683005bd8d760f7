/**
 * The browser chat's endpoints: the signed-in operator sends a message (with files) into the
 * `web` channel, reads their conversation back, and fetches files the agent sent them. Replies
 * arrive over the console's event stream as they are written.
 */
import { createReadStream, statSync } from 'node:fs';
import type { ApiRoute } from './api.ts';
import type { ChatUpload } from './deps.ts';
import { HttpError, query, securityHeaders, send, str } from './http.ts';

/** Files per message, and the whole request (base64 makes files a third larger). */
const maxFiles = 5;
const maxChatBody = 12 * 1024 * 1024;
/** Largest file, as the page says (console/src/pages/chat.tsx); enforced here, not only there. */
const defaultMaxFileBytes = 8 * 1024 * 1024;

/** "8 MB" for 8 MiB: how the page and the README name the limit. */
const megabytes = (bytes: number): string => `${Math.round((bytes / 1024 / 1024) * 10) / 10} MB`;

/**
 * `Content-Disposition` for a download: an ASCII `filename` for old clients and the real name
 * as `filename*=UTF-8''…` (RFC 6266 / 5987). A header holds Latin-1 only: a raw non-Latin-1
 * name made Node throw, and the download a 500.
 */
export function attachmentDisposition(name: string): string {
  const ascii = name.replace(/[^\x20-\x7e]|["\\%]/g, '_');
  // (a lone surrogate would make encodeURIComponent throw: it becomes U+FFFD)
  const encoded = encodeURIComponent(name.replace(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g, '\uFFFD')).replace(/['()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
  return `attachment; filename="${ascii}"; filename*=UTF-8''${encoded}`;
}

function uploads(value: unknown, maxFileBytes: number): ChatUpload[] {
  if (value === undefined) return [];
  if (!Array.isArray(value)) throw new HttpError(400, '"files" must be an array');
  if (value.length > maxFiles) throw new HttpError(400, `at most ${maxFiles} files per message`);
  return value.map((file: unknown, i) => {
    if (typeof file !== 'object' || file === null) throw new HttpError(400, `files[${i}] must be an object {name, mime, data}`);
    const { name, mime, data } = file as Record<string, unknown>;
    if (typeof name !== 'string' || name === '' || name.length > 200) throw new HttpError(400, `files[${i}].name must be a string of 1–200 characters`);
    if (mime !== undefined && (typeof mime !== 'string' || mime.length > 100)) throw new HttpError(400, `files[${i}].mime must be a string`);
    if (typeof data !== 'string' || !/^[A-Za-z0-9+/]*={0,2}$/.test(data)) throw new HttpError(400, `files[${i}].data must be base64`);
    const bytes = Buffer.from(data, 'base64');
    if (bytes.length > maxFileBytes) throw new HttpError(413, `files[${i}]: ${name} is larger than ${megabytes(maxFileBytes)} (${bytes.length} bytes); send files of at most ${megabytes(maxFileBytes)}`);
    return { name, ...(typeof mime === 'string' ? { mime } : {}), data: bytes };
  });
}

export const chatRoutes: readonly ApiRoute[] = [
  {
    method: 'POST',
    path: '/api/console/chat',
    auth: 'session',
    maxBodyBytes: maxChatBody,
    handle: async (_request, response, { deps, json, session }) => {
      const chat = deps.chat;
      if (!chat) throw new HttpError(404, 'the browser chat is not available in this daemon');
      if (session.bearer) throw new HttpError(400, 'the browser chat needs a signed-in operator (a session), not a bearer token');
      const body = await json();
      const text = str(body, 'text', 20_000, true);
      const files = uploads(body.files, deps.maxUploadBytes ?? defaultMaxFileBytes);
      if (text.trim() === '' && files.length === 0) throw new HttpError(400, 'send some text or a file');
      const id = body.id;
      if (id !== undefined && (typeof id !== 'string' || !/^[A-Za-z0-9_-]{8,64}$/.test(id))) throw new HttpError(400, 'id must be 8 to 64 letters, digits, "_" or "-" (the page\'s own id for this message)');
      send(response, 202, await chat.post(session.operator, text, files, id));
    },
  },
  {
    method: 'GET',
    path: '/api/console/chat/history',
    auth: 'session',
    handle: async (_request, response, { deps, session }) => {
      const chat = deps.chat;
      if (!chat) throw new HttpError(404, 'the browser chat is not available in this daemon');
      // In the conversation's own order (each message, then its replies), commands included: the page draws it as it comes.
      send(response, 200, { messages: await deps.queries.chat(chat.conversation(session.operator), 200) });
    },
  },
  {
    method: 'GET',
    path: '/api/console/chat/file',
    auth: 'session',
    handle: async (_request, response, { deps, url, session }) => {
      const id = query(url, 'id', 100);
      const file = id === undefined ? undefined : deps.chat?.file(session.operator, id);
      if (!file) throw new HttpError(404, 'no such file');
      let size: number;
      try {
        size = statSync(file.path).size;
      } catch {
        throw new HttpError(404, `${file.name} is no longer in the workspace`);
      }
      response.writeHead(200, {
        ...securityHeaders,
        // an image the channel recognised by its bytes (JPEG, PNG, GIF, WebP: never SVG, which can hold script) is served as itself for the page's <img>
        'content-type': file.mime ?? 'application/octet-stream',
        'content-length': size,
        'content-disposition': attachmentDisposition(file.name),
        'cache-control': 'no-store',
      });
      createReadStream(file.path).pipe(response);
    },
  },
];
