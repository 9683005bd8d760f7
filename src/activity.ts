/**
 * The web console's last hour: activity per minute and the recent tool calls, kept in process
 * beside the Prometheus metrics (src/metrics.ts feeds both).
 */

/** What a tool call came to: the result kind, or `rejected` when it never ran (unknown, invalid, denied, limited). */
export type ToolOutcome = 'ok' | 'error' | 'effect' | 'rejected';

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
