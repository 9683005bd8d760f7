/**
 * `http_request` (any method, raw response) and `web_fetch` (GET, HTML as readable text).
 * Both go through `guardedFetch`, so every hop is checked by the SSRF guard, the connection
 * is pinned to the checked address, and time and size are capped.
 */
import { guardedFetch, GuardedFetchError, type GuardedResponse } from '../security/guarded-fetch.ts';
import type { SsrfGuard } from '../security/ssrf.ts';
import { ok, toolError, type Tool, type ToolContext, type ToolResult } from '../tool.ts';

export interface HttpToolOptions {
  /** Decides which URLs may be fetched (see `createSsrfGuard`). */
  readonly guard: SsrfGuard;
  /** Deadline per call, redirects and body included. @default 30_000 */
  readonly timeoutMs?: number;
  /** Response bytes read; the rest is dropped and the result says so. @default 1_000_000 */
  readonly maxBytes?: number;
  /** Characters of body text returned to the model (web_fetch's `max_chars` may ask for less or up to this). @default 20_000 */
  readonly maxChars?: number;
  /** Redirects followed, each checked. @default 5 */
  readonly maxRedirects?: number;
  /** Sent unless the call sets its own. @default 'Mozilla/5.0 (compatible; Switchboard/0.1)' */
  readonly userAgent?: string;
}

export interface HttpRequestArgs {
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE' | 'HEAD';
  url: string;
  headers?: Record<string, string>;
  body?: string;
}

export interface WebFetchArgs {
  url: string;
  max_chars?: number;
}

const methods = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD'] as const;

/** Set by the transport (Host, framing, compression) or hop-by-hop (RFC 9110 §7.6.1): not the model's to choose. */
const forbiddenHeaders = new Set([
  'host', 'content-length', 'transfer-encoding', 'connection', 'keep-alive', 'proxy-connection', 'proxy-authorization',
  'proxy-authenticate', 'te', 'trailer', 'upgrade', 'expect', 'accept-encoding',
]);

/** Response headers worth showing the model; the rest are mostly noise. */
const shownHeaders = [
  'content-type', 'content-length', 'location', 'retry-after', 'etag', 'last-modified', 'www-authenticate', 'allow',
  'x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset',
];

/** Builds `http_request`. */
export function createHttpRequestTool(options: HttpToolOptions): Tool<HttpRequestArgs> {
  const settings = resolveOptions(options);
  return {
    name: 'http_request',
    description:
      'Sends an HTTP request to a public URL and returns the status, main headers and body (text, capped). ' +
      'Use web_fetch instead to read a web page. Private and local addresses are refused unless the operator allowed them.',
    parameters: {
      type: 'object',
      properties: {
        method: { type: 'string', enum: [...methods], description: 'HTTP method' },
        url: { type: 'string', description: 'Absolute http(s) URL' },
        headers: { type: 'object', additionalProperties: { type: 'string' }, description: 'Request headers (no Host or hop-by-hop headers)' },
        body: { type: 'string', description: 'Request body; JSON is sent as application/json unless Content-Type is given' },
      },
      required: ['method', 'url'],
      additionalProperties: false,
    },
    assess(args) {
      const method = String(args.method).toUpperCase();
      const readOnly = method === 'GET' || method === 'HEAD';
      return { risk: readOnly ? 'low' : 'medium', mutates: !readOnly, summary: `http_request: ${method} ${args.url}` };
    },
    async execute(args, ctx) {
      const method = String(args.method).toUpperCase();
      if (!(methods as readonly string[]).includes(method)) return toolError(`Method ${JSON.stringify(args.method)} is not supported; use one of ${methods.join(', ')}.`);
      if (args.body !== undefined && (method === 'GET' || method === 'HEAD')) return toolError(`A ${method} request cannot have a body; use POST, PUT or PATCH.`);
      const headers = checkHeaders(args.headers ?? {});
      if (typeof headers === 'string') return toolError(headers);
      if (args.body !== undefined && !Object.keys(headers).some((name) => name.toLowerCase() === 'content-type')) {
        headers['content-type'] = looksLikeJson(args.body) ? 'application/json' : 'text/plain; charset=utf-8';
      }
      const response = await fetchFor(ctx, settings, args.url, { method, headers: { 'user-agent': settings.userAgent, ...headers }, body: args.body });
      if ('kind' in response) return response;
      const lines = [`HTTP ${response.status} ${response.statusText}`.trimEnd(), ...redirectNote(response)];
      for (const name of shownHeaders) if (response.headers[name] !== undefined) lines.push(`${name}: ${response.headers[name]}`);
      if (method === 'HEAD') return ok(lines.join('\n'));
      lines.push('');
      const contentType = response.headers['content-type'];
      if (response.bytes.length === 0) lines.push('(empty body)');
      else if (isBinary(contentType, response.bytes)) {
        lines.push(`[binary body: ${contentType ?? 'unknown type'}, ${response.bytes.length}${response.truncated ? '+' : ''} bytes, not shown]`);
      } else lines.push(...capped(response.text, settings.maxChars, response, settings.maxBytes));
      return ok(lines.join('\n'));
    },
  };
}

