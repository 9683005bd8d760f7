/**
 * A small, safe markdown renderer for chat replies: the text becomes Preact elements (never
 * HTML strings), so nothing the model writes can run as markup. Fenced code, inline code,
 * bold, italic, links (http/https/mailto only), headings, lists and paragraphs.
 */
import type { ComponentChildren } from 'preact';

const inlinePattern = /(`[^`\n]+`)|(\*\*[^*\n]+\*\*)|(\*[^*\n]+\*|_[^_\n]+_)|(\[[^\]\n]+\]\([^)\s]+\))|(https?:\/\/[^\s<>()]+)/g;

function safeHref(href: string): string | undefined {
  return /^(https?:|mailto:)/i.test(href) ? href : undefined;
}

export function inline(text: string): ComponentChildren[] {
  const out: ComponentChildren[] = [];
  let last = 0;
  for (const match of text.matchAll(inlinePattern)) {
    const at = match.index ?? 0;
    if (at > last) out.push(text.slice(last, at));
    const [whole, code, bold, italic, link, url] = match;
    if (code) out.push(<code>{code.slice(1, -1)}</code>);
    else if (bold) out.push(<strong>{inline(bold.slice(2, -2))}</strong>);
    else if (italic) out.push(<em>{italic.slice(1, -1)}</em>);
    else if (link) {
      const m = /^\[([^\]]+)\]\(([^)]+)\)$/.exec(link)!;
      const href = safeHref(m[2]!);
      out.push(href ? <a href={href} target="_blank" rel="noopener noreferrer">{m[1]}</a> : whole);
    } else if (url) out.push(<a href={url} target="_blank" rel="noopener noreferrer">{url}</a>);
    last = at + whole.length;
  }
  if (last < text.length) out.push(text.slice(last));
  return out;
}

export function Markdown({ text }: { text: string }) {
  const blocks: ComponentChildren[] = [];
  const lines = text.replace(/\r\n/g, '\n').split('\n');
  let i = 0;
  while (i < lines.length) {
    const line = lines[i]!;
    const fence = /^```(\w*)\s*$/.exec(line);
    if (fence) {
      const body: string[] = [];
      i++;
      while (i < lines.length && !/^```\s*$/.test(lines[i]!)) body.push(lines[i++]!);
      i++;
      blocks.push(<pre><code>{body.join('\n')}</code></pre>);
      continue;
    }
    const heading = /^(#{1,4})\s+(.*)$/.exec(line);
    if (heading) {
      blocks.push(<p class="md-h">{inline(heading[2]!)}</p>);
      i++;
      continue;
    }
    if (/^\s*([-*]|\d+\.)\s+/.test(line)) {
      const ordered = /^\s*\d+\./.test(line);
      const items: ComponentChildren[] = [];
      while (i < lines.length && /^\s*([-*]|\d+\.)\s+/.test(lines[i]!)) items.push(<li>{inline(lines[i++]!.replace(/^\s*([-*]|\d+\.)\s+/, ''))}</li>);
      blocks.push(ordered ? <ol>{items}</ol> : <ul>{items}</ul>);
      continue;
    }
    if (line.trim() === '') {
      i++;
      continue;
    }
    const para: string[] = [];
    while (i < lines.length && lines[i]!.trim() !== '' && !/^```/.test(lines[i]!) && !/^\s*([-*]|\d+\.)\s+/.test(lines[i]!)) para.push(lines[i++]!);
    blocks.push(<p>{para.flatMap((p, n) => (n === 0 ? inline(p) : [<br />, ...inline(p)]))}</p>);
  }
  return <div class="md">{blocks}</div>;
}
