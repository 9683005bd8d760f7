/**
 * Markdown → Discord message content. Discord renders most of standard markdown itself
 * (bold, italics, strike, code, fences, quotes, lists, `#`–`###` headings, masked links), so
 * the text passes through; what it does not render is rewritten: tables become a monospaced
 * code block, deeper headings become bold lines, rules become a line, images become links,
 * task-list boxes become ☐ / ☑. Code fences are never touched.
 */

/** Discord's limit on a message's content. */
export const DISCORD_LIMIT = 2000;

const fence = /^ {0,3}(`{3,}|~{3,})/;
const tableSeparator = /^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$/;
const rule = /^ {0,3}([-*_])(\s*\1){2,}\s*$/;

/** Renders markdown for Discord. */
export function renderDiscord(markdown: string): string {
  const lines = markdown.replace(/\r\n?/g, '\n').split('\n');
  const out: string[] = [];
  let open: string | undefined; // the fence that opened the current code block
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    const marker = fence.exec(line)?.[1];
    if (open !== undefined) {
      out.push(line);
      if (marker && marker[0] === open[0] && marker.length >= open.length && line.trim() === marker) open = undefined;
      continue;
    }
    if (marker) {
      open = marker;
      out.push(line);
      continue;
    }
    if (isTableRow(line) && i + 1 < lines.length && tableSeparator.test(lines[i + 1]!) && lines[i + 1]!.includes('-')) {
      const rows = [splitRow(line)];
      let j = i + 2;
      while (j < lines.length && isTableRow(lines[j]!)) rows.push(splitRow(lines[j++]!));
      out.push(...renderTable(rows));
      i = j - 1;
      continue;
    }
    out.push(renderLine(line));
  }
  return out.join('\n');
}

/** Length of a markdown part as Discord counts it once rendered (UTF-16 units: never under the real count). */
export function measureDiscord(markdown: string): number {
  return renderDiscord(markdown).length;
}

function renderLine(line: string): string {
  if (rule.test(line)) return '──────────';
  const heading = /^ {0,3}#{4,6}\s+(.*?)\s*#*\s*$/.exec(line);
  if (heading) return heading[1] === '' ? '' : `**${heading[1]}**`;
  return line
    .replace(/^(\s*(?:[-*+]|\d+[.)])\s+)\[ \]\s/, '$1☐ ')
    .replace(/^(\s*(?:[-*+]|\d+[.)])\s+)\[[xX]\]\s/, '$1☑ ')
    .replace(/!\[([^\]]*)\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g, (_, alt: string, url: string) => (alt.trim() === '' ? url : `[${alt}](${url})`));
}

function isTableRow(line: string): boolean {
  return line.includes('|') && line.trim() !== '' && !fence.test(line);
}

function splitRow(line: string): string[] {
  let body = line.trim();
  if (body.startsWith('|')) body = body.slice(1);
  if (body.endsWith('|') && !body.endsWith('\\|')) body = body.slice(0, -1);
  return body.split(/(?<!\\)\|/).map((cell) => plainCell(cell.trim()));
}

/** Cells are shown in a code block, where markup would show literally: drop the simple kinds. */
function plainCell(cell: string): string {
  return cell
    .replace(/\\\|/g, '|')
    .replace(/`([^`]*)`/g, '$1')
    .replace(/\*\*(.+?)\*\*/g, '$1')
    .replace(/__(.+?)__/g, '$1')
    .replace(/~~(.+?)~~/g, '$1')
    .replace(/\[([^\]]+)\]\(([^)\s]+)\)/g, '$1 ($2)');
}

function renderTable(rows: string[][]): string[] {
  const columns = Math.max(...rows.map((row) => row.length));
  const widths = Array.from({ length: columns }, (_, c) => Math.max(1, ...rows.map((row) => [...(row[c] ?? '')].length)));
  const format = (row: string[]): string =>
    widths
      .map((width, c) => {
        const cell = row[c] ?? '';
        return cell + ' '.repeat(width - [...cell].length);
      })
      .join(' | ')
      .trimEnd();
  const [head, ...body] = rows;
  return ['```', format(head!), widths.map((width) => '-'.repeat(width)).join('-+-'), ...body.map(format), '```'];
}

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