/** Builds `web_fetch`. */
export function createWebFetchTool(options: HttpToolOptions): Tool<WebFetchArgs> {
  const settings = resolveOptions(options);
  return {
    name: 'web_fetch',
    description:
      'Fetches a public web page (GET) and returns it as readable text: HTML is converted (links kept as [url], scripts and styles dropped), ' +
      `other text as is. Output is capped at max_chars (default and maximum ${settings.maxChars}).`,
    parameters: {
      type: 'object',
      properties: {
        url: { type: 'string', description: 'Absolute http(s) URL' },
        max_chars: { type: 'integer', minimum: 100, maximum: settings.maxChars, description: 'Characters of text to return' },
      },
      required: ['url'],
      additionalProperties: false,
    },
    assess: (args) => ({ risk: 'low', mutates: false, summary: `web_fetch: ${args.url}` }),
    async execute(args, ctx) {
      const maxChars = Math.max(100, Math.min(settings.maxChars, args.max_chars ?? settings.maxChars));
      const accept = 'text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.5';
      const response = await fetchFor(ctx, settings, args.url, { method: 'GET', headers: { 'user-agent': settings.userAgent, accept } });
      if ('kind' in response) return response;
      const contentType = response.headers['content-type'];
      if (isBinary(contentType, response.bytes)) {
        return toolError(`${response.url} is ${contentType ?? 'binary data'} (${response.bytes.length}${response.truncated ? '+' : ''} bytes), not text; web_fetch reads HTML and text only.`);
      }
      const html = /html/i.test(contentType ?? '') || (contentType === undefined && /^\s*<(!doctype html|html)/i.test(response.text));
      const rawTitle = html ? /<title[^>]*>([^<]*)<\/title>/i.exec(response.text)?.[1]?.trim() : undefined;
      const title = rawTitle ? await htmlToText(rawTitle, response.url, settings.maxBytes) : undefined;
      const text = html ? await htmlToText(response.text, response.url, settings.maxBytes) : response.text;
      if (response.status >= 400) {
        return toolError(`HTTP ${response.status} ${response.statusText} from ${response.url}. The page says: ${text.slice(0, 500).trim() || '(nothing)'}`);
      }
      const lines = [`URL: ${response.url}`, ...redirectNote(response)];
      if (title) lines.push(`Title: ${title}`);
      lines.push('', ...capped(text.trim(), maxChars, response, settings.maxBytes));
      return ok(lines.join('\n'));
    },
  };
}

type Settings = Required<Omit<HttpToolOptions, 'guard'>> & { readonly guard: SsrfGuard };

function resolveOptions(options: HttpToolOptions): Settings {
  const settings = {
    guard: options.guard,
    timeoutMs: options.timeoutMs ?? 30_000,
    maxBytes: options.maxBytes ?? 1_000_000,
    maxChars: options.maxChars ?? 20_000,
    maxRedirects: options.maxRedirects ?? 5,
    userAgent: options.userAgent ?? 'Mozilla/5.0 (compatible; Switchboard/0.1)',
  };
  for (const key of ['timeoutMs', 'maxBytes', 'maxChars'] as const) {
    if (!Number.isInteger(settings[key]) || settings[key] <= 0) throw new TypeError(`http tools: ${key} must be a positive integer, got ${String(settings[key])}`);
  }
  if (!Number.isInteger(settings.maxRedirects) || settings.maxRedirects < 0) throw new TypeError(`http tools: maxRedirects must be a non-negative integer, got ${String(settings.maxRedirects)}`);
  return settings;
}

