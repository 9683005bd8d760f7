/**
 * Metrics in the Prometheus text exposition format (version 0.0.4), written by hand: the
 * format is a few lines per series, and a client library would be the daemon's largest
 * dependency for it. A {@link MetricsRegistry} holds counters, gauges and histograms with
 * labels; {@link createSwitchboardMetrics} declares the daemon's own set (what `/metrics`
 * serves) and the hooks that feed it.
 */
import type { ToolRunner } from './agent/tool-runner.ts';
import { registerProcessMetrics } from './process-metrics.ts';
import type { ProviderErrorReason } from './providers/metered.ts';
import type { RuntimeEvents, RuntimeHealth } from './runtime/runtime.ts';

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
    const series = new Map<string, { labels: Labels; value: number }>();
    this.#add({
      name,
      help,
      type: 'counter',
      lines: () => {
        const current = collect ? [...collect()].map(([labels, value]) => ({ labels: ordered(labelNames, labels), value })) : [...series.values()];
        return current.map(({ labels, value }) => `${name}${labelText(labels)} ${formatValue(value)}`);
      },
    }, labelNames);
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
    const series = new Map<string, { labels: Labels; value: number }>();
    this.#add({
      name,
      help,
      type: 'gauge',
      lines: () => {
        const current = collect ? [...collect()].map(([labels, value]) => ({ labels: ordered(labelNames, labels), value })) : [...series.values()];
        return current.map(({ labels, value }) => `${name}${labelText(labels)} ${formatValue(value)}`);
      },
    }, labelNames);
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

export type { ProviderErrorReason } from './providers/metered.ts';

/** What a tool call came to: the result kind, or `rejected` when it never ran (unknown, invalid, denied, limited). */
export type ToolOutcome = 'ok' | 'error' | 'effect' | 'rejected';

/** Where the metered provider and the tool-runner wrapper report. */
export interface AgentMeter {
  providerCall(provider: string, seconds: number, error?: ProviderErrorReason): void;
  /** `ms`: how long the call ran (when measured). */
  toolCall(tool: string, outcome: ToolOutcome, ms?: number): void;
}

/** One minute of activity (the console's charts). */
export interface ActivityMinute {
  /** Start of the minute, ms since the epoch. */
  readonly at: number;
  readonly received: number;
  readonly sent: number;
  readonly providerErrors: number;
  readonly turns: number;
  /** Turn latency percentiles in ms (undefined when no turn ended that minute). */
  readonly p50?: number;
  readonly p95?: number;
}

/** A finished tool call, newest first in {@link ActivityLog.toolCalls}. */
export interface ToolCallRecord {
  readonly tool: string;
  readonly outcome: ToolOutcome;
  readonly ms?: number;
  readonly at: number;
}

/**
 * The last hour of activity, per minute, in a fixed ring of 60 buckets, and the last 200 tool
 * calls: what the web console charts. Kept in process; a few KB whatever the traffic
 * (latencies are sampled: at most 256 per minute).
 */
export interface ActivityLog {
  minutes(now?: number): ActivityMinute[];
  toolCalls(): ToolCallRecord[];
}

const minuteMs = 60_000;
const maxLatencySamples = 256;
const maxToolCalls = 200;

interface Bucket {
  at: number;
  received: number;
  sent: number;
  providerErrors: number;
  turns: number;
  latencies: number[];
}

