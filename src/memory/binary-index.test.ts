import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { BinaryIndex } from './binary-index.ts';
import { randomUnitVector, seededRandom } from './testing.ts';
import { signBits } from '../vectors.ts';

function hamming(a: Uint8Array, b: Uint8Array): number {
  let distance = 0;
  for (let i = 0; i < a.length; i++) {
    let x = a[i]! ^ b[i]!;
    while (x) {
      distance += x & 1;
      x >>>= 1;
    }
  }
  return distance;
}

describe('BinaryIndex', () => {
  it('finds the nearest by Hamming distance, as a brute-force scan does', () => {
    const random = seededRandom(3);
    const index = new BinaryIndex();
    const stored = new Map<number, Uint8Array>();
    for (let rowid = 1; rowid <= 2000; rowid++) {
      const bits = signBits(randomUnitVector(100, random)); // 100 dims: a partly used last word
      stored.set(rowid, bits);
      assert.equal(index.add(rowid, rowid % 2 ? 'odd' : 'even', bits), true);
    }
    const query = signBits(randomUnitVector(100, random));
    const found = index.nearest(query, ['odd', 'even'], 50);
    const expected = [...stored].map(([rowid, bits]) => ({ rowid, distance: hamming(query, bits) })).sort((a, b) => a.distance - b.distance);
    assert.equal(found.length, 50);
    const cutoff = expected[49]!.distance;
    for (const rowid of found) assert.ok(hamming(query, stored.get(rowid)!) <= cutoff);
    assert.deepEqual(
      found.map((rowid) => hamming(query, stored.get(rowid)!)),
      expected.slice(0, 50).map((e) => e.distance),
      'same distances, closest first',
    );
  });

  it('scans only the partitions asked for', () => {
    const index = new BinaryIndex();
    const bits = signBits(Float32Array.from([1, -1, 1, 1]));
    index.add(1, 'person\u0000a', bits);
    index.add(2, 'person\u0000b', bits);
    index.add(3, 'shared\u0000', bits);
    assert.deepEqual(index.nearest(bits, ['person\u0000a', 'shared\u0000'], 10).sort(), [1, 3]);
    assert.deepEqual(index.nearest(bits, ['person\u0000c'], 10), []);
  });

  it('removes, replaces and moves vectors without losing the others', () => {
    const index = new BinaryIndex();
    const random = seededRandom(5);
    const vectors = Array.from({ length: 40 }, () => signBits(randomUnitVector(64, random)));
    vectors.forEach((bits, i) => index.add(i + 1, 'p', bits));
    for (let rowid = 1; rowid <= 40; rowid += 3) assert.equal(index.remove(rowid), true);
    assert.equal(index.remove(1), false);
    assert.equal(index.size, 40 - 14);
    for (let rowid = 2; rowid <= 40; rowid++) {
      if ((rowid - 1) % 3 === 0) continue;
      assert.equal(index.nearest(vectors[rowid - 1]!, ['p'], 1)[0], rowid, `rowid ${rowid} still found by its own bits`);
    }
    index.add(2, 'q', vectors[1]!); // moved to another partition
    assert.deepEqual(index.nearest(vectors[1]!, ['q'], 5), [2]);
    assert.ok(!index.nearest(vectors[1]!, ['p'], 40).includes(2));
    assert.equal(index.size, 26);
  });

  it('refuses bits of another length than the vectors already indexed', () => {
    const index = new BinaryIndex();
    assert.equal(index.add(1, 'p', new Uint8Array(48)), true);
    assert.equal(index.add(2, 'p', new Uint8Array(192)), false);
    assert.equal(index.add(3, 'p', new Uint8Array(5)), false);
    assert.deepEqual(index.nearest(new Uint8Array(192), ['p'], 5), []);
    index.clear();
    assert.equal(index.add(2, 'p', new Uint8Array(192)), true);
  });
});

describe('binary index: memory', () => {
  it('drops a partition once its last vector goes, and counts its bytes back', () => {
    const index = new BinaryIndex();
    const bits = new Uint8Array(16);
    for (let conversation = 0; conversation < 1_000; conversation++) index.add(conversation, `conversation:c${conversation}`, bits);
    assert.equal(index.partitionCount, 1_000);
    const full = index.bytes;
    for (let conversation = 0; conversation < 1_000; conversation++) index.remove(conversation);
    assert.equal(index.partitionCount, 0, 'expired conversations leave nothing behind');
    assert.equal(index.bytes, 0);
    assert.ok(full > 0);
    // A vector moved to another partition empties the first one.
    index.add(1, 'person:a', bits);
    index.add(1, 'person:b', bits);
    assert.equal(index.partitionCount, 1);
  });
});
