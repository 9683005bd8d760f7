/**
 * The metrics registry's text format, and the daemon's metrics after real traffic through a
 * Runtime (agent, metered provider, metered tool runner), scraped over the gateway and
 * parsed back.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { after, describe, it } from 'node:test';
import { testLogger } from '../test/support/log.ts';
import { createAgent } from './agent/agent.ts';
import { ApprovalStore } from './agent/approvals.ts';
import { createToolRunner } from './agent/tool-runner.ts';
import { createArgsValidator } from './agent/validate.ts';
import type { Channel, InboundMessage, Push } from './channel.ts';
import { createGateway } from './gateway/server.ts';
import { createSwitchboardMetrics, meterToolRunner } from './metrics.ts';
import { MetricsRegistry } from './prometheus.ts';
import { ProviderError, type ChatRequest, type Provider } from './provider.ts';
import { createMeteredProvider } from './providers/metered.ts';
import { Runtime } from './runtime/runtime.ts';
import { openDatabase } from './store/db.ts';
import { sqliteDatabase } from './store/sqlite-sql.ts';
import { ok, type Tool } from './tool.ts';

interface Sample {
  readonly name: string;
  readonly labels: Record<string, string>;
  readonly value: number;
}

/** A small parser for the text exposition format: checks HELP/TYPE lines and reads every sample. */
function parsePrometheus(text: string): { samples: Sample[]; types: Map<string, string> } {
  const samples: Sample[] = [];
  const types = new Map<string, string>();
  assert.ok(text.endsWith('\n'), 'exposition ends with a newline');
  for (const line of text.split('\n')) {
    if (line === '') continue;
    const meta = /^# (HELP|TYPE) ([a-zA-Z_:][a-zA-Z0-9_:]*) (.*)$/.exec(line);
    if (meta) {
      if (meta[1] === 'TYPE') {
        assert.ok(['counter', 'gauge', 'histogram', 'summary', 'untyped'].includes(meta[3]!), line);
        assert.ok(!types.has(meta[2]!), `family declared twice: ${meta[2]}`);
        types.set(meta[2]!, meta[3]!);
      }
      continue;
    }
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    assert.ok(match, `not a sample line: ${line}`);
    const labels: Record<string, string> = {};
    const labelRe = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(,|$)/g;
    let consumed = 0;
    for (const part of (match[2] ?? '').matchAll(labelRe)) {
      labels[part[1]!] = part[2]!.replace(/\\(.)/g, (_all, c: string) => (c === 'n' ? '\n' : c));
      consumed += part[0].length;
    }
    assert.equal(consumed, (match[2] ?? '').length, `bad labels in: ${line}`);
    const value = match[3] === '+Inf' ? Infinity : match[3] === '-Inf' ? -Infinity : Number(match[3]);
    assert.ok(!Number.isNaN(value) || match[3] === 'NaN', line);
    const family = match[1]!.replace(/_(bucket|sum|count)$/, '');
    assert.ok(types.has(match[1]!) || types.get(family) === 'histogram', `sample before its TYPE: ${line}`);
    samples.push({ name: match[1]!, labels, value });
  }
  return { samples, types };
}

function value(samples: readonly Sample[], name: string, labels: Record<string, string> = {}): number | undefined {
  return samples.find((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))?.value;
}

