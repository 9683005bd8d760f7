/**
 * Memory around a turn: before it, the memories relevant to the incoming message (the
 * person's, the conversation's and shared ones, above a relevance threshold, within size
 * caps) are given to the model; after it, the person's message is saved as a conversation
 * memory. Memory failures are logged and never fail a turn.
 */
import type { Logger } from 'pino';
import type { InboundMessage } from '../channel.ts';
import { clipMemory, type Memory, type MemoryWho } from '../memory.ts';

export interface TurnMemoryOptions {
  readonly memory: Memory;
  readonly autoRecall: boolean;
  /** @default 4 */
  readonly limit: number;
  /** @default 0.4 */
  readonly minScore: number;
  /** @default 800 */
  readonly maxChars: number;
  readonly autoSave: boolean;
}

export interface TurnMemory {
  /** A system-prompt section with what is remembered, or undefined when nothing relevant is. */
  context(message: InboundMessage, who: MemoryWho, log: Logger): Promise<string | undefined>;
  /** Saves the person's message (idempotent per message id). */
  save(message: InboundMessage, who: MemoryWho, log: Logger): Promise<void>;
}

export function createTurnMemory(options: TurnMemoryOptions): TurnMemory {
  return {
    async context(message, who, log) {
      if (!options.autoRecall || options.limit === 0) return undefined;
      try {
        const entries = await options.memory.recall(message.text, who, { limit: options.limit, minScore: options.minScore });
        if (entries.length === 0) return undefined;
        log.debug({ recalled: entries.length }, 'memories recalled');
        const lines = entries.map((entry) => `- (${entry.scope === 'person' ? 'about this person' : entry.scope === 'shared' ? 'shared' : 'this conversation'}) ${clipMemory(entry.content, options.maxChars)}`);
        return ['Things you remember that may be relevant (use them only if they help):', ...lines].join('\n');
      } catch (error) {
        log.warn({ err: error }, 'memory recall failed; answering without it');
        return undefined;
      }
    },
    async save(message, who, log) {
      if (!options.autoSave || !worthSaving(message.text)) return;
      try {
        await options.memory.store({ content: message.text, key: `msg:${message.channel}:${message.id}`, category: 'conversation', scope: 'conversation' }, who);
      } catch (error) {
        log.warn({ err: error }, 'could not save the message to memory');
      }
    },
  };
}

/** Greetings, approvals and scheduled-task prompts are not worth remembering. */
function worthSaving(text: string): boolean {
  const trimmed = text.trim();
  if (trimmed.startsWith('[Scheduled task')) return false;
  return trimmed.split(/\s+/).length >= 3;
}