/** The activity ring behind {@link ActivityLog}; `record*` are cheap and never throw. */
export function createActivity(clock: () => number = Date.now): ActivityLog & {
  received(): void;
  sent(): void;
  turn(ms: number): void;
  providerError(): void;
  toolCall(record: ToolCallRecord): void;
} {
  const ring: Bucket[] = [];
  const calls: ToolCallRecord[] = [];
  const bucket = (): Bucket => {
    const at = Math.floor(clock() / minuteMs) * minuteMs;
    const last = ring[ring.length - 1];
    if (last && last.at === at) return last;
    const fresh = { at, received: 0, sent: 0, providerErrors: 0, turns: 0, latencies: [] };
    ring.push(fresh);
    if (ring.length > 60) ring.shift();
    return fresh;
  };
  const percentile = (sorted: readonly number[], p: number): number => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
  return {
    received: () => void bucket().received++,
    sent: () => void bucket().sent++,
    providerError: () => void bucket().providerErrors++,
    turn(ms) {
      const current = bucket();
      current.turns++;
      if (current.latencies.length < maxLatencySamples) current.latencies.push(ms);
      else current.latencies[Math.floor(Math.random() * maxLatencySamples)] = ms;
    },
    toolCall(record) {
      calls.unshift(record);
      if (calls.length > maxToolCalls) calls.pop();
    },
    minutes(now = clock()) {
      const since = Math.floor(now / minuteMs) * minuteMs - 59 * minuteMs;
      return ring
        .filter((b) => b.at >= since)
        .map((b) => {
          const sorted = [...b.latencies].sort((x, y) => x - y);
          return {
            at: b.at,
            received: b.received,
            sent: b.sent,
            providerErrors: b.providerErrors,
            turns: b.turns,
            ...(sorted.length > 0 ? { p50: percentile(sorted, 50), p95: percentile(sorted, 95) } : {}),
          };
        });
    },
    toolCalls: () => [...calls],
  };
}

export interface SwitchboardMetricsOptions {
  /** The runtime's health, read at scrape time for queue depth, turns in flight and channel state. */
  readonly health?: () => RuntimeHealth;
  /** Channel names whose message counters start at 0 (so the series exist before traffic). */
  readonly channels?: readonly string[];
  /**
   * Sample event-loop delay (a 20 ms timer for as long as the daemon runs) and GC pauses. Off
   * when nothing can scrape the metrics (no gateway): an idle daemon should not wake up 50 times
   * a second. @default true
   */
  readonly eventLoopLag?: boolean;
}

export interface SwitchboardMetrics extends AgentMeter {
  readonly registry: MetricsRegistry;
  /** The last hour per minute and the recent tool calls (the web console's charts). */
  readonly activity: ActivityLog;
  /** Pass as `new Runtime({ events })`. */
  readonly runtimeEvents: RuntimeEvents;
  /** The `/metrics` body. */
  render(): string;
  /** Stops the event-loop delay monitor and the GC observer. */
  close(): void;
}

const turnBuckets = [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300];
const providerBuckets = [0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120];

/**
 * The daemon's metrics. Gauges read at scrape time: queue depth, turns in flight, channel up,
 * uptime, event-loop lag (p50 / p99 / max since the previous scrape, from
 * `monitorEventLoopDelay`); and the standard process and Node.js series (src/process-metrics.ts).
 *
 * @example
 * const metrics = createSwitchboardMetrics({ health: () => runtime.health(), channels: names });
 * new Runtime({ ..., events: metrics.runtimeEvents });
 * createMeteredProvider(provider, { meter: metrics });
 */
