/** A small SVG line chart for the last hour (one point a minute), accessible by its summary. */

export interface Series {
  readonly name: string;
  readonly values: ReadonlyArray<number | undefined>;
  readonly className: string;
}

export function Chart({ title, series, unit = '' }: { title: string; series: readonly Series[]; unit?: string }) {
  const width = 300;
  const height = 90;
  const peak = Math.max(0, ...series.flatMap((s) => s.values.filter((v): v is number => v !== undefined)));
  const max = Math.max(peak, 1e-9) === 1e-9 ? 1 : peak;
  const n = Math.max(2, ...series.map((s) => s.values.length));
  const x = (i: number): number => (i / (n - 1)) * width;
  const y = (v: number): number => height - (v / max) * (height - 6) - 3;
  const summary = series.map((s) => `${s.name}: last ${fmt(s.values.at(-1))}${unit}, peak ${fmt(Math.max(0, ...s.values.filter((v): v is number => v !== undefined)))}${unit}`).join('; ');
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
        {series.map((s) => {
          const points = s.values.map((v, i) => (v === undefined ? undefined : `${x(i).toFixed(1)},${y(v).toFixed(1)}`)).filter(Boolean);
          // A lone minute (the first turns) is a dot: a line needs two points.
          const dots = s.values.map((v, i) => (v === undefined || (s.values[i - 1] !== undefined || s.values[i + 1] !== undefined) ? null : <circle class={`dot ${s.className}`} cx={x(i)} cy={y(v)} r="2.5" />));
          return (
            <g>
              <polyline class={`line ${s.className}`} points={points.join(' ')} fill="none" />
              {dots}
            </g>
          );
        })}
      </svg>
      <p class="chart-scale">peak {fmt(peak)}{unit} · last 60 min</p>
    </figure>
  );
}

function fmt(v: number | undefined): string {
  if (v === undefined || !Number.isFinite(v)) return '–';
  return v >= 100 ? String(Math.round(v)) : String(Math.round(v * 10) / 10);
}
