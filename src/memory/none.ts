/**
 * The "none" backend: memory switched off. `store` answers as if it kept the memory (so the
 * agent's tools keep working) but nothing is kept; everything else is empty.
 */
import { createHash } from 'node:crypto';
import { ownerOf, type Memory, type MemoryEntry, type MemoryWho, type StoreInput } from '../memory.ts';

/** A Memory that remembers nothing. */
export function createNoneMemory(): Memory {
  return {
    name: 'none',
    async store(input: StoreInput, who: MemoryWho): Promise<MemoryEntry> {
      const now = Date.now();
      const key = input.key ?? `note-${createHash('sha256').update(input.content).digest('hex').slice(0, 12)}`;
      return { id: 'none', key, content: input.content, category: input.category ?? 'core', scope: input.scope, owner: ownerOf(input.scope, who), createdAt: now, updatedAt: now };
    },
    recall: async () => [],
    get: async () => undefined,
    list: async () => [],
    forget: async () => false,
    count: async () => 0,
    health: async () => ({ ok: true, detail: 'memory disabled' }),
  };
}
