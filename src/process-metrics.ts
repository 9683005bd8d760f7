/**
 * The standard process and Node.js series, under the names prom-client's default metrics use
 * (`process_cpu_seconds_total`, `process_resident_memory_bytes`, `nodejs_gc_duration_seconds`,
 * `nodejs_eventloop_lag_p99_seconds`, …), so dashboards and alerts made for any Node service
 * work on Switchboard unchanged.
 *
 * Written by hand rather than with prom-client: importing prom-client costs ~75–120 ms and
 * ~20 MB RSS on this project's Node (measured 2026-11-23), for a dozen series that are each a
 * line of `process.*`, `v8.*` or `/proc/self`. Where a series reads `/proc` it exists on Linux
 * only, as with prom-client.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { constants, monitorEventLoopDelay, PerformanceObserver, type PerformanceEntry } from 'node:perf_hooks';
import { getHeapSpaceStatistics } from 'node:v8';
import type { MetricsRegistry } from './prometheus.ts';

/** Event-loop delay since the previous scrape, in seconds beyond the sampling interval. */
export interface LagSnapshot {
  readonly min: number;
  readonly max: number;
  readonly mean: number;
  readonly stddev: number;
  readonly p50: number;
  readonly p90: number;
  readonly p99: number;
}

export interface ProcessMetricsOptions {
  /**
   * Sample event-loop delay (a 20 ms timer) and GC pauses (a PerformanceObserver) for as long
   * as the process runs. Off when nothing can scrape: the series then read 0 / stay empty.
   */
  readonly sample: boolean;
}

export interface ProcessMetrics {
  /** Takes the event-loop delay since the previous call and starts a new interval: once per scrape, before rendering. */
  scrape(): void;
  /** What the latest {@link scrape} took. */
  readonly lag: LagSnapshot;
  /** Stops the delay timer and the GC observer. */
  close(): void;
}

/** prom-client's buckets for GC pauses, so its dashboards' bucket queries match. */
const gcBuckets = [0.001, 0.01, 0.1, 1, 2, 5];
const gcKinds: Readonly<Record<number, string>> = {
  [constants.NODE_PERFORMANCE_GC_MAJOR]: 'major',
  [constants.NODE_PERFORMANCE_GC_MINOR]: 'minor',
  [constants.NODE_PERFORMANCE_GC_INCREMENTAL]: 'incremental',
  [constants.NODE_PERFORMANCE_GC_WEAKCB]: 'weakcb',
};
/** The delay timer's interval: an idle loop's samples read this much, which is not delay. */
const resolutionMs = 20;
const zeroLag: LagSnapshot = { min: 0, max: 0, mean: 0, stddev: 0, p50: 0, p90: 0, p99: 0 };

/** `VmSize`, `VmRSS`, `VmData` … of /proc/self/status in bytes; empty where there is no procfs. */
function procStatus(): Map<string, number> {
  const values = new Map<string, number>();
  try {
    for (const line of readFileSync('/proc/self/status', 'utf8').split('\n')) {
      const match = /^(Vm\w+):\s+(\d+) kB$/.exec(line);
      if (match) values.set(match[1]!, Number(match[2]) * 1024);
    }
  } catch {
    // not Linux: the series that need it are simply absent
  }
  return values;
}

/** The soft limit on open files, from /proc/self/limits (Linux), or undefined. */
function maxFds(): number | undefined {
  try {
    const line = readFileSync('/proc/self/limits', 'utf8').split('\n').find((l) => l.startsWith('Max open files'));
    const soft = line?.slice('Max open files'.length).trim().split(/\s+/)[0];
    return soft === undefined || soft === 'unlimited' ? undefined : Number(soft);
  } catch {
    return undefined;
  }
}

function openFds(): number | undefined {
  try {
    return readdirSync('/proc/self/fd').length - 1; // minus the descriptor readdir itself had open
  } catch {
    return undefined;
  }
}

const present = (value: number | undefined): Array<readonly [Record<string, string>, number]> => (value === undefined ? [] : [[{}, value]]);

