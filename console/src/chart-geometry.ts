/**
 * Where the chart draws its points (console/src/chart.tsx), apart from Preact so it can be
 * tested without a browser. The SVG is stretched to its box (preserveAspectRatio="none"), so a
 * circle would come out as an ellipse; a minute with no neighbour — the first turn's latency,
 * say — is drawn instead as a short stroke one minute wide, with the line's own non-scaling
 * stroke, and everything is kept `pad` inside the edges so nothing is cut off.
 */

export interface GeometrySeries {
  readonly values: ReadonlyArray<number | undefined>;
}

export interface Stroke {
  readonly x1: number;
  readonly x2: number;
  readonly y: number;
  readonly value: number;
}

export interface SeriesGeometry {
  /** Polyline points ("x,y x,y"), for runs of two minutes or more. */
  readonly points: string;
  /** Minutes with no neighbour: a short stroke each. */
  readonly lone: readonly Stroke[];
}

export interface Geometry {
  readonly peak: number;
  readonly series: readonly SeriesGeometry[];
}

export function chartGeometry(width: number, height: number, series: readonly GeometrySeries[], pad = 4): Geometry {
  const numbers = (values: ReadonlyArray<number | undefined>): number[] => values.filter((v): v is number => v !== undefined && Number.isFinite(v));
  const peak = Math.max(0, ...series.flatMap((s) => numbers(s.values)));
  const max = peak > 0 ? peak : 1;
  const n = Math.max(2, ...series.map((s) => s.values.length));
  const inner = width - 2 * pad;
  const x = (i: number): number => pad + (i / (n - 1)) * inner;
  const y = (v: number): number => height - pad - (v / max) * (height - 2 * pad);
  // One minute wide (at least 8 units: visible), centred on its minute, inside the edges.
  const half = Math.max(4, inner / (n - 1) / 2);
  const round = (v: number): number => Math.round(v * 10) / 10;
  return {
    peak,
    series: series.map((s) => {
      const at = (i: number): number | undefined => {
        const v = s.values[i];
        return v !== undefined && Number.isFinite(v) ? v : undefined;
      };
      const points = s.values.flatMap((_, i) => {
        const v = at(i);
        return v === undefined ? [] : [`${x(i).toFixed(1)},${y(v).toFixed(1)}`];
      });
      const lone = s.values.flatMap((_, i) => {
        const v = at(i);
        if (v === undefined || at(i - 1) !== undefined || at(i + 1) !== undefined) return [];
        const centre = Math.min(width - pad - half, Math.max(pad + half, x(i)));
        return [{ x1: round(centre - half), x2: round(centre + half), y: round(y(v)), value: v }];
      });
      return { points: points.length >= 2 ? points.join(' ') : '', lone };
    }),
  };
}
