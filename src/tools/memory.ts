/**
 * `memory_store`, `memory_recall`, `memory_forget`: the model's long-term memory, scoped like
 * everything else — a call only ever sees the current person's memories, this conversation's
 * and shared ones. Writing a shared memory (which everyone's conversations can recall) needs
 * the person's approval in supervised mode.
 */
import { clipMemory, whoOf, type Memory, type MemoryScope } from '../memory.ts';
import { ok, toolError, type Tool } from '../tool.ts';

export function createMemoryTools(memory: Memory, options: { maxChars?: number } = {}): Tool[] {
  const maxChars = options.maxChars ?? 800;
  const store: Tool<{ content: string; key?: string; category?: string; scope?: MemoryScope }> = {
    name: 'memory_store',
    description:
      'Remember a fact for later conversations. scope: "person" (default — this person, in all their conversations here), ' +
      '"conversation" (only this conversation) or "shared" (everyone; needs approval). Storing an existing key replaces it.',
    parameters: {
      type: 'object',
      properties: {
        content: { type: 'string', description: 'The fact, self-contained, e.g. "Sam\'s favourite colour is green"' },
        key: { type: 'string', description: 'Short stable name, e.g. "dog_name"; reuse it to update the fact' },
        category: { type: 'string', description: '"core" (lasting facts, default) or another label' },
        scope: { type: 'string', enum: ['person', 'conversation', 'shared'] },
      },
      required: ['content'],
      additionalProperties: false,
    },
    assess: (args) => ({
      risk: args.scope === 'shared' ? 'medium' : 'low',
      mutates: true,
      summary: `memory_store (${args.scope ?? 'person'}): ${args.content.slice(0, 120)}`,
    }),
    async execute(args, ctx) {
      const content = args.content.trim();
      if (content === '') return toolError('content is empty; say what to remember.');
      if (content.length > 4000) return toolError('content is too long (over 4000 characters); store a shorter summary.');
      const entry = await memory.store(
        { content, scope: args.scope ?? 'person', ...(args.key ? { key: args.key } : {}), ...(args.category ? { category: args.category } : {}) },
        whoOf(ctx),
      );
      return ok(`Remembered (${entry.scope}, key "${entry.key}").`);
    },
  };

  const recall: Tool<{ query: string; limit?: number }> = {
    name: 'memory_recall',
    description: 'Search what you remember about this person, this conversation and shared facts.',
    parameters: {
      type: 'object',
      properties: { query: { type: 'string' }, limit: { type: 'integer', minimum: 1, maximum: 20 } },
      required: ['query'],
      additionalProperties: false,
    },
    async execute(args, ctx) {
      const entries = await memory.recall(args.query, whoOf(ctx), { limit: args.limit ?? 5 });
      if (entries.length === 0) return ok('Nothing relevant remembered.');
      return ok(entries.map((e) => `- [${e.scope}] ${e.key}: ${clipMemory(e.content, maxChars)} (relevance ${(e.score ?? 0).toFixed(2)})`).join('\n'));
    },
  };

  const forget: Tool<{ key: string }> = {
    name: 'memory_forget',
    description: 'Forget a remembered fact by its key (only this person\'s, this conversation\'s or shared ones).',
    parameters: { type: 'object', properties: { key: { type: 'string' } }, required: ['key'], additionalProperties: false },
    assess: (args) => ({ risk: 'low', mutates: true, summary: `memory_forget: ${args.key}` }),
    async execute(args, ctx) {
      return (await memory.forget(args.key, whoOf(ctx))) ? ok(`Forgot "${args.key}".`) : toolError(`Nothing remembered under "${args.key}" for this person or conversation.`);
    },
  };

  return [store, recall, forget] as unknown as Tool[];
}
