/**
 * How embeddings are stored: float32 little-endian in `memories.embedding`, and their sign
 * bits (bit i set when component i > 0) in `memories.embedding_bits`, padded with zero bits
 * to whole 32-bit words so the recall worker can compare them a word at a time.
 */

import { endianness } from 'node:os';

/** Float32Array is in the platform's byte order; on little-endian machines (all we ship to) copying is enough. */
const littleEndian = endianness() === 'LE';

/** Bytes of sign bits for a vector of `dims` components: whole 32-bit words. */
export function bitsLength(dims: number): number {
  return Math.ceil(dims / 32) * 4;
}

/** The vector as a float32 little-endian BLOB. */
export function toBlob(vector: Float32Array): Buffer {
  if (littleEndian) return Buffer.from(vector.buffer.slice(vector.byteOffset, vector.byteOffset + vector.byteLength));
  const out = Buffer.allocUnsafe(vector.length * 4);
  for (let i = 0; i < vector.length; i++) out.writeFloatLE(vector[i]!, i * 4);
  return out;
}

/** A float32 little-endian BLOB back as a vector (copied, so it is aligned). */
export function fromBlob(blob: Uint8Array): Float32Array {
  const out = new Float32Array(blob.length >>> 2);
  if (littleEndian) {
    new Uint8Array(out.buffer).set(blob.subarray(0, out.length * 4));
    return out;
  }
  const view = new DataView(blob.buffer, blob.byteOffset, blob.byteLength);
  for (let i = 0; i < out.length; i++) out[i] = view.getFloat32(i * 4, true);
  return out;
}

/** The sign bits of `vector`: bit i (LSB first within each byte) set when component i > 0. */
export function signBits(vector: Float32Array): Uint8Array {
  const out = new Uint8Array(bitsLength(vector.length));
  for (let i = 0; i < vector.length; i++) if (vector[i]! > 0) out[i >>> 3]! |= 1 << (i & 7);
  return out;
}

/** Cosine similarity in [-1, 1], accumulated in float64; 0 for a zero or non-finite vector. */
export function cosine(a: Float32Array, b: Float32Array): number {
  if (a.length !== b.length) return 0;
  let dot = 0;
  let normA = 0;
  let normB = 0;
  for (let i = 0; i < a.length; i++) {
    const x = a[i]!;
    const y = b[i]!;
    dot += x * y;
    normA += x * x;
    normB += y * y;
  }
  const denominator = Math.sqrt(normA) * Math.sqrt(normB);
  if (!Number.isFinite(denominator) || denominator < Number.EPSILON || !Number.isFinite(dot)) return 0;
  return Math.max(-1, Math.min(1, dot / denominator));
}
