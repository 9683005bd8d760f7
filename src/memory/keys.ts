/** What every memory backend shares about keys: the default key of keyless content, and an ambiguous operator forget. */
import { createHash } from 'node:crypto';

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
