/**
 * The runtime's health as a report: what the gateway's `/api/status` answers, what
 * `switchboard status` reads and what the console's overview shows. Times are ISO 8601.
 */
import type { RuntimeHealth } from './runtime.ts';

/** What `/api/status` answers (and `switchboard status` reads). Times are ISO 8601. */
export interface StatusReport {
  readonly version?: string;
  readonly pid: number;
  readonly startedAt: string;
  readonly uptimeSeconds: number;
  readonly channels: ReadonlyArray<{
    readonly name: string;
    readonly state: string;
    readonly since: string;
    readonly restarts: number;
    readonly lastError?: string;
    readonly lastErrorAt?: string;
    readonly lastInboundAt?: string;
    readonly notes?: readonly string[];
  }>;
  readonly queued: number;
  readonly inFlight: number;
  readonly pendingReplies: number;
  readonly totals: RuntimeHealth['counters'];
  /** Present while the data_dir's disk is full. */
  readonly storage?: { readonly writable: false; readonly code: string; readonly since: string; readonly refused: number };
  /** Cluster mode: this node and every node (which channels each holds, its turns in flight); `queued` then counts the whole cluster. */
  readonly cluster?: ClusterStatus;
}

/** A cluster as its nodes last reported themselves (the cluster reports it, not the runtime). */
export interface ClusterStatus {
  readonly node: string;
  readonly nodes: ReadonlyArray<{ readonly node: string; readonly alive: boolean; readonly channels: readonly string[]; readonly inFlight: number; readonly turns: number; readonly seenAt: number; readonly version: string }>;
}

/** An ISO 8601 time, or undefined. */
export const iso = (ms: number | undefined): string | undefined => (ms === undefined ? undefined : new Date(ms).toISOString());

/** The `/api/status` body from the runtime's health; `startedAt` is a wall time, `uptimeMs` measured on the monotonic clock. */
export function statusReport(health: RuntimeHealth, startedAt: number, uptimeMs: number, version?: string, cluster?: ClusterStatus): StatusReport {
  return {
    ...(version === undefined ? {} : { version }),
    pid: process.pid,
    startedAt: new Date(startedAt).toISOString(),
    uptimeSeconds: Math.max(0, Math.round(uptimeMs / 1000)),
    channels: health.channels.map((channel) => ({
      name: channel.name,
      state: channel.state,
      since: new Date(channel.since).toISOString(),
      restarts: channel.restarts,
      ...(channel.lastError === undefined ? {} : { lastError: channel.lastError, lastErrorAt: iso(channel.lastErrorAt)! }),
      ...(channel.lastInboundAt === undefined ? {} : { lastInboundAt: iso(channel.lastInboundAt)! }),
      ...(channel.notes?.length ? { notes: channel.notes } : {}),
    })),
    queued: health.queued,
    inFlight: health.inFlight,
    pendingReplies: health.pendingReplies,
    totals: health.counters,
    ...(health.storage?.writable === false ? { storage: { writable: false, code: health.storage.code!, since: iso(health.storage.since)!, refused: health.storage.refused ?? 0 } } : {}),
    ...(cluster ? { cluster } : {}),
  };
}
