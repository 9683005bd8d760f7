/**
 * The one place that says whose memories a caller may see: their person memories, the
 * current conversation's and the shared ones — in SQL (for every query that reads memories on
 * someone's behalf) and as recall-index partitions.
 */
import type { MemoryScope, MemoryWho } from '../memory.ts';

/**
 * SQL condition on table alias `alias` binding `@person` and `@conversation` (see
 * `ownerParams`): true only for the caller's own, the conversation's and shared memories.
 * `param` spells a placeholder: `() => '?'` for positional ones (person, then conversation).
 */
export function ownerFilter(alias: string, param: (name: 'person' | 'conversation') => string = (name) => `@${name}`): string {
  const a = alias;
  return `((${a}.scope = 'person' AND ${a}.owner = ${param('person')}) OR (${a}.scope = 'conversation' AND ${a}.owner = ${param('conversation')}) OR (${a}.scope = 'shared' AND ${a}.owner = ''))`;
}

/** The parameters `ownerFilter` binds. */
export function ownerParams(who: MemoryWho): { person: string; conversation: string } {
  return { person: who.person, conversation: who.conversation };
}

/** The recall-index partition holding one scope + owner's vectors. */
export function partitionOf(scope: MemoryScope | string, owner: string): string {
  return `${scope}\u0000${owner}`;
}

/** The only partitions a recall for `who` may scan. */
export function partitionsFor(who: MemoryWho): string[] {
  return [partitionOf('person', who.person), partitionOf('conversation', who.conversation), partitionOf('shared', '')];
}

/** SQL ordering that prefers the most specific match when a key exists in several scopes. */
export const scopePriority = `CASE scope WHEN 'person' THEN 0 WHEN 'conversation' THEN 1 ELSE 2 END`;
