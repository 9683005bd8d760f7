/** A small SVG line chart for the last hour (one point a minute), accessible by its summary. */
import { chartGeometry } from './chart-geometry.ts';

export interface Series {
  readonly name: string;
  readonly values: ReadonlyArray<number | undefined>;
  readonly className: string;
}

export function Chart({ title, series, unit = '' }: { title: string; series: readonly Series[]; unit?: string }) {
  const width = 300;
  const height = 90;
  const { peak, series: drawn } = chartGeometry(width, height, series);
  const summary = series.map((s) => `${s.name}: last ${fmt(s.values.at(-1))}${unit}, peak ${fmt(Math.max(0, ...s.values.filter((v): v is number => v !== undefined)))}${unit}`).join('; ');
  // Only single minutes so far (the first turns): say their values, the chart alone is thin.
  const lone = series.flatMap((s, i) => (drawn[i]!.points === '' && drawn[i]!.lone.length === 1 ? [`${s.name} ${fmt(drawn[i]!.lone[0]!.value)}${unit}`] : []));
  return (
    <figure class="chart">
      <figcaption>
        {title}
        <span class="legend">
          {series.map((s) => (
            <span class={`key ${s.className}`}>{s.name}</span>
          ))}
        </span>
      </figcaption>
      <svg viewBox={`0 0 ${width} ${height}`} role="img" aria-label={`${title} over the last hour. ${summary}`} preserveAspectRatio="none">
        <line class="axis" x1="0" y1={height - 0.5} x2={width} y2={height - 0.5} />
        {series.map((s, i) => {
          const { points, lone: strokes } = drawn[i]!;
          return (
            <g>
              {points === '' ? null : <polyline class={`line ${s.className}`} points={points} fill="none" />}
              {/* A lone minute: a line needs two points, and a circle would be stretched. */}
              {strokes.map((stroke) => (
                <line class={`line lone ${s.className}`} x1={stroke.x1} y1={stroke.y} x2={stroke.x2} y2={stroke.y} stroke-linecap="round">
                  <title>{`${s.name}: ${fmt(stroke.value)}${unit}`}</title>
                </line>
              ))}
            </g>
          );
        })}
      </svg>
      <p class="chart-scale">
        peak {fmt(peak)}
        {unit} · last 60 min{lone.length > 0 ? ` · one minute so far: ${lone.join(', ')}` : ''}
      </p>
    </figure>
  );
}

function fmt(v: number | undefined): string {
  if (v === undefined || !Number.isFinite(v)) return '–';
  return v >= 100 ? String(Math.round(v)) : String(Math.round(v * 10) / 10);
}
