import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Channel, ListenLink, Push } from '../channel.ts';
import { testLogger } from '../../test/support/log.ts';
import { DAY_MS, HOUR_MS, jumpingClock } from '../../test/support/clock.ts';
import { backoffDelay } from '../backoff.ts';
import { ChannelSupervisor, type SupervisorOptions } from './supervisor.ts';

const push: Push = async () => 'accepted';
const fast: SupervisorOptions = { initialBackoffMs: 20, maxBackoffMs: 80, healthyAfterMs: 10_000, stopTimeoutMs: 200 };

function channel(listen: (signal: AbortSignal, link: ListenLink, attempt: number) => Promise<void>, extra: object = {}): Channel & { starts: number[] } {
  const starts: number[] = [];
  return {
    name: 'test',
    starts,
    listen: (_push, signal, link) => {
      starts.push(performance.now());
      return listen(signal, link, starts.length);
    },
    send: async () => undefined,
    ...extra,
  };
}

const untilAbort = (signal: AbortSignal): Promise<void> =>
  new Promise((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));

async function waitFor(condition: () => boolean, timeoutMs = 3000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!condition()) {
    if (performance.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

describe('backoffDelay', () => {
  it('doubles from the initial delay up to the cap', () => {
    const none = () => 0.5; // no jitter
    const delays = [0, 1, 2, 3, 4, 5, 10, 50].map((attempt) => backoffDelay(attempt, { initialMs: 2000, maxMs: 60_000 }, none));
    assert.deepEqual(delays, [2000, 4000, 8000, 16_000, 32_000, 60_000, 60_000, 60_000]);
  });

  it('jitters within ±20 % by default and never exceeds the cap', () => {
    assert.equal(backoffDelay(0, { initialMs: 1000, maxMs: 60_000 }, () => 0), 800);
    assert.equal(backoffDelay(0, { initialMs: 1000, maxMs: 60_000 }, () => 1), 1200);
    assert.equal(backoffDelay(9, { initialMs: 1000, maxMs: 5000 }, () => 1), 5000);
  });
});

describe('ChannelSupervisor', () => {
  it('restarts a failing listen with growing, capped delays and records the error', async () => {
    const ch = channel(async () => {
      throw new Error('connection refused');
    });
    const sup = new ChannelSupervisor(ch, push, fast, testLogger(), { onReady: () => undefined });
    const shutdown = new AbortController();
    const run = sup.run(shutdown.signal);
    await waitFor(() => ch.starts.length >= 5);
    shutdown.abort();
    await run;
    const gaps = ch.starts.slice(1).map((start, i) => start - ch.starts[i]!);
    // 20, 40, 80, 80 ms (±20 % jitter, plus timer slack)
    assert.ok(gaps[0]! >= 15 && gaps[0]! < 400, `first gap ${gaps[0]}`);
    assert.ok(gaps[1]! >= 31, `second gap ${gaps[1]}`);
    assert.ok(gaps[2]! >= 63, `third gap ${gaps[2]}`);
    assert.ok(gaps[3]! >= 63 && gaps[3]! < 600, `capped gap ${gaps[3]}`);
    const health = sup.health();
    assert.equal(health.state, 'stopped');
    assert.ok(health.restarts >= 4);
    assert.equal(health.lastError, 'connection refused');
  });

  it('resets the backoff after a healthy period', async () => {
    const options = { ...fast, initialBackoffMs: 50, maxBackoffMs: 5000, healthyAfterMs: 60 };
    // attempts 1-3 fail at once (delays 50, 100, 200); attempt 4 is healthy for 100 ms then fails;
    // the next delay is 50 again (400 without the reset)
    const { gap } = await gapAfterHealthyRun(options);
    assert.ok(gap < 250, `delay after a healthy run should be back to ~50 ms (400 without the reset), was ${gap}`);
  });

  it('reports running after ready, and restarts a listen that says it went deaf', async () => {
    const readies: string[] = [];
    const ch = channel(async (signal, link, attempt) => {
      link.ready();
      if (attempt === 1) setTimeout(() => link.deaf('socket silent'), 20);
      await untilAbort(signal);
    });
    const sup = new ChannelSupervisor(ch, push, fast, testLogger(), { onReady: (name) => readies.push(name) });
    const shutdown = new AbortController();
    const run = sup.run(shutdown.signal);
    await waitFor(() => sup.health().state === 'running');
    await waitFor(() => ch.starts.length === 2 && sup.health().state === 'running');
    assert.equal(sup.health().restarts, 1);
    assert.equal(sup.health().lastError, 'socket silent');
    assert.deepEqual(readies, ['test', 'test']);
    shutdown.abort();
    await run;
    assert.equal(sup.health().state, 'stopped');
  });

  it('restarts a channel that stops showing signs of life (watchdog)', async () => {
    const ch = channel(
      async (signal, link) => {
        link.ready();
        await untilAbort(signal);
      },
      { livenessTimeoutMs: 40 },
    );
    const sup = new ChannelSupervisor(ch, push, fast, testLogger(), { onReady: () => undefined });
    const shutdown = new AbortController();
    const run = sup.run(shutdown.signal);
    await waitFor(() => ch.starts.length >= 2);
    shutdown.abort();
    await run;
    assert.match(sup.health().lastError ?? '', /no sign of life/);
  });

  it('keeps a channel that calls alive() running', async () => {
    const ch = channel(
      async (signal, link) => {
        link.ready();
        const beat = setInterval(() => link.alive(), 10);
        await untilAbort(signal);
        clearInterval(beat);
      },
      { livenessTimeoutMs: 60 },
    );
    const sup = new ChannelSupervisor(ch, push, fast, testLogger(), { onReady: () => undefined });
    const shutdown = new AbortController();
    const run = sup.run(shutdown.signal);
    await new Promise((resolve) => setTimeout(resolve, 250));
    shutdown.abort();
    await run;
    assert.equal(ch.starts.length, 1);
    assert.equal(sup.health().restarts, 0);
  });

  it('treats a listen that returns on its own as a dropped connection', async () => {
    const ch = channel(async (signal, link, attempt) => {
      link.ready();
      if (attempt === 1) return;
      await untilAbort(signal);
    });
    const sup = new ChannelSupervisor(ch, push, fast, testLogger(), { onReady: () => undefined });
    const shutdown = new AbortController();
    const run = sup.run(shutdown.signal);
    await waitFor(() => ch.starts.length === 2);
    shutdown.abort();
    await run;
    assert.match(sup.health().lastError ?? '', /returned without being stopped/);
  });

  it('does not hang on shutdown when a listen ignores its signal', async () => {
    const ch = channel(async (_signal, link) => {
      link.ready();
      await new Promise(() => undefined);
    });
    const sup = new ChannelSupervisor(ch, push, fast, testLogger(), { onReady: () => undefined });
    const shutdown = new AbortController();
    const run = sup.run(shutdown.signal);
    await waitFor(() => sup.health().state === 'running');
    const started = Date.now();
    shutdown.abort();
    await run;
    assert.ok(Date.now() - started < 1000);
  });

  it('counts inbound messages for health', async () => {
    let pushed: Push | undefined;
    const ch: Channel = {
      name: 'test',
      listen: async (p, signal, link) => {
        pushed = p;
        link.ready();
        await untilAbort(signal);
      },
      send: async () => undefined,
    };
    const sup = new ChannelSupervisor(ch, push, fast, testLogger(), { onReady: () => undefined });
    const shutdown = new AbortController();
    const run = sup.run(shutdown.signal);
    await waitFor(() => pushed !== undefined);
    assert.equal(sup.health().lastInboundAt, undefined);
    await pushed!({ channel: 'test', account: 'a', chat: 'c', id: '1', sender: { id: 'u' }, text: 'x', timestamp: 0 });
    assert.ok(sup.health().lastInboundAt! > 0);
    shutdown.abort();
    await run;
  });
});

describe('ChannelSupervisor when the wall clock jumps', () => {
  for (const jump of [HOUR_MS, -HOUR_MS, DAY_MS, -DAY_MS]) {
    const label = `${jump > 0 ? '+' : '-'}${Math.abs(jump) / HOUR_MS} h`;

    it(`a step of ${label} does not fire the liveness watchdog on a live channel`, async (t) => {
      const clock = jumpingClock({ mock: t.mock });
      const ch = channel(
        async (signal, link) => {
          link.ready();
          const beat = setInterval(() => link.alive(), 10);
          await untilAbort(signal);
          clearInterval(beat);
        },
        { livenessTimeoutMs: 80 },
      );
      const sup = new ChannelSupervisor(ch, push, { ...fast, clock }, testLogger(), { onReady: () => undefined });
      const shutdown = new AbortController();
      const run = sup.run(shutdown.signal);
      await waitFor(() => sup.health().state === 'running');
      clock.jump(jump);
      await new Promise((resolve) => setTimeout(resolve, 300));
      shutdown.abort();
      await run;
      assert.equal(ch.starts.length, 1);
      assert.equal(sup.health().restarts, 0);
    });

    it(`a step of ${label} does not keep the watchdog from restarting a deaf channel`, async (t) => {
      const clock = jumpingClock({ mock: t.mock });
      const ch = channel(
        async (signal, link, attempt) => {
          link.ready();
          if (attempt === 1) clock.jump(jump);
          await untilAbort(signal);
        },
        { livenessTimeoutMs: 60 },
      );
      const sup = new ChannelSupervisor(ch, push, { ...fast, clock }, testLogger(), { onReady: () => undefined });
      const shutdown = new AbortController();
      const run = sup.run(shutdown.signal);
      await waitFor(() => ch.starts.length >= 2, 2000);
      shutdown.abort();
      await run;
      assert.match(sup.health().lastError ?? '', /no sign of life for 0 s/, 'silence measured on the monotonic clock, not the jump');
    });

    it(`a step of ${label} during a healthy run still resets the backoff, and health() shows wall times`, async (t) => {
      const clock = jumpingClock({ mock: t.mock });
      const options = { ...fast, initialBackoffMs: 50, maxBackoffMs: 5000, healthyAfterMs: 60, clock };
      // as in 'resets the backoff after a healthy period', with the clock stepped during attempt 4
      const { gap, sup } = await gapAfterHealthyRun(options, () => clock.jump(jump));
      assert.ok(gap < 250, `delay after a healthy run should be back to ~50 ms whatever the wall clock did, was ${gap}`);
      const health = sup.health();
      assert.ok(Math.abs(health.since - clock.now()) < 5000 && Math.abs(health.since - clock.now() + jump) > 60_000, 'since is a wall time, on the stepped clock');
      assert.ok(Math.abs(health.lastErrorAt! - clock.now()) < 5000, 'lastErrorAt too');
    });
  }
});

/**
 * Attempts 1–3 fail at once, attempt 4 is healthy for 100 ms (`during` runs at its start) and
 * then fails; returns the delay before attempt 5, less the healthy run itself.
 */
async function gapAfterHealthyRun(options: ConstructorParameters<typeof ChannelSupervisor>[2], during?: () => void): Promise<{ gap: number; sup: ChannelSupervisor }> {
  const ch = channel(async (_signal, link, attempt) => {
    if (attempt === 4) {
      link.ready();
      during?.();
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    throw new Error(`fail ${attempt}`);
  });
  const sup = new ChannelSupervisor(ch, push, options, testLogger(), { onReady: () => undefined });
  const shutdown = new AbortController();
  const run = sup.run(shutdown.signal);
  await waitFor(() => ch.starts.length >= 5);
  shutdown.abort();
  await run;
  return { gap: ch.starts[4]! - ch.starts[3]! - 100, sup };
}

describe('ChannelSupervisor.restart (the console’s restart button)', () => {
  it('restarts a running listen at once, without backoff, and counts it', async () => {
    const ch = channel(async (signal, link) => {
      link.ready();
      await untilAbort(signal);
    });
    const slow: SupervisorOptions = { ...fast, initialBackoffMs: 60_000, maxBackoffMs: 60_000 };
    const sup = new ChannelSupervisor(ch, push, slow, testLogger(), { onReady: () => undefined });
    const shutdown = new AbortController();
    const run = sup.run(shutdown.signal);
    await waitFor(() => sup.health().state === 'running');
    assert.equal(sup.restart(), true);
    await waitFor(() => ch.starts.length === 2 && sup.health().state === 'running', 1000);
    assert.equal(sup.health().restarts, 1);
    assert.equal(sup.health().lastError, 'restarted by the operator');
    shutdown.abort();
    await run;
  });

  it('ends a backoff wait at once', async () => {
    const ch = channel(async (signal, link, attempt) => {
      if (attempt === 1) throw new Error('down');
      link.ready();
      await untilAbort(signal);
    });
    const slow: SupervisorOptions = { ...fast, initialBackoffMs: 60_000, maxBackoffMs: 60_000 };
    const sup = new ChannelSupervisor(ch, push, slow, testLogger(), { onReady: () => undefined });
    const shutdown = new AbortController();
    const run = sup.run(shutdown.signal);
    await waitFor(() => sup.health().state === 'backoff');
    assert.equal(sup.restart(), false, 'nothing was running');
    await waitFor(() => sup.health().state === 'running', 1000);
    shutdown.abort();
    await run;
  });
});
