/**
 * Markdown → Discord message content. Discord renders most of standard markdown itself
 * (bold, italics, strike, code, fences, quotes, lists, `#`–`###` headings, masked links), so
 * the text passes through; what it does not render is rewritten: tables become a monospaced
 * code block, deeper headings become bold lines, rules become a line, images become links,
 * task-list boxes become ☐ / ☑. Code fences are never touched.
 */
import { lex, listText, plainTextRules, prefixLines, renderInline, tableLines, type InlineRules, type MarkedToken, type Token } from '../../src/outbound/markdown.ts';
import { closeOpenFence } from '../../src/outbound/split-markup.ts';

/** Discord's limit on a message's content. */
export const DISCORD_LIMIT = 2000;

/** Renders markdown for Discord: the text as written, but for what Discord does not render. */
export function renderDiscord(markdown: string): string {
  return lex(markdown)
    .map((token) => block(token))
    .join('');
}

/** Length of a markdown part as Discord counts it once rendered (UTF-16 units: never under the real count). */
export function measureDiscord(markdown: string): number {
  return renderDiscord(markdown).length;
}

/** A block as written, or rewritten when it holds what Discord does not render (its line breaks after it kept). */
function block(token: Token): string {
  if (token.type === 'code') return closeFence(token.raw);
  if (token.type === 'html') return closeOpenFence(token.raw);
  if (!needsRewrite(token)) return token.raw;
  return rewrite(token as MarkedToken) + (/\n*$/.exec(token.raw)?.[0] ?? '');
}

function rewrite(token: MarkedToken): string {
  switch (token.type) {
    case 'table':
      return ['```', ...tableLines(token, (tokens) => renderInline(tokens, cellRules)), '```'].join('\n');
    case 'heading': {
      const text = inline(token.tokens).trim();
      return token.depth <= 3 ? `${'#'.repeat(token.depth)} ${text}` : text === '' ? '' : `**${text}**`;
    }
    case 'hr':
      return '──────────';
    case 'blockquote':
      return prefixLines(children(token.tokens), '> ');
    case 'list':
      return listText(token, '-', children);
    case 'paragraph':
    case 'text':
      return token.tokens ? inline(token.tokens) : token.raw;
    default:
      return token.raw;
  }
}

/** A code fence the text leaves open (a reply cut short) closed: Discord would show its backticks. */
function closeFence(raw: string): string {
  const marker = /^ {0,3}(`{3,}|~{3,})/.exec(raw)?.[1];
  if (marker === undefined) return raw; // indented code
  const lines = raw.replace(/\n+$/, '').split('\n');
  const last = lines.at(-1)!.trim();
  const closed = lines.length > 1 && last.length >= marker.length && [...last].every((char) => char === marker[0]);
  return closed ? raw : `${raw.replace(/\n+$/, '')}\n${marker}${/\n*$/.exec(raw)![0]}`;
}

const children = (tokens: readonly Token[]): string => tokens.map((token) => block(token)).join('').replace(/\n+$/, '');

/** Whether a token holds something Discord shows wrongly: a table, a deep heading, a rule, an image, a task box. */
function needsRewrite(token: Token): boolean {
  const t = token as MarkedToken;
  switch (t.type) {
    case 'table':
    case 'hr':
    case 'image':
      return true;
    case 'heading':
      return t.depth > 3 || t.tokens.some(needsRewrite);
    case 'list':
      return t.items.some((item) => item.task || item.tokens.some(needsRewrite));
    default:
      return 'tokens' in t && Array.isArray(t.tokens) && (t.tokens as Token[]).some(needsRewrite);
  }
}

/** Inline tokens as written, images made links (Discord shows no inline images). */
function inline(tokens: readonly Token[]): string {
  return tokens.map((token) => inlineToken(token as MarkedToken)).join('');
}

function inlineToken(token: MarkedToken): string {
  if (token.type === 'image') return token.text.trim() === '' ? token.href : `[${token.text}](${token.href})`;
  if (!('tokens' in token) || !Array.isArray(token.tokens) || !token.tokens.some(needsRewrite)) return token.raw;
  // the markers around the content (** … **, [ … ](url)) stay, the content is rewritten
  const content = (token.tokens as Token[]).map((child) => child.raw).join('');
  const at = token.raw.indexOf(content);
  return token.raw.slice(0, at) + inline(token.tokens as Token[]) + token.raw.slice(at + content.length);
}

/** Cells are shown in a code block, where markup would show literally: their text, links as "text (url)". */
const cellRules: InlineRules = { ...plainTextRules((url) => `(${url})`), code: (code) => code };

/**
 * Cuts content that is still over the limit (the outbox splits by `measure`, so this is a
 * safety net): at a line break, else a space, else anywhere — never inside a surrogate pair.
 */
export function chunkContent(content: string, limit = DISCORD_LIMIT): string[] {
  const chunks: string[] = [];
  let rest = content;
  while (rest.length > limit) {
    let cut = rest.lastIndexOf('\n', limit);
    if (cut < limit / 2) cut = rest.lastIndexOf(' ', limit);
    if (cut < limit / 2) cut = limit;
    const code = rest.charCodeAt(cut - 1);
    if (cut === limit && code >= 0xd800 && code <= 0xdbff) cut--;
    chunks.push(rest.slice(0, cut));
    rest = rest.slice(cut).replace(/^[ \n]/, '');
  }
  if (rest !== '' || chunks.length === 0) chunks.push(rest);
  return chunks;
}