describe('MetricsRegistry', () => {
  it('writes counters, gauges and histograms in the text format, escaping label values', () => {
    const registry = new MetricsRegistry();
    const counter = registry.counter('things_total', 'Things.\nMore help.', ['kind']);
    counter.inc({ kind: 'a "quoted"\\ value\n' });
    counter.inc({ kind: 'b' }, 2.5);
    registry.gauge('level', 'A level.').set({}, 7);
    const histogram = registry.histogram('latency_seconds', 'Latency.', ['op'], [0.1, 1]);
    histogram.observe({ op: 'x' }, 0.05);
    histogram.observe({ op: 'x' }, 0.5);
    histogram.observe({ op: 'x' }, 5);
    const text = registry.render();
    assert.match(text, /^# HELP things_total Things\.\\nMore help\.$/m);
    const { samples, types } = parsePrometheus(text);
    assert.equal(types.get('latency_seconds'), 'histogram');
    assert.equal(value(samples, 'things_total', { kind: 'a "quoted"\\ value\n' }), 1);
    assert.equal(value(samples, 'things_total', { kind: 'b' }), 2.5);
    assert.equal(value(samples, 'level'), 7);
    assert.deepEqual(
      samples.filter((s) => s.name === 'latency_seconds_bucket').map((s) => [s.labels.le, s.value]),
      [['0.1', 1], ['1', 2], ['+Inf', 3]],
    );
    assert.equal(value(samples, 'latency_seconds_sum'), 5.55);
    assert.equal(value(samples, 'latency_seconds_count'), 3);
  });

  it('rejects bad names, wrong label sets, negative increments and duplicate families', () => {
    const registry = new MetricsRegistry();
    assert.throws(() => registry.counter('bad-name', 'x'), /not a valid Prometheus name/);
    assert.throws(() => registry.counter('ok_total', 'x', ['bad-label']), /not a valid label name/);
    const counter = registry.counter('c_total', 'x', ['a']);
    assert.throws(() => counter.inc({ b: '1' }), /labels must be exactly \[a\]/);
    assert.throws(() => counter.inc({ a: '1' }, -1), /cannot add -1/);
    assert.throws(() => registry.gauge('c_total', 'x'), /declared twice/);
    assert.throws(() => registry.histogram('h', 'x', [], [1, 1]), /strictly ascending/);
  });
});

describe('process and Node.js series (prom-client names)', () => {
  it('serves CPU, memory, file descriptors, start time, GC pauses, event-loop lag, heap and version, each once with a sane value', async () => {
    const metrics = createSwitchboardMetrics();
    after(() => metrics.close());
    metrics.render(); // the first scrape starts the setImmediate lag measurement the next one reports
    await new Promise((resolve) => setTimeout(resolve, 60)); // the delay timer's first tick only sets its baseline
    // Work for the CPU counters and the delay histogram, garbage for the GC observer.
    const until = performance.now() + 150;
    let kept: number[][] = [];
    while (performance.now() < until) kept = [...kept.slice(-10), Array.from({ length: 10_000 }, (_, i) => i)];
    assert.ok(kept.length > 0);
    await new Promise((resolve) => setTimeout(resolve, 100)); // GC entries reach the observer asynchronously; the delay timer ticks
    const text = metrics.render();
    const { samples, types } = parsePrometheus(text);
    const one = (name: string, labels: Record<string, string> = {}): number => {
      const found = samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
      assert.equal(found.length, 1, `${name} ${JSON.stringify(labels)}: ${found.length} samples`);
      assert.ok(Number.isFinite(found[0]!.value), `${name} is ${found[0]!.value}`);
      return found[0]!.value;
    };
    const cpuUser = one('process_cpu_user_seconds_total');
    const cpuSystem = one('process_cpu_system_seconds_total');
    assert.ok(cpuUser >= 0.1, `user CPU ${cpuUser}`); // at least the 150 ms busy loop
    assert.ok(Math.abs(one('process_cpu_seconds_total') - cpuUser - cpuSystem) < 0.05);
    for (const name of ['process_cpu_user_seconds_total', 'process_cpu_system_seconds_total', 'process_cpu_seconds_total']) assert.equal(types.get(name), 'counter', name);
    const start = one('process_start_time_seconds');
    assert.ok(Math.abs(start - (Date.now() / 1000 - process.uptime())) <= 1, `start time ${start}`);
    const rss = one('process_resident_memory_bytes');
    assert.ok(rss > 20e6 && rss < 2e9, `rss ${rss}`);
    assert.ok(one('process_virtual_memory_bytes') >= rss);
    assert.ok(one('process_heap_bytes') > 1e6);
    const fds = one('process_open_fds');
    assert.ok(fds >= 3 && fds <= one('process_max_fds'), `${fds} open fds`);
    assert.ok(one('nodejs_heap_size_used_bytes') <= one('nodejs_heap_size_total_bytes'));
    assert.ok(one('nodejs_external_memory_bytes') > 0);
    assert.ok(one('nodejs_heap_space_size_used_bytes', { space: 'new' }) >= 0);
    assert.ok(one('nodejs_heap_space_size_total_bytes', { space: 'old' }) > 0);
    assert.ok(one('nodejs_heap_space_size_available_bytes', { space: 'old' }) >= 0);
    const [major, minor, patch] = process.versions.node.split('.');
    assert.equal(one('nodejs_version_info', { version: process.version, major: major!, minor: minor!, patch: patch! }), 1);
    // The busy loop blocked the loop ~150 ms: the max delay shows it, and the order holds.
    const lag = Object.fromEntries(['min', 'max', 'mean', 'stddev', 'p50', 'p90', 'p99'].map((stat) => [stat, one(`nodejs_eventloop_lag_${stat}_seconds`)]));
    assert.ok(lag.max! >= 0.1 && lag.max! < 5, `max lag ${lag.max}`);
    assert.ok(lag.min! <= lag.p50! && lag.p50! <= lag.p90! && lag.p90! <= lag.p99! && lag.p99! <= lag.max!, JSON.stringify(lag));
    assert.ok(one('nodejs_eventloop_lag_seconds') >= 0);
    assert.equal(one('switchboard_event_loop_lag_seconds', { stat: 'max' }), lag.max);
    // GC pauses: a histogram by kind, cumulative buckets ending in +Inf = count.
    assert.equal(types.get('nodejs_gc_duration_seconds'), 'histogram');
    const kinds = new Set(samples.filter((s) => s.name === 'nodejs_gc_duration_seconds_count').map((s) => s.labels.kind));
    assert.ok(kinds.has('minor'), `GC kinds seen: ${[...kinds].join(', ')}`);
    for (const kind of kinds) {
      const buckets = samples.filter((s) => s.name === 'nodejs_gc_duration_seconds_bucket' && s.labels.kind === kind);
      assert.deepEqual(buckets.map((b) => b.labels.le), ['0.001', '0.01', '0.1', '1', '2', '5', '+Inf']);
      for (let i = 1; i < buckets.length; i++) assert.ok(buckets[i]!.value >= buckets[i - 1]!.value);
      const count = one('nodejs_gc_duration_seconds_count', { kind: kind! });
      assert.ok(count >= 1);
      assert.equal(buckets.at(-1)!.value, count);
      const sum = one('nodejs_gc_duration_seconds_sum', { kind: kind! });
      assert.ok(sum > 0 && sum / count < 1, `${kind}: ${count} pauses, ${sum} s`);
    }
    // Prometheus' own linter, where it is installed (Debian: apt-get install prometheus).
    const promtool = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' });
    if (promtool.error === undefined) assert.deepEqual([promtool.status, promtool.stdout + promtool.stderr], [0, ''], 'promtool check metrics');
    // The next scrape covers only the time since this one: no busy loop, so far less delay.
    await new Promise((resolve) => setTimeout(resolve, 60));
    assert.ok(value(parsePrometheus(metrics.render()).samples, 'nodejs_eventloop_lag_max_seconds')! < lag.max!);
  });

  it('without sampling (no gateway), starts no timer or GC observer: lag reads 0 and no GC series appear', async () => {
    const metrics = createSwitchboardMetrics({ eventLoopLag: false });
    after(() => metrics.close());
    Array.from({ length: 200_000 }, (_, i) => ({ i }));
    await new Promise((resolve) => setTimeout(resolve, 50));
    const { samples } = parsePrometheus(metrics.render());
    assert.equal(value(samples, 'nodejs_eventloop_lag_max_seconds'), 0);
    assert.equal(samples.filter((s) => s.name.startsWith('nodejs_gc_duration_seconds')).length, 0);
    assert.ok(value(samples, 'process_cpu_seconds_total')! > 0);
  });
});

describe('switchboard metrics after real traffic', () => {
  const database = sqliteDatabase(openDatabase(':memory:'));

  it('counts messages, turns, provider calls and errors, tool calls and restarts', async () => {
    // The runtime needs the metrics' hooks and the metrics read the runtime's health: the
    // health is read at scrape time, so a closure over the later `runtime` is enough.
    const metrics = createSwitchboardMetrics({ channels: ['chat', 'flaky'], health: () => runtime.health() });
    after(() => metrics.close());
    // The model: "tool …" calls echo then answers; "ghost" calls a tool that does not exist; "fail" is rate-limited.
    const model: Provider = {
      name: 'scripted:model',
      async chat(request: ChatRequest) {
        const last = request.messages.at(-1)!;
        if (last.role === 'tool' || (last.role === 'user' && last.content.includes('<tool_result'))) return { text: 'done with tools', toolCalls: [] };
        const text = last.role === 'user' ? last.content : '';
        if (text.includes('fail')) throw new ProviderError('rate limited', { status: 429 });
        if (text.includes('tool')) return { text: '', toolCalls: [{ id: 't1', name: 'echo', arguments: '{"text":"hi"}' }] };
        if (text.includes('ghost')) return { text: '', toolCalls: [{ id: 't2', name: 'made_up_tool', arguments: '{}' }] };
        return { text: `re: ${text}`, toolCalls: [] };
      },
    };
    const echo: Tool = { name: 'echo', description: 'echoes', parameters: { type: 'object', properties: { text: { type: 'string' } } }, execute: async (args) => ok(String(args.text)) };
    const approvals = new ApprovalStore(database);
    const runner = meterToolRunner(
      createToolRunner({ tools: [echo], validator: createArgsValidator(), decide: () => ({ kind: 'allow' }), alwaysApproved: () => false, timeoutMs: 5000 }),
      metrics,
    );
    const agent = createAgent({
      provider: createMeteredProvider(model, { meter: metrics, label: 'scripted' }),
      runner,
      approvals,
      name: 'Bot',
      instructions: '',
      workspace: '/tmp',
      maxToolIterations: 5,
      toolCalling: 'native',
    });

    let push: Push | undefined;
    const sent: string[] = [];
    const chat: Channel = {
      name: 'chat',
      async listen(p, signal, link) {
        push = p;
        link.ready();
        await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
      },
      async send(message) {
        sent.push(message.text);
      },
    };
    let attempts = 0;
    const flaky: Channel = {
      name: 'flaky',
      async listen(_p, signal, link) {
        if (++attempts === 1) throw new Error('connection refused');
        link.ready();
        await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
      },
      async send() {},
    };
    const runtime = new Runtime({
      database,
      log: testLogger(),
      channels: [chat, flaky],
      agent,
      historyTurns: 10,
      maxInFlight: 4,
      maxQueued: 100,
      turnTimeoutMs: 10_000,
      shutdownGraceMs: 1000,
      supervisor: { initialBackoffMs: 10, maxBackoffMs: 20, healthyAfterMs: 60_000, stopTimeoutMs: 1000 },
      delivery: { attemptsPerRound: 3, initialBackoffMs: 5, maxBackoffMs: 20 },
      events: metrics.runtimeEvents,
    });
    const gateway = createGateway({ listen: '127.0.0.1:0', log: testLogger(), health: () => runtime.health(), metrics: () => metrics.render() });
    await runtime.start();
    await runtime.ready;
    const { port } = await gateway.start();

    const message = (id: string, text: string, conversation = id): InboundMessage => ({ channel: 'chat', account: 'bot', chat: conversation, id, sender: { id: 'alice', name: 'Alice' }, text, timestamp: Date.now() });
    await push!(message('1', 'hello'));
    await push!(message('2', 'use a tool please'));
    await push!(message('3', 'ghost'));
    await push!(message('4', 'this will fail'));
    assert.equal(await push!(message('1', 'hello')), 'duplicate');
    await runtime.idle();
    assert.equal(sent.length, 4);

    const response = await fetch(`http://127.0.0.1:${port}/metrics`);
    assert.equal(response.status, 200);
    assert.match(response.headers.get('content-type')!, /^text\/plain; version=0\.0\.4/);
    const { samples, types } = parsePrometheus(await response.text());
    await gateway.stop(100);
    await runtime.stop();

    assert.equal(value(samples, 'switchboard_messages_received_total', { channel: 'chat' }), 4);
    assert.equal(value(samples, 'switchboard_messages_received_total', { channel: 'flaky' }), 0);
    assert.equal(value(samples, 'switchboard_messages_sent_total', { channel: 'chat' }), 4);
    assert.equal(types.get('switchboard_turn_duration_seconds'), 'histogram');
    assert.equal(value(samples, 'switchboard_turn_duration_seconds_count', { outcome: 'answered' }), 3);
    assert.equal(value(samples, 'switchboard_turn_duration_seconds_count', { outcome: 'failed' }), 1);
    assert.equal(value(samples, 'switchboard_turn_duration_seconds_bucket', { outcome: 'answered', le: '+Inf' }), 3);
    // hello 1 + tool 2 + ghost 2 + fail 1
    assert.equal(value(samples, 'switchboard_provider_request_duration_seconds_count', { provider: 'scripted' }), 6);
    assert.equal(value(samples, 'switchboard_provider_errors_total', { provider: 'scripted', reason: 'rate_limited' }), 1);
    assert.equal(value(samples, 'switchboard_tool_calls_total', { tool: 'echo', outcome: 'ok' }), 1);
    assert.equal(value(samples, 'switchboard_tool_calls_total', { tool: '(unknown)', outcome: 'rejected' }), 1);
    assert.equal(value(samples, 'switchboard_channel_restarts_total', { channel: 'flaky' }), 1);
    assert.equal(value(samples, 'switchboard_channel_restarts_total', { channel: 'chat' }), 0);
    assert.equal(value(samples, 'switchboard_queue_depth'), 0);
    assert.equal(value(samples, 'switchboard_turns_in_flight'), 0);
    assert.equal(value(samples, 'switchboard_channel_up', { channel: 'flaky' }), 1);
    assert.equal(value(samples, 'switchboard_storage_writable'), 1);
    assert.ok(value(samples, 'process_resident_memory_bytes')! > 1_000_000);
    for (const stat of ['p50', 'p99', 'max']) assert.ok(value(samples, 'switchboard_event_loop_lag_seconds', { stat })! >= 0, stat);
    assert.ok(value(samples, 'switchboard_uptime_seconds')! >= 0);
  });
});

describe('createActivity (the console’s last hour)', () => {
  it('counts per minute, keeps 60 minutes, and gives latency percentiles', async () => {
    const { createActivity } = await import('./activity.ts');
    let now = Date.UTC(2026, 0, 1, 12, 0, 0);
    const activity = createActivity(() => now);
    activity.received();
    activity.sent();
    for (const ms of [100, 200, 300, 400, 1000]) activity.turn(ms);
    activity.providerError();
    const [first] = activity.minutes();
    assert.deepEqual({ ...first }, { at: now, received: 1, sent: 1, providerErrors: 1, turns: 5, p50: 300, p95: 1000 });
    for (let i = 0; i < 70; i++) {
      now += 60_000;
      activity.received();
    }
    const minutes = activity.minutes();
    assert.equal(minutes.length, 60);
    assert.ok(minutes.every((m) => m.received === 1 && m.p50 === undefined));
    activity.toolCall({ tool: 'shell', outcome: 'ok', ms: 5, at: now });
    assert.equal(activity.toolCalls()[0]?.tool, 'shell');
  });
});
