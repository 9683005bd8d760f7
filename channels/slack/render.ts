/**
 * Markdown (what the model writes) → Slack mrkdwn (what chat.postMessage shows).
 *
 * **b** / __b__ → *b*, *i* / _i_ → _i_, ~~s~~ → ~s~, [t](u) → <u|t>, headings → bold lines,
 * bullets → "•", numbered lists and block quotes kept, code fences → ``` blocks (language
 * tag dropped: Slack would show it as the first code line), inline code kept.
 *
 * Escaping: Slack treats &, < and > as control characters (<@U…> mentions, <!channel>
 * broadcasts, <url|label> links) and decodes &amp; &lt; &gt; everywhere it displays text,
 * code included — messages people write arrive with `&lt;` inside code blocks too. So the
 * three are escaped everywhere, code included: an unescaped `<!channel>` in a code sample
 * must not ping a whole channel. Only the markup this renderer produces itself (links and
 * a block quote's leading ">") is left raw.
 */

/** Escapes Slack's three control characters. */
export function escapeSlack(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

/** Renders markdown as Slack mrkdwn. */
export function renderMrkdwn(markdown: string): string {
  const lines = markdown.replace(/\r\n?/g, '\n').split('\n');
  const out: string[] = [];
  let fence: { readonly char: string; readonly length: number } | undefined;
  let code: string[] = [];
  const flush = (): void => {
    out.push(['```', ...code.map(escapeSlack), '```'].join('\n'));
    code = [];
  };
  for (const line of lines) {
    if (fence) {
      const close = /^ {0,3}(`{3,}|~{3,})\s*$/.exec(line);
      if (close && close[1]![0] === fence.char && close[1]!.length >= fence.length) {
        flush();
        fence = undefined;
      } else {
        code.push(line);
      }
      continue;
    }
    const open = /^ {0,3}(`{3,}|~{3,})(.*)$/.exec(line);
    if (open && !(open[1]![0] === '`' && open[2]!.includes('`'))) {
      fence = { char: open[1]![0]!, length: open[1]!.length };
      continue;
    }
    out.push(renderLine(line));
  }
  if (fence) flush();
  return out.join('\n');
}

function renderLine(line: string): string {
  // quote levels are peeled by one scan along the line: a regex per level re-read the rest of
  // the line each time (quadratic on thousands of "> "), a call per level overflowed the stack
  let depth = 0;
  let at = 0;
  for (;;) {
    let i = at;
    while (i < line.length && i - at < 3 && line[i] === ' ') i++;
    if (line[i] !== '>') break;
    while (line[i] === '>') i++;
    if (line[i] === ' ') i++;
    depth++;
    at = i;
  }
  return depth === 0 ? renderUnquoted(line) : `${'> '.repeat(depth)}${renderUnquoted(line.slice(at))}`.trimEnd();
}

function renderUnquoted(line: string): string {
  const heading = /^ {0,3}#{1,6}(?:\s+(.*?))?(?:\s+#+)?\s*$/.exec(line);
  if (heading) {
    const text = renderInline((heading[1] ?? '').replace(/\*\*|__/g, '')).trim();
    return text === '' ? '' : `*${text}*`;
  }
  if (/^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$/.test(line)) return '———';
  const bullet = /^(\s*)[-*+]\s+(?:\[( |x|X)\]\s+)?(.*)$/.exec(line);
  if (bullet) {
    const box = bullet[2] === undefined ? '' : bullet[2] === ' ' ? '☐ ' : '☑ ';
    return `${bullet[1]}• ${box}${renderInline(bullet[3]!)}`;
  }
  const numbered = /^(\s*)(\d{1,9})([.)])\s+(.*)$/.exec(line);
  if (numbered) return `${numbered[1]}${numbered[2]}. ${renderInline(numbered[4]!)}`;
  return renderInline(line);
}

/**
 * One pass over a line's inline markup, left to right, so a converted marker is never
 * read again (the `*b*` made from `**b**` must not turn into `_b_`).
 */
const inlinePattern = new RegExp(
  [
    // a whole run of backticks opens a span, and a label holds no unescaped "[": one attempt per run, linear on a long one
    /(?<!`)(`+)([^`]|[^`][\s\S]*?[^`])\1(?!`)/.source, // 1,2 code span
    /(!?)\[((?:[^[\]\\]|\\.)*)\]\(\s*<?([^()\s<>]+(?:\([^()\s]*\)[^()\s<>]*)*)>?(?:\s+(?:"[^"]*"|'[^']*'))?\s*\)/.source, // 3,4,5 link / image
    /<((?:https?:\/\/|mailto:)[^<>\s]+)>/.source, // 6 autolink
    /\*\*\*(?=\S)([\s\S]*?\S)\*\*\*|\*\*(?=\S)([\s\S]*?\S)\*\*/.source, // 7 bold italic, 8 bold
    /(?<![\w])__(?=\S)([\s\S]*?\S)__(?!\w)/.source, // 9 bold (underscores)
    /~~(?=\S)([\s\S]*?\S)~~/.source, // 10 strike
    /(?<![\w*])\*(?=[^\s*])((?:[^*]|\*\*[^*]+\*\*)*?[^\s*])\*(?![\w*])/.source, // 11 italic (not 2*3*4)
    /(?<![\w])_(?=[^\s_])([\s\S]*?[^\s_])_(?!\w)/.source, // 12 italic (underscores)
    /\\([!-/:-@[-`{-~])/.source, // 13 backslash escape
  ].join('|'),
  'g',
);

/** Emphasis nested deeper than this is left as text: a run of thousands of "_" nested a level per pair (stack overflow, quadratic time). */
const MAX_NESTING = 8;

export function renderInline(text: string, depth = 0): string {
  if (depth > MAX_NESTING) return escapeSlack(text);
  let out = '';
  let last = 0;
  for (const match of text.matchAll(inlinePattern)) {
    out += escapeSlack(text.slice(last, match.index));
    last = match.index + match[0].length;
    const [whole, , code, image, label, url, autolink, boldItalic, bold, boldU, strike, italic, italicU, escaped] = match;
    if (code !== undefined) out += `\`${escapeSlack(code)}\``;
    else if (boldItalic !== undefined) out += `*_${renderInline(boldItalic, depth + 1)}_*`;
    else if (url !== undefined) out += link(url, (label ?? '').replace(/\\(.)/g, '$1'), image === '!');
    else if (autolink !== undefined) out += link(autolink, autolink, false);
    else if (bold !== undefined || boldU !== undefined) out += `*${renderInline((bold ?? boldU)!, depth + 1)}*`;
    else if (strike !== undefined) out += `~${renderInline(strike, depth + 1)}~`;
    else if (italic !== undefined || italicU !== undefined) out += `_${renderInline((italic ?? italicU)!, depth + 1)}_`;
    else if (escaped !== undefined) out += escapeSlack(escaped);
    else out += escapeSlack(whole);
  }
  return out + escapeSlack(text.slice(last));
}

/** A Slack link `<url|label>`; a URL Slack cannot link (relative, other schemes) becomes "label (url)". */
function link(url: string, label: string, image: boolean): string {
  const text = label.replace(/[*_~`]/g, '').trim() || (image ? 'image' : url);
  if (!/^(?:https?:\/\/|mailto:)/i.test(url)) return escapeSlack(text === url ? url : `${text} (${url})`);
  const target = url.replace(/&/g, '&amp;').replace(/</g, '%3C').replace(/>/g, '%3E').replace(/\|/g, '%7C');
  if (text === url || text === url.replace(/^mailto:/i, '')) return `<${target}>`;
  return `<${target}|${escapeSlack(text.replace(/\|/g, '¦'))}>`;
}

/** Length as Slack counts a message: the rendered mrkdwn's characters. */
export function measureMrkdwn(markdown: string): number {
  return renderMrkdwn(markdown).length;
}
