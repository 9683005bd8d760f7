/**
 * Metrics in the Prometheus text exposition format (version 0.0.4), written by hand: the
 * format is a few lines per series, and a client library would be the daemon's largest
 * dependency for it. A MetricsRegistry (prometheus.ts) holds counters, gauges and histograms
 * with labels; {@link createSwitchboardMetrics} declares the daemon's own set (what `/metrics`
 * serves) and the hooks that feed it, and the console's activity log (activity.ts).
 */
import { createActivity, type ActivityLog, type ToolOutcome } from './activity.ts';
import type { ToolRunner } from './agent/tool-runner.ts';
import { registerProcessMetrics } from './process-metrics.ts';
import { MetricsRegistry } from './prometheus.ts';
import type { ProviderErrorReason } from './providers/metered.ts';
import type { RuntimeEvents, RuntimeHealth } from './runtime/runtime.ts';

export type { ProviderErrorReason } from './providers/metered.ts';

/** Where the metered provider and the tool-runner wrapper report. */
export interface AgentMeter {
  providerCall(provider: string, seconds: number, error?: ProviderErrorReason): void;
  /** `ms`: how long the call ran (when measured). */
  toolCall(tool: string, outcome: ToolOutcome, ms?: number): void;
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
