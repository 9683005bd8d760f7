/**
 * Agent figures (prints numbers; never fails on speed):
 *  1. bytes (≈ tokens) of system prompt + tool schemas sent per turn with every built-in
 *     tool enabled, as they go over the wire to each provider kind;
 *  2. the added latency of one tool-loop iteration with a zero-latency model.
 * Run: npm run bench:agent
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { buildTools } from '../app/compose/tools.ts';
import { createAgent } from '../src/agent/agent.ts';
import { ApprovalStore } from '../src/agent/approvals.ts';
import { parseConfig } from '../app/config.ts';
import type { ChatRequest, Provider } from '../src/provider.ts';
import { createOpenAIProvider } from '../src/providers/openai.ts';
import { ScheduleStore } from '../src/schedule/store.ts';
import { openDatabase } from '../src/store/db.ts';
import { startFakeOpenAI } from '../test/fixtures/fake-openai.ts';
import { cleanSchema } from '../src/providers/schema-clean.ts';
import { sqliteDatabase } from '../src/store/sqlite-sql.ts';

const log = pino({ level: 'silent' });
const workspace = mkdtempSync(join(tmpdir(), 'sb-bench-agent-'));
const db = openDatabase(':memory:');
const approvals = new ApprovalStore(sqliteDatabase(db));
const schedules = new ScheduleStore(sqliteDatabase(db));

const config = parseConfig(
  `[provider]\nkind = "openai"\nmodel = "bench"\n[agents.research]\ndescription = "Researches a question on the web and reports back with sources."\ntools = ["web_fetch", "http_request"]\n`,
  'bench.toml',
  {},
);

const percentile = (sorted: number[], p: number): number => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;

async function promptSize(): Promise<void> {
  const fake = await startFakeOpenAI();
  try {
    const provider = createOpenAIProvider({ baseUrl: fake.baseUrl, model: 'bench', timeoutMs: 10_000 });
    const { runner } = await buildTools({ config, workspace, provider, approvals, schedules, log });
    const agent = createAgent({ provider, runner, approvals, name: 'Switchboard', instructions: '', workspace, maxToolIterations: 10, toolCalling: 'native' });
    await agent({
      message: { channel: 'terminal', account: 'local', chat: 'ada', id: 'm1', sender: { id: 'ada' }, text: 'hi', timestamp: Date.now() },
      conversation: 'terminal:local:ada',
      turnId: 1,
      history: [],
      signal: new AbortController().signal,
      log,
    });
    const body = fake.requests[0]!.body;
    const system = body.messages[0]!.content ?? '';
    const tools = JSON.stringify(body.tools ?? []);
    const total = JSON.stringify(body).length;
    const specs = runner.tools.map((tool) => ({ name: tool.name, description: tool.description, parameters: tool.parameters }));
    const size = (dialect: 'anthropic' | 'gemini'): number => JSON.stringify(specs.map((spec) => ({ ...spec, parameters: cleanSchema(spec.parameters, dialect) }))).length;
    console.log('## 1. Prompt + tool schemas per turn (all built-in tools enabled, one sub-agent)');
    console.log(`   tools: ${runner.tools.map((t) => t.name).join(', ')} (${runner.tools.length})`);
    console.log(`   system prompt            ${system.length.toLocaleString('en-US')} bytes`);
    console.log(`   tool schemas (OpenAI)    ${tools.length.toLocaleString('en-US')} bytes`);
    console.log(`   tool schemas (Anthropic) ${size('anthropic').toLocaleString('en-US')} bytes;  (Gemini) ${size('gemini').toLocaleString('en-US')} bytes`);
    console.log(`   whole first request body ${total.toLocaleString('en-US')} bytes ≈ ${Math.round(total / 4).toLocaleString('en-US')} tokens (bytes / 4)`);
    return;
  } finally {
    await fake.close();
  }
}

async function loopLatency(): Promise<void> {
  const iterations = 5;
  const turns = 300;
  const provider = (calls: number): Provider => {
    let n = 0;
    return {
      name: 'zero-latency',
      async chat(request: ChatRequest) {
        void request;
        n++;
        if (n % (calls + 1) !== 0) return { text: '', toolCalls: [{ id: `c${n}`, name: 'current_time', arguments: '{}' }] };
        return { text: 'done', toolCalls: [] };
      },
    };
  };
  const configClock = parseConfig(`[provider]\nkind = "openai"\nmodel = "x"\n[tools]\nenabled = ["current_time"]\n`, 'bench.toml', {});
  const time = async (calls: number): Promise<number[]> => {
    const p = provider(calls);
    const { runner } = await buildTools({ config: configClock, workspace, provider: p, approvals, schedules, log });
    const agent = createAgent({ provider: p, runner, approvals, name: 'S', instructions: '', workspace, maxToolIterations: 20, toolCalling: 'native' });
    const samples: number[] = [];
    for (let i = 0; i < turns + 50; i++) {
      const started = performance.now();
      await agent({
        message: { channel: 'terminal', account: 'local', chat: 'ada', id: `m${i}`, sender: { id: 'ada' }, text: 'hi', timestamp: 0 },
        conversation: 'terminal:local:ada',
        turnId: i,
        history: [],
        signal: new AbortController().signal,
        log,
      });
      if (i >= 50) samples.push(performance.now() - started);
    }
    return samples.sort((a, b) => a - b);
  };
  const base = await time(0);
  const looped = await time(iterations);
  const perIteration = (percentile(looped, 50) - percentile(base, 50)) / iterations;
  console.log('## 2. Tool loop latency, zero-latency model (in-process, current_time tool)');
  console.log(`   turn without tools   p50 ${percentile(base, 50).toFixed(3)} ms  p99 ${percentile(base, 99).toFixed(3)} ms`);
  console.log(`   turn with ${iterations} tool rounds p50 ${percentile(looped, 50).toFixed(3)} ms  p99 ${percentile(looped, 99).toFixed(3)} ms`);
  console.log(`   added per iteration  ≈ ${perIteration.toFixed(3)} ms (p50 difference / ${iterations})`);
}

try {
  console.log(`node ${process.version}`);
  await promptSize();
  await loopLatency();
} finally {
  db.close();
  rmSync(workspace, { recursive: true, force: true });
}
