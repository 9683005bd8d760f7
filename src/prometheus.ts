/**
 * Metrics in the Prometheus text exposition format (version 0.0.4), written by hand: the
 * format is a few lines per series, and a client library would be the daemon's largest
 * dependency for it. A {@link MetricsRegistry} holds counters, gauges and histograms with
 * labels; src/metrics.ts declares the daemon's own set on one.
 */
type Labels = Readonly<Record<string, string>>;

interface Family {
  readonly name: string;
  readonly help: string;
  readonly type: 'counter' | 'gauge' | 'histogram';
  /** The family's lines (without HELP/TYPE). */
  lines(): string[];
}

export interface Counter {
  /** Adds `value` (default 1, must be ≥ 0) to the series with these labels. */
  inc(labels?: Labels, value?: number): void;
}

export interface Gauge {
  set(labels: Labels, value: number): void;
}

export interface Histogram {
  /** Records one observation (seconds, for the latency histograms here). */
  observe(labels: Labels, value: number): void;
}

const namePattern = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const labelPattern = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

/** Label values escape backslash, double quote and newline; HELP text backslash and newline. */
const escapeLabel = (value: string): string => value.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
const escapeHelp = (value: string): string => value.replace(/\\/g, '\\\\').replace(/\n/g, '\\n');

function formatValue(value: number): string {
  if (Number.isNaN(value)) return 'NaN';
  if (value === Infinity) return '+Inf';
  if (value === -Infinity) return '-Inf';
  return String(value);
}

function labelText(labels: Labels, extra?: readonly [string, string]): string {
  const pairs = Object.entries(labels).map(([key, value]) => `${key}="${escapeLabel(value)}"`);
  if (extra) pairs.push(`${extra[0]}="${escapeLabel(extra[1])}"`);
  return pairs.length === 0 ? '' : `{${pairs.join(',')}}`;
}

/** A stable key for one label set (label order as declared). */
function seriesKey(labelNames: readonly string[], labels: Labels, metric: string): string {
  const given = Object.keys(labels);
  if (given.length !== labelNames.length || given.some((key) => !labelNames.includes(key))) {
    throw new TypeError(`metric ${metric}: labels must be exactly [${labelNames.join(', ')}], got [${given.join(', ')}]`);
  }
  return JSON.stringify(labelNames.map((name) => labels[name]));
}

/** Labels in declared order, so every line of a series reads the same. */
const ordered = (labelNames: readonly string[], labels: Labels): Labels => Object.fromEntries(labelNames.map((name) => [name, labels[name]!]));

export class MetricsRegistry {
  readonly #families = new Map<string, Family>();

  /**
   * A monotonically increasing count. Name it `…_total`. With `collect`, the series are read at
   * scrape time from a total kept elsewhere (CPU seconds) and `inc` is not used.
   */
  counter(name: string, help: string, labelNames: readonly string[] = [], collect?: () => Iterable<readonly [Labels, number]>): Counter {
    const series = this.#simple(name, help, 'counter', labelNames, collect);
    return {
      inc: (labels = {}, value = 1) => {
        if (!(value >= 0)) throw new RangeError(`counter ${name}: cannot add ${value}`);
        const key = seriesKey(labelNames, labels, name);
        const entry = series.get(key);
        if (entry) entry.value += value;
        else series.set(key, { labels: ordered(labelNames, labels), value });
      },
    };
  }

  /**
   * A value that goes up and down. With `collect`, the series are read at scrape time instead
   * (queue depth, RSS): nothing has to remember to update them.
   */
  gauge(name: string, help: string, labelNames: readonly string[] = [], collect?: () => Iterable<readonly [Labels, number]>): Gauge {
    const series = this.#simple(name, help, 'gauge', labelNames, collect);
    return {
      set: (labels, value) => {
        series.set(seriesKey(labelNames, labels, name), { labels: ordered(labelNames, labels), value });
      },
    };
  }

  /** Cumulative buckets (upper bounds, ascending; `+Inf` is added), `_sum` and `_count`. */
  histogram(name: string, help: string, labelNames: readonly string[], buckets: readonly number[]): Histogram {
    if (buckets.length === 0 || buckets.some((bound, i) => !Number.isFinite(bound) || (i > 0 && bound <= buckets[i - 1]!))) {
      throw new TypeError(`histogram ${name}: buckets must be finite and strictly ascending, got [${buckets.join(', ')}]`);
    }
    if (labelNames.includes('le')) throw new TypeError(`histogram ${name}: "le" is reserved`);
    const series = new Map<string, { labels: Labels; counts: number[]; sum: number; count: number }>();
    this.#add({
      name,
      help,
      type: 'histogram',
      lines: () =>
        [...series.values()].flatMap(({ labels, counts, sum, count }) => [
          ...buckets.map((bound, i) => `${name}_bucket${labelText(labels, ['le', formatValue(bound)])} ${counts[i]}`),
          `${name}_bucket${labelText(labels, ['le', '+Inf'])} ${count}`,
          `${name}_sum${labelText(labels)} ${formatValue(sum)}`,
          `${name}_count${labelText(labels)} ${count}`,
        ]),
    }, labelNames);
    return {
      observe: (labels, value) => {
        const key = seriesKey(labelNames, labels, name);
        let entry = series.get(key);
        if (!entry) {
          entry = { labels: ordered(labelNames, labels), counts: buckets.map(() => 0), sum: 0, count: 0 };
          series.set(key, entry);
        }
        for (let i = 0; i < buckets.length; i++) if (value <= buckets[i]!) entry.counts[i]!++;
        entry.sum += value;
        entry.count++;
      },
    };
  }

  /** Every family in the text exposition format (Content-Type {@link prometheusContentType}). */
  render(): string {
    const out: string[] = [];
    for (const family of this.#families.values()) {
      out.push(`# HELP ${family.name} ${escapeHelp(family.help)}`, `# TYPE ${family.name} ${family.type}`, ...family.lines());
    }
    return `${out.join('\n')}\n`;
  }

  /** A counter or gauge family: one value a series, kept here or read from `collect` at scrape time. */
  #simple(name: string, help: string, type: 'counter' | 'gauge', labelNames: readonly string[], collect: (() => Iterable<readonly [Labels, number]>) | undefined): Map<string, { labels: Labels; value: number }> {
    const series = new Map<string, { labels: Labels; value: number }>();
    this.#add({
      name,
      help,
      type,
      lines: () => {
        const current = collect ? [...collect()].map(([labels, value]) => ({ labels: ordered(labelNames, labels), value })) : [...series.values()];
        return current.map(({ labels, value }) => `${name}${labelText(labels)} ${formatValue(value)}`);
      },
    }, labelNames);
    return series;
  }

  #add(family: Family, labelNames: readonly string[]): void {
    if (!namePattern.test(family.name)) throw new TypeError(`metric name ${JSON.stringify(family.name)} is not a valid Prometheus name`);
    for (const label of labelNames) {
      if (!labelPattern.test(label) || label.startsWith('__')) throw new TypeError(`metric ${family.name}: label ${JSON.stringify(label)} is not a valid label name`);
    }
    if (this.#families.has(family.name)) throw new TypeError(`metric ${family.name} is declared twice`);
    this.#families.set(family.name, family);
  }
}

export const prometheusContentType = 'text/plain; version=0.0.4; charset=utf-8';