/** Declares the process and Node.js series on `registry`. */
export function registerProcessMetrics(registry: MetricsRegistry, options: ProcessMetricsOptions): ProcessMetrics {
  const startTime = Math.round(Date.now() / 1000 - process.uptime());
  // Counters read at scrape time, as the totals process.cpuUsage() keeps.
  registry.counter('process_cpu_user_seconds_total', 'Total user CPU time spent in seconds.', [], () => [[{}, process.cpuUsage().user / 1e6]]);
  registry.counter('process_cpu_system_seconds_total', 'Total system CPU time spent in seconds.', [], () => [[{}, process.cpuUsage().system / 1e6]]);
  registry.counter('process_cpu_seconds_total', 'Total user and system CPU time spent in seconds.', [], () => {
    const { user, system } = process.cpuUsage();
    return [[{}, (user + system) / 1e6]];
  });
  registry.gauge('process_start_time_seconds', 'Start time of the process since unix epoch in seconds.', [], () => [[{}, startTime]]);
  registry.gauge('process_resident_memory_bytes', 'Resident memory size in bytes.', [], () => [[{}, process.memoryUsage.rss()]]);
  registry.gauge('process_virtual_memory_bytes', 'Virtual memory size in bytes.', [], () => present(procStatus().get('VmSize')));
  registry.gauge('process_heap_bytes', 'Process heap size in bytes (data segment: VmData).', [], () => present(procStatus().get('VmData')));
  registry.gauge('process_open_fds', 'Number of open file descriptors.', [], () => present(openFds()));
  registry.gauge('process_max_fds', 'Maximum number of open file descriptors.', [], () => present(maxFds()));

  const loop = monitorEventLoopDelay({ resolution: resolutionMs });
  let lag = zeroLag;
  // nodejs_eventloop_lag_seconds is prom-client's other measure: how long a setImmediate took to
  // run, measured at one scrape and reported at the next.
  let immediateLag = 0;
  registry.gauge('nodejs_eventloop_lag_seconds', 'Lag of event loop in seconds (setImmediate delay measured at the previous scrape).', [], () => {
    const start = process.hrtime.bigint();
    setImmediate(() => (immediateLag = Number(process.hrtime.bigint() - start) / 1e9)).unref();
    return [[{}, immediateLag]];
  });
  const stats = [
    ['min', 'The minimum recorded event loop delay.'],
    ['max', 'The maximum recorded event loop delay.'],
    ['mean', 'The mean of the recorded event loop delays.'],
    ['stddev', 'The standard deviation of the recorded event loop delays.'],
    ['p50', 'The 50th percentile of the recorded event loop delays.'],
    ['p90', 'The 90th percentile of the recorded event loop delays.'],
    ['p99', 'The 99th percentile of the recorded event loop delays.'],
  ] as const;
  for (const [stat, help] of stats) {
    registry.gauge(`nodejs_eventloop_lag_${stat}_seconds`, `${help} Seconds beyond the ${resolutionMs} ms sampling interval, since the previous scrape.`, [], () => [[{}, lag[stat]]]);
  }

  registry.gauge('nodejs_heap_size_total_bytes', 'Process heap size from Node.js in bytes.', [], () => [[{}, process.memoryUsage().heapTotal]]);
  registry.gauge('nodejs_heap_size_used_bytes', 'Process heap size used from Node.js in bytes.', [], () => [[{}, process.memoryUsage().heapUsed]]);
  registry.gauge('nodejs_external_memory_bytes', 'Node.js external memory size in bytes.', [], () => [[{}, process.memoryUsage().external]]);
  for (const [field, what] of [['space_size', 'total'], ['space_used_size', 'used'], ['space_available_size', 'available']] as const) {
    registry.gauge(`nodejs_heap_space_size_${what}_bytes`, `Process heap space size ${what} from Node.js in bytes.`, ['space'], () =>
      getHeapSpaceStatistics().map((space) => [{ space: space.space_name.replace(/_space$/, '') }, space[field]] as const),
    );
  }
  const [major, minor, patch] = process.versions.node.split('.');
  registry.gauge('nodejs_version_info', 'Node.js version info.', ['version', 'major', 'minor', 'patch'], () => [
    [{ version: process.version, major: major ?? '', minor: minor ?? '', patch: patch ?? '' }, 1],
  ]);

  const gc = registry.histogram('nodejs_gc_duration_seconds', 'Garbage collection duration by kind, one of major, minor, incremental or weakcb.', ['kind'], gcBuckets);
  const observer = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      // A 'gc' entry carries { kind, flags } in `detail` (Node's PerformanceEntry typing omits it).
      const detail = (entry as PerformanceEntry & { detail?: { kind?: number } }).detail;
      const kind = gcKinds[detail?.kind ?? -1] ?? 'unknown';
      gc.observe({ kind }, entry.duration / 1000);
    }
  });
  if (options.sample) {
    loop.enable();
    observer.observe({ entryTypes: ['gc'] });
  }
  const seconds = (nanoseconds: number): number => {
    const value = nanoseconds / 1e9 - resolutionMs / 1000;
    // Before the first sample the histogram reports NaN or extreme values; report 0 instead.
    return Number.isFinite(value) && value >= 0 ? value : 0;
  };

  return {
    scrape() {
      lag =
        loop.count === 0
          ? zeroLag
          : {
              min: seconds(loop.min),
              max: seconds(loop.max),
              mean: seconds(loop.mean),
              stddev: Number.isFinite(loop.stddev) ? loop.stddev / 1e9 : 0,
              p50: seconds(loop.percentile(50)),
              p90: seconds(loop.percentile(90)),
              p99: seconds(loop.percentile(99)),
            };
      loop.reset();
    },
    get lag() {
      return lag;
    },
    close() {
      loop.disable();
      observer.disconnect();
    },
  };
}