async function fetchFor(ctx: ToolContext, settings: Settings, url: string, init: { method: string; headers: Record<string, string>; body?: string }): Promise<GuardedResponse | ToolResult> {
  try {
    const response = await guardedFetch(settings.guard, url, { ...init, signal: ctx.signal }, settings);
    ctx.log.debug({ method: init.method, url: response.url, status: response.status, bytes: response.bytes.length }, 'http tool fetched');
    return response;
  } catch (err) {
    if (!(err instanceof GuardedFetchError)) throw err;
    ctx.log.info({ method: init.method, url, kind: err.kind }, `http tool: ${err.message}`);
    return toolError(err.message);
  }
}

/** Copies model-supplied headers, or says which one is not allowed. */
function checkHeaders(headers: Record<string, string>): Record<string, string> | string {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (forbiddenHeaders.has(name.toLowerCase())) return `Header ${JSON.stringify(name)} cannot be set: Host, framing, compression and hop-by-hop headers are managed by the tool. Remove it.`;
    if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(name)) return `Header name ${JSON.stringify(name)} is not a valid HTTP header name.`;
    if (typeof value !== 'string' || /[\r\n\0]/.test(value)) return `Header ${JSON.stringify(name)} must be a single-line string.`;
    out[name] = value;
  }
  return out;
}

function looksLikeJson(body: string): boolean {
  if (!/^\s*[[{]/.test(body)) return false;
  try {
    JSON.parse(body);
    return true;
  } catch {
    return false;
  }
}

/** Text types by media type; without one, a NUL byte in the first KB means binary. */
function isBinary(contentType: string | undefined, bytes: Buffer): boolean {
  if (contentType === undefined || contentType.trim() === '') return bytes.subarray(0, 1024).includes(0);
  const type = contentType.split(';')[0]!.trim().toLowerCase();
  return !(
    type.startsWith('text/') ||
    /[/+](json|xml)$/.test(type) ||
    /^application\/(javascript|ecmascript|x-www-form-urlencoded|x-ndjson|yaml|x-yaml|toml|graphql|sql|x-sh)$/.test(type)
  );
}

function redirectNote(response: GuardedResponse): string[] {
  const n = response.redirects.length;
  return n === 0 ? [] : [`(followed ${n} redirect${n === 1 ? '' : 's'} to ${response.url})`];
}

/** The text cut to `maxChars`, with a note for each cap that was hit. */
function capped(text: string, maxChars: number, response: GuardedResponse, maxBytes: number): string[] {
  const out = [text.length > maxChars ? text.slice(0, maxChars) : text];
  if (text.length > maxChars) out.push(`[truncated: showing ${maxChars} of ${text.length} characters]`);
  if (response.truncated) out.push(`[truncated: the response was larger than ${maxBytes} bytes; only the first ${maxBytes} were read]`);
  return out;
}

function absolute(path: string, base: string): string {
  if (/^\s*javascript:/i.test(path)) return '';
  try {
    return new URL(path, base).href;
  } catch {
    return path;
  }
}

/** HTML to readable text; html-to-text is loaded on first use so start-up does not pay for it. */
async function htmlToText(html: string, baseUrl: string, maxBytes: number): Promise<string> {
  const { convert } = await import('html-to-text');
  const skip = { format: 'skip' } as const;
  return convert(html, {
    wordwrap: false,
    limits: { maxInputLength: maxBytes },
    selectors: [
      // Relative links resolved the way a browser would (html-to-text's baseUrl only prepends).
      { selector: 'a', options: { pathRewrite: (path: string) => absolute(path, baseUrl), hideLinkHrefIfSameAsText: true, linkBrackets: ['[', ']'] } },
      { selector: 'img', ...skip },
      { selector: 'table', format: 'dataTable', options: { maxColumnWidth: 60 } },
      ...['head', 'script', 'style', 'noscript', 'svg', 'template', 'iframe', 'button'].map((selector) => ({ selector, ...skip })),
    ],
  }).replace(/\n{3,}/g, '\n\n');
}
