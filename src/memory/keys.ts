/**
 * What the database memory backends (SQLite, PostgreSQL) share: the default key of keyless
 * content, an ambiguous operator forget, the scopes, and how a row becomes an entry.
 */
import { createHash } from 'node:crypto';
import type { MemoryEntry, MemoryScope } from '../memory.ts';

export const scopes: readonly MemoryScope[] = ['person', 'conversation', 'shared'];

/** A memories row as both backends select it (each adds its own row number). */
export interface MemoryRow {
  readonly id: string;
  readonly key: string;
  readonly content: string;
  readonly category: string;
  readonly scope: MemoryScope;
  readonly owner: string;
  readonly created_at: number;
  readonly updated_at: number;
}

export function entryOf(row: MemoryRow, score?: number): MemoryEntry {
  const entry = { id: row.id, key: row.key, content: row.content, category: row.category, scope: row.scope, owner: row.owner, createdAt: row.created_at, updatedAt: row.updated_at };
  return score === undefined ? entry : { ...entry, score };
}

/** `forget(key, 'operator')` matched several memories (one per owner); forget one by id. */
export class AmbiguousKeyError extends Error {
  readonly key: string;
  readonly matches: number;
  constructor(key: string, matches: number) {
    super(`the key "${key}" belongs to ${matches} memories (different owners); forget one by its id`);
    this.name = 'AmbiguousKeyError';
    this.key = key;
    this.matches = matches;
  }
}

/** A key for content stored without one: a slug of its first words and a hash of all of it. */
export function defaultKey(content: string): string {
  const words = content.normalize('NFKC').toLowerCase().split(/[^\p{L}\p{N}]+/u).filter(Boolean);
  let slug = '';
  for (const word of words) {
    const next = slug === '' ? [...word].slice(0, 24).join('') : `${slug}-${word}`;
    if (slug !== '' && next.length > 24) break;
    slug = next;
  }
  const hash = createHash('sha256').update(content).digest('hex').slice(0, 8);
  return slug === '' ? hash : `${slug}-${hash}`;
}
