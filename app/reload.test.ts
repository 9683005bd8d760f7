import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { parseConfig } from './config.ts';
import type { Channel } from '../src/channel.ts';
import { createReloader, diffConfig, effectiveConfig, stableJson } from './reload.ts';
import { testLogger } from '../test/support/log.ts';
import { openDatabase } from '../src/store/db.ts';
import { sqliteDatabase } from '../src/store/sqlite-sql.ts';
import { Runtime } from '../src/runtime/runtime.ts';
import { defaultSupervisorOptions } from '../src/runtime/supervisor.ts';
import { createMemoryChannel } from '../test/support/memory-channel.ts';
import type { TurnHandler } from '../src/agent/agent.ts';
import { pino } from 'pino';

const base = `data_dir = "./data"\n[provider]\nkind = "openai"\nmodel = "m1"\nbase_url = "http://127.0.0.1:1/v1"\n[channels.telegram]\ntoken = "t"\nallow = ["1"]\n`;
const parse = (text: string) => parseConfig(text, undefined, {});

describe('diffConfig', () => {
  it('finds nothing in the same config, even with tables reordered', () => {
    const diff = diffConfig(parse(base), parse(`[channels.telegram]\nallow = ["1"]\ntoken = "t"\n[provider]\nmodel = "m1"\nkind = "openai"\nbase_url = "http://127.0.0.1:1/v1"\n`));
    assert.deepEqual(diff, { restarted: [], added: [], removed: [], provider: false, tools: false, agent: false, needsRestart: [] });
  });

  it('restarts a changed channel, starts an added one, stops a removed one', () => {
    const old = parse(`${base}[channels.irc]\nhost = "127.0.0.1"\nnick = "bot"\nchannels = ["#a"]\n`);
    const next = parse(base.replace('allow = ["1"]', 'allow = ["1", "2"]') + `[channels.slack]\nbot_token = "b"\napp_token = "a"\n`);
    const diff = diffConfig(old, next);
    assert.deepEqual(diff.restarted, ['telegram']);
    assert.deepEqual(diff.added, ['slack']);
    assert.deepEqual(diff.removed, ['irc']);
    assert.equal(diff.agent, false);
  });

  it('rebuilds the provider (not the tools) for a new model; the tools for a security change', () => {
    const model = diffConfig(parse(base), parse(base.replace('"m1"', '"m2"')));
    assert.deepEqual([model.provider, model.tools, model.agent], [true, false, true]);
    const security = diffConfig(parse(base), parse(`${base}[security]\nautonomy = "full"\n`));
    assert.deepEqual([security.provider, security.tools, security.agent], [false, true, true]);
    const timeout = diffConfig(parse(base), parse(`${base}[agent]\ntool_timeout_seconds = 5\n`));
    assert.equal(timeout.tools, true);
    const recall = diffConfig(parse(base), parse(`${base}[memory]\nrecall_limit = 9\n`));
    assert.deepEqual([recall.tools, recall.agent, recall.needsRestart], [false, true, []]);
    const voice = `[transcription]\nkind = "openai"\nbase_url = "http://127.0.0.1:2/v1"\n`;
    const added = diffConfig(parse(base), parse(`${base}${voice}`));
    assert.deepEqual([added.provider, added.tools, added.agent, added.needsRestart], [false, false, true, []]);
    assert.equal(diffConfig(parse(`${base}${voice}`), parse(`${base}${voice}echo_transcript = true\n`)).agent, true);
  });

  it('names the keys that need a restart and keeps their old values', () => {
    const old = parse(base);
    const next = parse(base.replace('"./data"', '"./other"') + `[runtime]\nmax_queued = 5\n[log]\nlevel = "debug"\n[gateway]\nlisten = "127.0.0.1:9999"\n[memory]\nbackend = "none"\nauto_save = false\n`);
    const diff = diffConfig(old, next);
    assert.deepEqual(diff.needsRestart, ['data_dir', 'log.level', 'runtime.max_queued', 'gateway', 'memory.backend']);
    const kept = effectiveConfig(old, next);
    assert.equal(kept.data_dir, './data');
    assert.equal(kept.runtime.max_queued, old.runtime.max_queued);
    assert.equal(kept.gateway, undefined);
    assert.equal(kept.memory.backend, 'sqlite');
    assert.equal(kept.memory.auto_save, false, 'per-turn memory settings apply');
    assert.deepEqual(diffConfig(kept, next).needsRestart, diff.needsRestart, 'named again until a restart');
  });

  it('stableJson sorts keys', () => {
    assert.equal(stableJson({ b: 1, a: { d: 2, c: 3 } }), stableJson({ a: { c: 3, d: 2 }, b: 1 }));
  });
});

