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
import { inlineText, lex, listText, prefixLines, renderInline, tableLines, type InlineRules, type MarkedToken, type Token } from '../../src/outbound/markdown.ts';

/** Escapes Slack's three control characters. */
export function escapeSlack(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

/** Renders markdown as Slack mrkdwn. */
export function renderMrkdwn(markdown: string): string {
  return blocks(lex(markdown));
}

function blocks(tokens: readonly Token[]): string {
  return tokens.map((token) => block(token as MarkedToken)).join('\n');
}

function block(token: MarkedToken): string {
  switch (token.type) {
    case 'paragraph':
    case 'text':
      return noFences(token.tokens ? renderInline(token.tokens, inline) : escapeSlack(token.text));
    case 'heading': {
      // the line is bold already: bold inside it would end it
      const text = renderInline(token.tokens, { ...inline, strong: (inner) => inner }).trim();
      return text === '' ? '' : `*${noFences(text)}*`;
    }
    case 'hr':
      return '———';
    case 'code':
      // the language tag is dropped: Slack would show it as the first line of code
      return ['```', escapeSlack(unfenced(token.text)), '```'].join('\n');
    case 'table':
      return ['```', escapeSlack(tableLines(token).join('\n')), '```'].join('\n');
    case 'blockquote':
      return prefixLines(blocks(token.tokens), '> ');
    case 'list':
      // a quote in an item is no quote to Slack (its ">" is one only at a line's start): its markers escaped, shown as written
      return listText(token, '•', (tokens) => blocks(tokens).replace(/^(?:> ?)+/gm, (markers) => markers.replace(/>/g, '&gt;')));
    case 'space':
      return '';
    case 'html':
      // shown as written: a ``` or ~~~ line in an HTML block is no fence (CommonMark), so none may open a code block in Slack
      return noFences(escapeSlack(token.raw.replace(/\n+$/, '')));
    default: // link definitions: shown as written
      return escapeSlack(token.raw.replace(/\n+$/, ''));
  }
}

/** Code with its runs of three backticks broken by zero-width spaces: Slack would end the block at one. */
const unfenced = (code: string): string => code.replace(/`{3,}/g, broken);

/**
 * Text with its runs of three backticks or tildes broken by zero-width spaces. Slack opens a code
 * block at ``` anywhere in a line and has no backslash escape, so an escaped "\```" or a code span
 * holding backticks would open one; a reader of markdown takes a ~~~ line for a fence (fuzz seeds
 * 2119109992, 1187553780).
 */
const noFences = (text: string): string => text.replace(/`{3,}|~{3,}/g, broken);
const broken = (run: string): string => [...run].join('\u200b');

/** Inline markdown → mrkdwn; markers inside a word stay as written (Slack shows no emphasis there). */
const inline: InlineRules = {
  text: escapeSlack,
  code: (code) => `\`${escapeSlack(code)}\``,
  strong: (inner) => `*${inner}*`,
  em: (inner, raw, intraword) => (intraword ? escapeSlack(raw) : `_${inner}_`),
  del: (inner) => `~${inner}~`,
  link: (href, _label, token) => link(href, inlineText(token.tokens), false),
  image: (href, alt) => link(href, alt, true),
  br: () => '\n',
};

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
