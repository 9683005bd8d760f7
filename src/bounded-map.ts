/**
 * A Map (or Set) that keeps at most `limit` entries and forgets the oldest first: for what is
 * remembered about senders, ids and peers a stranger can add to without end. "Oldest" is Map
 * order: first inserted, unless `setNewest` moved a key to the end.
 */
export class BoundedMap<K, V> extends Map<K, V> {
  readonly #limit: number;

  constructor(limit: number) {
    super();
    this.#limit = limit;
  }

  /** Map's set (an existing key keeps its place), then the oldest entries beyond the limit forgotten. */
  override set(key: K, value: V): this {
    super.set(key, value);
    this.#trim();
    return this;
  }

  /** Sets `key` as the newest entry, so it is forgotten last; returns the keys forgotten to make room. */
  setNewest(key: K, value: V): K[] {
    super.delete(key);
    super.set(key, value);
    return this.#trim();
  }

  #trim(): K[] {
    const forgotten: K[] = [];
    while (this.size > this.#limit) {
      const oldest = this.keys().next().value as K;
      super.delete(oldest);
      forgotten.push(oldest);
    }
    return forgotten;
  }
}

/** A Set that keeps at most `limit` values, forgetting the first added first. */
export class BoundedSet<T> extends Set<T> {
  readonly #limit: number;

  constructor(limit: number) {
    super();
    this.#limit = limit;
  }

  override add(value: T): this {
    super.add(value);
    if (this.size > this.#limit) super.delete(this.values().next().value as T);
    return this;
  }
}
