/**
 * Keeps internal markup from ever reaching a user: reasoning blocks, XML tool calls and
 * tool results are removed from every outbound text.
 */
const blocks = ['think', 'thinking', 'tool_call', 'tool_result', 'function_call'];
const closed = new RegExp(`<(${blocks.join('|')})\\b[^>]*>[\\s\\S]*?</\\1\\s*>`, 'gi');
/** An opening tag never closed: everything after it is internal. */
const unclosed = new RegExp(`<(${blocks.join('|')})\\b[^>]*>[\\s\\S]*$`, 'i');
/** A stray closing tag (e.g. a reasoning model that printed only `</think>`): drop what precedes it. */
const strayClose = /^[\s\S]*<\/(think|thinking)\s*>/i;

export function sanitizeReply(text: string): string {
  return text.replace(closed, '').replace(unclosed, '').replace(strayClose, '').replace(/\n{3,}/g, '\n\n').trim();
}
