/**
 * When a conversation no longer fits the model's context window: drop the older half of the
 * history (whole turns, so a tool call never loses its result) and shorten this turn's tool
 * results. The model is told that earlier context was dropped.
 */
import type { ChatMessage } from '../provider.ts';

export const compactionNote = 'Note: earlier parts of this conversation were dropped to fit the model context window; ask the person if you need something from them.';

/** Keeps the newer half of the history, starting at a user message. */
export function compactHistory(history: readonly ChatMessage[]): ChatMessage[] {
  const starts = history.flatMap((message, index) => (message.role === 'user' && !message.content.startsWith('<tool_result') ? [index] : []));
  if (starts.length <= 1) return [];
  const keepFrom = starts[Math.floor(starts.length / 2)]!;
  return history.slice(keepFrom);
}

/** Shortens long tool results of the current turn (the user's own message is kept whole). */
export function compactTurn(turn: readonly ChatMessage[], maxChars = 2000): ChatMessage[] {
  return turn.map((message, index) => {
    if (index === 0 || message.content.length <= maxChars) return message;
    if (message.role === 'tool' || message.role === 'user') {
      return { ...message, content: `${message.content.slice(0, maxChars)}\n… [shortened to fit the context window]` };
    }
    return message;
  });
}
