/**
 * An in-memory index of embedding sign bits, one partition per (scope, owner), searched by
 * Hamming distance. It only narrows 100k memories to a few dozen candidates; the caller
 * rescores those with exact cosine from the float vectors.
 *
 * A partition is one flat Uint32Array (`words` per vector) and a parallel array of rowids;
 * removal moves the last vector into the freed slot, so a scan never skips holes.
 */

/** Set bits of every 16-bit value: two lookups per 32-bit word beat SWAR popcount in V8. */
const popcount16 = (() => {
  const table = new Uint8Array(65536);
  for (let i = 1; i < 65536; i++) table[i] = (i & 1) + table[i >>> 1]!;
  return table;
})();

/** Hamming distances of `size` vectors in `data` to `q`, written to `out` from `at`; returns the next `at`. */
function scan(q: Uint32Array, data: Uint32Array, size: number, out: Uint16Array, at: number): number {
  const table = popcount16;
  const words = q.length;
  for (let i = 0, offset = 0; i < size; i++) {
    let distance = 0;
    for (let w = 0; w < words; w++, offset++) {
      const x = q[w]! ^ data[offset]!;
      distance += table[x & 0xffff]! + table[x >>> 16]!;
    }
    out[at++] = distance;
  }
  return at;
}

class Partition {
  data: Uint32Array;
  rowids: Float64Array;
  size = 0;
  readonly slots = new Map<number, number>();
  readonly words: number;
  readonly name: string;

  constructor(words: number, name: string) {
    this.words = words;
    this.name = name;
    this.data = new Uint32Array(16 * words);
    this.rowids = new Float64Array(16);
  }

  put(rowid: number, bits: Uint8Array): void {
    let slot = this.slots.get(rowid);
    if (slot === undefined) {
      if (this.size === this.rowids.length) this.grow();
      slot = this.size++;
      this.slots.set(rowid, slot);
      this.rowids[slot] = rowid;
    }
    // Bytes in, words out: the query goes through the same view, so byte order cancels out.
    new Uint8Array(this.data.buffer, slot * this.words * 4, this.words * 4).set(bits);
  }

  delete(rowid: number): boolean {
    const slot = this.slots.get(rowid);
    if (slot === undefined) return false;
    this.slots.delete(rowid);
    const last = --this.size;
    if (slot !== last) {
      const moved = this.rowids[last]!;
      this.rowids[slot] = moved;
      this.data.copyWithin(slot * this.words, last * this.words, (last + 1) * this.words);
      this.slots.set(moved, slot);
    }
    return true;
  }

  private grow(): void {
    const data = new Uint32Array(this.data.length * 2);
    data.set(this.data);
    this.data = data;
    const rowids = new Float64Array(this.rowids.length * 2);
    rowids.set(this.rowids);
    this.rowids = rowids;
  }
}

export class BinaryIndex {
  private readonly partitions = new Map<string, Partition>();
  private readonly partitionOf = new Map<number, Partition>();
  private wordCount: number | undefined;
  /** Bytes of every partition's arrays (kept up to date, so `bytes` is O(1)). */
  private allocated = 0;

  /** Vectors indexed. */
  get size(): number {
    return this.partitionOf.size;
  }

  /**
   * Bytes the index holds: each partition's arrays (they grow by doubling) plus ~64 bytes per
   * vector for its two map entries. What `[memory] max_index_mb` is compared with.
   */
  get bytes(): number {
    return this.allocated + 64 * this.partitionOf.size;
  }

  /** 32-bit words per vector, fixed by the first vector added (until `clear`). */
  get words(): number | undefined {
    return this.wordCount;
  }

  /**
   * Adds (or replaces) the sign bits of `rowid` in `partition`. Returns false, and indexes
   * nothing, when `bits` is not whole words or not the length of the vectors already here.
   */
  add(rowid: number, partition: string, bits: Uint8Array): boolean {
    if (bits.length === 0 || bits.length % 4 !== 0) return false;
    const words = bits.length / 4;
    if (this.wordCount !== undefined && words !== this.wordCount) return false;
    this.wordCount = words;
    const current = this.partitionOf.get(rowid);
    let target = this.partitions.get(partition);
    if (current !== undefined && current !== target) {
      current.delete(rowid);
      if (current.size === 0) this.dropPartition(current);
    }
    if (target === undefined) {
      target = new Partition(words, partition);
      this.partitions.set(partition, target);
      this.allocated += target.data.byteLength + target.rowids.byteLength;
    }
    const before = target.data.byteLength + target.rowids.byteLength;
    target.put(rowid, bits);
    this.allocated += target.data.byteLength + target.rowids.byteLength - before;
    this.partitionOf.set(rowid, target);
    return true;
  }

  has(rowid: number): boolean {
    return this.partitionOf.has(rowid);
  }

  /** Partitions held (each person or conversation with indexed memories). */
  get partitionCount(): number {
    return this.partitions.size;
  }

  remove(rowid: number): boolean {
    const partition = this.partitionOf.get(rowid);
    if (partition === undefined) return false;
    partition.delete(rowid);
    this.partitionOf.delete(rowid);
    // An emptied partition goes (a conversation's memories all expired): partitions never
    // shrink, so keeping empty ones would grow the index with every conversation ever seen.
    if (partition.size === 0) this.dropPartition(partition);
    return true;
  }

  private dropPartition(partition: Partition): void {
    if (this.partitions.get(partition.name) !== partition) return;
    this.partitions.delete(partition.name);
    this.allocated -= partition.data.byteLength + partition.rowids.byteLength;
  }

  clear(): void {
    this.allocated = 0;
    this.partitions.clear();
    this.partitionOf.clear();
    this.wordCount = undefined;
  }

  /** Up to `k` rowids from `partitions` (and nowhere else), nearest to `query` first. */
  nearest(query: Uint8Array, partitions: readonly string[], k: number): number[] {
    const words = this.wordCount;
    if (words === undefined || query.length !== words * 4 || k <= 0) return [];
    const q = new Uint32Array(words);
    new Uint8Array(q.buffer).set(query);
    const scanned = [...new Set(partitions)].map((name) => this.partitions.get(name)).filter((p): p is Partition => p !== undefined && p.size > 0);
    const total = scanned.reduce((sum, p) => sum + p.size, 0);
    if (total === 0) return [];

    const distances = new Uint16Array(total);
    const histogram = new Uint32Array(words * 32 + 1);
    let at = 0;
    for (const partition of scanned) at = scan(q, partition.data, partition.size, distances, at);
    for (let i = 0; i < total; i++) histogram[distances[i]!]!++;

    // The k-th smallest distance, from the histogram: everything closer is taken, ties fill up.
    const wanted = Math.min(k, total);
    let threshold = 0;
    for (let seen = 0; threshold < histogram.length; threshold++) {
      seen += histogram[threshold]!;
      if (seen >= wanted) break;
    }
    const picked: { rowid: number; distance: number }[] = [];
    let ties = wanted - (histogram.slice(0, threshold).reduce((sum, n) => sum + n, 0));
    at = 0;
    for (const partition of scanned) {
      for (let i = 0; i < partition.size; i++, at++) {
        const distance = distances[at]!;
        if (distance < threshold || (distance === threshold && ties-- > 0)) picked.push({ rowid: partition.rowids[i]!, distance });
      }
    }
    return picked.sort((a, b) => a.distance - b.distance).map((p) => p.rowid);
  }
}
