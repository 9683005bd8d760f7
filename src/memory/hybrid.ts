/**
 * Hybrid ranking: `vectorWeight · cosine + keywordWeight · keyword`, where the keyword score
 * (−bm25, or tokens matched for LIKE) is divided by the best one in its result, so both sides
 * are in [0, 1].
 *
 * The weights are shared among the sides that found something: when only one side has a
 * result (no embedding service, nothing embedded yet, no keyword matched) its score counts
 * alone, so scores stay in [0, 1] and a `minScore` means the same in every mode.
 */
import type { Hit } from './fts.ts';

export interface HybridWeights {
  readonly vector: number;
  readonly keyword: number;
}

/** Every memory found by either side, once, with its combined score in [0, 1], best first. */
export function mergeHybrid(vector: readonly Hit[], keyword: readonly Hit[], weights: HybridWeights): Hit[] {
  const best = keyword.reduce((max, hit) => Math.max(max, hit.score), 0);
  let vectorWeight = vector.length > 0 ? weights.vector : 0;
  let keywordWeight = keyword.length > 0 ? weights.keyword : 0;
  if (vectorWeight + keywordWeight === 0) {
    // The one side that answered has weight 0 (e.g. keywordWeight = 0 and the embedding
    // service is down): better its ranking than nothing.
    vectorWeight = vector.length > 0 ? 1 : 0;
    keywordWeight = keyword.length > 0 ? 1 : 0;
    if (vectorWeight + keywordWeight === 0) return [];
  }
  const total = vectorWeight + keywordWeight;
  vectorWeight /= total;
  keywordWeight /= total;

  const cosines = new Map<number, number>();
  for (const hit of vector) cosines.set(hit.rowid, Math.max(cosines.get(hit.rowid) ?? 0, clamp(hit.score)));
  const keywords = new Map<number, number>();
  for (const hit of keyword) keywords.set(hit.rowid, Math.max(keywords.get(hit.rowid) ?? 0, best > 0 ? clamp(hit.score / best) : 1));

  const merged: Hit[] = [];
  for (const rowid of new Set([...cosines.keys(), ...keywords.keys()])) {
    const score = vectorWeight * (cosines.get(rowid) ?? 0) + keywordWeight * (keywords.get(rowid) ?? 0);
    merged.push({ rowid, score: clamp(score) });
  }
  // Ties: the newer memory (higher rowid) first.
  return merged.sort((a, b) => b.score - a.score || b.rowid - a.rowid);
}

function clamp(value: number): number {
  return Number.isFinite(value) ? Math.max(0, Math.min(1, value)) : 0;
}
