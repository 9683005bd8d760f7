/**
 * Replies are written in markdown; a mail carries them as plain text (markdown flattened
 * lightly: emphasis markers, heading hashes and link syntax removed, code indented, tables
 * aligned) and, when configured, as an HTML alternative.
 */
import { htmlBlocks } from '../../src/outbound/html.ts';
import { lex, plainBlocks, plainTextRules } from '../../src/outbound/markdown.ts';

const plainInline = plainTextRules((url) => `<${url}>`);

/** Markdown → the plain-text body of a mail. */
export function renderPlain(markdown: string): string {
  return plainBlocks(lex(markdown), plainInline, indent)
    .split('\n')
    .map((line) => line.trimEnd())
    .join('\n')
    .trim();
}

const indent = (code: string): string => code.replace(/^(?=.)/gm, '    ');

export function escapeHtml(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

const html = { tags: { bold: 'strong', italic: 'em', strike: 'del' }, schemes: ['http://', 'https://', 'mailto:'], escape: escapeHtml, lineBreak: '<br>\n', headingShift: 1 } as const;

/** Markdown → a small, self-contained HTML document for the alternative part. */
export function renderHtml(markdown: string): string {
  return `<!DOCTYPE html><html><head><meta charset="utf-8"></head><body>\n${htmlBlocks(lex(markdown), html).join('\n')}\n</body></html>`;
}