describe('createReloader', () => {
  function harness(files: string[]) {
    const calls: string[] = [];
    let built = 0;
    const reloader = createReloader({
      initial: parse(base),
      load: () => parse(files.shift()!),
      log: testLogger(),
      runtime: {
        addChannel: async (c) => void calls.push(`add ${c.name}`),
        replaceChannel: async (c) => {
          calls.push(`replace ${c.name}`);
          await new Promise((resolve) => setTimeout(resolve, 20));
        },
        removeChannel: async (n) => void calls.push(`remove ${n}`),
      },
      buildChannel: async (name) => {
        built++;
        if (name === 'discord') throw new Error('discord cannot be built');
        return { name, listen: async () => undefined, send: async () => undefined } as unknown as Channel;
      },
      rebuildAgent: async () => ({ commit: () => void calls.push('agent'), discard: () => void calls.push('discarded') }),
      applySettings: () => void calls.push('settings'),
    });
    return { reloader, calls, built: () => built };
  }

  it('rejects an invalid file and keeps the running config', async () => {
    const h = harness(['[provider]\nkind = "nope"\n']);
    const result = await h.reloader.reload();
    assert.equal(result.ok, false);
    assert.ok(!result.ok && result.problems && result.problems.length > 0);
    assert.ok(!result.ok && /provider\.kind: must be one of/.test(result.error), 'the problems, as at start');
    assert.ok(!result.ok && result.error.endsWith('The running daemon keeps the config it had. Fix the file, then run `switchboard reload` again.'), 'says what happens to the running daemon');
    assert.ok(!result.ok && !/Nothing was started/.test(result.error), 'not the message of a failed start');
    assert.deepEqual(h.calls, []);
    assert.equal(h.reloader.current().provider.model, 'm1');
  });

  it('logs what is wrong with a rejected file but never the value a key got (it may be a secret)', async () => {
    const lines: string[] = [];
    const reloader = createReloader({
      initial: parse(base),
      load: () => parse(`${base}[store]\nkind = "postgres"\nurl = "mysql://switchboard:s3cret-db-pass@db/x"\n`),
      log: pino({ level: 'info' }, { write: (line: string) => void lines.push(line) }),
      runtime: { addChannel: async () => undefined, replaceChannel: async () => undefined, removeChannel: async () => undefined },
      buildChannel: async () => assert.fail('nothing is built'),
      rebuildAgent: async () => assert.fail('nothing is built'),
      applySettings: () => undefined,
    });
    const result = await reloader.reload();
    assert.equal(result.ok, false);
    const logged = lines.join('');
    assert.match(logged, /config reload rejected/);
    assert.match(logged, /store\.url: must be a postgres:\/\/ connection string/);
    assert.ok(!logged.includes('s3cret-db-pass'), logged);
  });

    it('changes nothing when a channel cannot be built', async () => {
    const h = harness([base.replace('"m1"', '"m2"') + `[channels.discord]\ntoken = "d"\n`]);
    const result = await h.reloader.reload();
    assert.equal(result.ok, false);
    assert.deepEqual(h.calls, ['discarded'], 'the rebuilt agent is thrown away, nothing is swapped');
    assert.equal(h.reloader.current().provider.model, 'm1');
  });

  it('applies one reload after another, never two at once', async () => {
    const h = harness([base.replace('["1"]', '["2"]'), base.replace('["1"]', '["3"]').replace('"m1"', '"m2"')]);
    const [first, second] = await Promise.all([h.reloader.reload(), h.reloader.reload()]);
    assert.deepEqual(first, { ok: true, restarted: ['telegram'], added: [], removed: [], agentRebuilt: false, needsRestart: [] });
    assert.equal(second.ok && second.agentRebuilt, true);
    assert.deepEqual(h.calls, ['settings', 'replace telegram', 'settings', 'agent', 'replace telegram']);
    assert.equal(h.reloader.current().provider.model, 'm2');
  });
});

describe('Runtime channel swaps', () => {
  const dir = mkdtempSync(join(tmpdir(), 'sb-reload-'));
  after(() => rmSync(dir, { recursive: true, force: true }));
  const agent = (prefix: string): TurnHandler => async ({ message }) => ({ reply: `${prefix}: ${message.text}`, messages: [] });

  it('replaces, adds and removes channels while running; a reconfigured agent takes the next turn', async () => {
    const first = createMemoryChannel('mem');
    const runtime = new Runtime({
      database: sqliteDatabase(openDatabase(join(dir, 'swap.db'))),
      log: testLogger(),
      channels: [first],
      agent: agent('old'),
      historyTurns: 10,
      maxInFlight: 4,
      maxQueued: 10,
      turnTimeoutMs: 5000,
      shutdownGraceMs: 1000,
      supervisor: defaultSupervisorOptions,
      delivery: { attemptsPerRound: 2, initialBackoffMs: 5, maxBackoffMs: 20 },
    });
    await runtime.start();
    await runtime.ready;
    await first.inject({ id: '1', text: 'a' });
    await first.waitForSent(1);
    assert.equal(first.sent[0]!.text, 'old: a');

    const second = createMemoryChannel('mem');
    await runtime.replaceChannel(second);
    runtime.reconfigure({ agent: agent('new') });
    await second.inject({ id: '2', text: 'b' });
    await second.waitForSent(1);
    assert.equal(second.sent[0]!.text, 'new: b');
    assert.equal(first.sent.length, 1, 'the replaced channel sends nothing more');
    assert.deepEqual(runtime.health().channels.map((c) => [c.name, c.state]), [['mem', 'running']]);

    const other = createMemoryChannel('other');
    await runtime.addChannel(other);
    await other.inject({ id: '3', text: 'c' });
    await other.waitForSent(1);
    await assert.rejects(runtime.addChannel(createMemoryChannel('other')), /already running/);
    await runtime.removeChannel('other');
    assert.deepEqual(runtime.health().channels.map((c) => c.name), ['mem']);
    await assert.rejects(runtime.replaceChannel(createMemoryChannel('gone')), /no channel named "gone"/);
    await runtime.stop();
    await assert.rejects(runtime.addChannel(createMemoryChannel('late')), /shutting down/);
  });
});