export function createSwitchboardMetrics(options: SwitchboardMetricsOptions = {}): SwitchboardMetrics {
  const registry = new MetricsRegistry();
  const startedAt = performance.now(); // monotonic: the uptime must not jump with the wall clock
  const received = registry.counter('switchboard_messages_received_total', 'Inbound messages accepted into the inbox (duplicates excluded), by channel.', ['channel']);
  const sent = registry.counter('switchboard_messages_sent_total', 'Reply messages delivered to a platform, by channel.', ['channel']);
  for (const channel of options.channels ?? []) {
    received.inc({ channel }, 0);
    sent.inc({ channel }, 0);
  }
  const health = options.health;
  registry.gauge('switchboard_queue_depth', 'Messages waiting for a free turn slot.', [], () => (health ? [[{}, health().queued]] : []));
  registry.gauge('switchboard_turns_in_flight', 'Turns running now.', [], () => (health ? [[{}, health().inFlight]] : []));
  registry.gauge('switchboard_replies_pending', 'Replies recorded in the outbox and not yet sent.', [], () => (health ? [[{}, health().pendingReplies]] : []));
  registry.gauge('switchboard_storage_writable', '1 while the data_dir takes writes, 0 while its disk is full (new messages are refused).', [], () =>
    health ? [[{}, health().storage?.writable === false ? 0 : 1]] : [],
  );
  registry.gauge('switchboard_channel_up', '1 when the channel is running, 0 when starting, backing off or stopped.', ['channel'], () =>
    health ? health().channels.map((channel) => [{ channel: channel.name }, channel.state === 'running' ? 1 : 0] as const) : [],
  );
  const turns = registry.histogram('switchboard_turn_duration_seconds', 'Time from the start of a turn to its reply being recorded, by outcome.', ['outcome'], turnBuckets);
  const providerLatency = registry.histogram('switchboard_provider_request_duration_seconds', 'Model calls by provider (successful and failed).', ['provider'], providerBuckets);
  const providerErrors = registry.counter('switchboard_provider_errors_total', 'Failed model calls, by provider and reason.', ['provider', 'reason']);
  const tools = registry.counter('switchboard_tool_calls_total', 'Tool calls by tool name and outcome (ok, error, effect, rejected).', ['tool', 'outcome']);
  const maxToolSeries = 200;
  const toolSeries = new Set<string>();
  const restarts = registry.counter('switchboard_channel_restarts_total', 'Channel listener restarts, by channel.', ['channel']);
  for (const channel of options.channels ?? []) restarts.inc({ channel }, 0);
  registry.gauge('switchboard_uptime_seconds', 'Seconds since the metrics (and the daemon) started.', [], () => [[{}, (performance.now() - startedAt) / 1000]]);
  // CPU, memory, file descriptors, GC pauses, event-loop delay, under prom-client's names.
  const processMetrics = registerProcessMetrics(registry, { sample: options.eventLoopLag ?? true });
  registry.gauge('switchboard_event_loop_lag_seconds', 'Event-loop delay since the previous scrape: p50, p99 and max (also nodejs_eventloop_lag_*_seconds).', ['stat'], () => {
    const { p50, p99, max } = processMetrics.lag;
    return [
      [{ stat: 'p50' }, p50],
      [{ stat: 'p99' }, p99],
      [{ stat: 'max' }, max],
    ];
  });

  const activity = createActivity();
  return {
    registry,
    activity,
    runtimeEvents: {
      onReceived: (channel) => {
        received.inc({ channel });
        activity.received();
      },
      onSent: (channel) => {
        sent.inc({ channel });
        activity.sent();
      },
      onTurn: (_channel, ms, outcome) => {
        turns.observe({ outcome }, ms / 1000);
        activity.turn(ms);
      },
      onRestart: (channel) => restarts.inc({ channel }),
    },
    providerCall(provider, seconds, error) {
      providerLatency.observe({ provider }, seconds);
      if (error !== undefined) {
        providerErrors.inc({ provider, reason: error });
        activity.providerError();
      }
    },
    toolCall(tool, outcome, ms) {
      activity.toolCall({ tool, outcome, at: Date.now(), ...(ms === undefined ? {} : { ms }) });
      // Remote clients name their own tools: past maxToolSeries names, new ones count as "other"
      // so months of changing names cannot grow the series without end.
      if (!toolSeries.has(tool) && toolSeries.size >= maxToolSeries) tool = 'other';
      else toolSeries.add(tool);
      tools.inc({ tool, outcome });
    },
    render: () => {
      processMetrics.scrape();
      return registry.render();
    },
    close: () => processMetrics.close(),
  };
}

/**
 * Counts every tool call a runner finishes, by tool and outcome. A name the model made up is
 * counted as `(unknown)`: a label must not take whatever value the model writes.
 */
export function meterToolRunner(runner: ToolRunner, meter: Pick<AgentMeter, 'toolCall'>): ToolRunner {
  return {
    // The runner's list changes between turns (MCP servers, remote clients): read it each time.
    get tools() {
      return runner.tools;
    },
    prepare: (call, ctx) => runner.prepare(call, ctx),
    async run(prepared, ctx) {
      const tool = runner.tools.some((t) => t.name === prepared.call.name) ? prepared.call.name : '(unknown)';
      const started = performance.now();
      const ms = (): number => Math.round(performance.now() - started);
      try {
        const result = await runner.run(prepared, ctx);
        meter.toolCall(tool, prepared.outcome === 'done' ? 'rejected' : result.kind, ms());
        return result;
      } catch (error) {
        meter.toolCall(tool, 'error', ms());
        throw error;
      }
    },
  };
}
