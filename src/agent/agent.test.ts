import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { InboundMessage } from '../channel.ts';
import type { ChatRequest, ChatResponse, Provider } from '../provider.ts';
import { ok, type Tool } from '../tool.ts';
import { testLogger } from '../../test/support/log.ts';
import { createAgent, type TurnOutput } from './agent.ts';
import { ApprovalStore } from './approvals.ts';
import { sanitizeReply } from './sanitize.ts';
import { createToolRunner, type ToolDecision } from './tool-runner.ts';
import { createArgsValidator } from './validate.ts';
import type { ToolCallingMode } from './loop.ts';
import type { TurnMemory } from './memory-context.ts';
import { createClockTool } from '../tools/clock.ts';
import { openDatabase } from '../store/db.ts';
import { sqliteDatabase } from '../store/sqlite-sql.ts';
import type { Database } from '../store/sql.ts';

interface MakeOptions {
  tools?: Tool[];
  decide?: (assessment: { risk: string; mutates: boolean; summary: string }) => ToolDecision;
  toolCalling?: ToolCallingMode;
  maxToolIterations?: number;
  toolTimeoutMs?: number;
  workspace?: string;
  /** What each voice note is heard as (a fake transcriber). */
  heard?: string;
  memory?: TurnMemory;
}

function makeAgent(provider: Provider, options: MakeOptions = {}) {
  const database = sqliteDatabase(openDatabase(':memory:'));
  const approvals = new ApprovalStore(database);
  const runner = createToolRunner({
    tools: options.tools ?? [],
    validator: createArgsValidator(),
    decide: options.decide ?? (() => ({ kind: 'allow' })),
    alwaysApproved: (ctx, summary) => approvals.isAlways(ctx.channel, ctx.senderId, summary),
    timeoutMs: options.toolTimeoutMs ?? 1000,
  });
  const agent = createAgent({
    provider,
    runner,
    approvals,
    name: 'Bot',
    instructions: 'Be brief.',
    workspace: options.workspace ?? '/tmp',
    maxToolIterations: options.maxToolIterations ?? 10,
    toolCalling: options.toolCalling ?? 'native',
    ...(options.memory === undefined ? {} : { memory: options.memory }),
    ...(options.heard === undefined ? {} : { transcription: { echo: false, transcriber: async () => ({ transcribe: async () => ({ ok: true as const, text: options.heard! }) }) } }),
  });
  return { agent, approvals, committed: (output: TurnOutput) => commitTurn(database, output) };
}

/** Plays the runtime's part: run the turn's atomic writes, in one transaction. */
const commitTurn = async (database: Database, output: TurnOutput): Promise<TurnOutput> => {
  const commit = output.commit;
  if (commit) await database.transaction((tx) => commit(tx));
  return output;
};

function scripted(...responses: Array<Partial<ChatResponse>>): Provider & { requests: ChatRequest[] } {
  const requests: ChatRequest[] = [];
  return {
    name: 'scripted',
    requests,
    async chat(request) {
      requests.push(structuredClone(request));
      const next = responses.shift() ?? { text: 'done' };
      return { text: next.text ?? '', toolCalls: next.toolCalls ?? [] };
    },
  };
}

const message: InboundMessage = { channel: 'mem', account: 'a', chat: 'c', id: 'm1', sender: { id: 'u1', name: 'Ada' }, text: 'what time is it?', timestamp: 0 };
const input = (text = message.text, turnId = 1) => ({
  message: { ...message, text, id: `m${turnId}` },
  conversation: 'mem:a:c',
  turnId,
  history: [],
  signal: new AbortController().signal,
  log: testLogger(),
});

const echoTool: Tool = {
  name: 'echo',
  description: 'echoes',
  parameters: { type: 'object', properties: { text: { type: 'string' } } },
  execute: async (args) => ok(`echo:${String(args.text)}`),
};

describe('agent loop', () => {
  it('answers without tools and returns the turn for the history', async () => {
    const provider = scripted({ text: 'It is noon.' });
    const { agent } = makeAgent(provider, { tools: [echoTool] });
    const output = await agent(input());
    assert.equal(output.reply, 'It is noon.');
    assert.deepEqual(output.messages, [
      { role: 'user', content: 'what time is it?' },
      { role: 'assistant', content: 'It is noon.' },
    ]);
    const request = provider.requests[0]!;
    assert.match(request.system, /You are Bot/);
    assert.match(request.system, /Be brief\./);
    assert.match(request.system, /with Ada/);
    assert.deepEqual(
      request.tools.map((t) => t.name),
      ['echo'],
    );
  });

  it('runs tool calls (in parallel), feeds results back, and finishes', async () => {
    const provider = scripted(
      {
        toolCalls: [
          { id: 'a', name: 'echo', arguments: '{"text":"one"}' },
          { id: 'b', name: 'current_time', arguments: '{}' },
        ],
      },
      { text: 'Here you go.' },
    );
    const clock = createClockTool(() => new Date('2026-11-22T12:00:00Z'));
    const { agent } = makeAgent(provider, { tools: [echoTool, clock] });
    const output = await agent(input());
    assert.equal(output.reply, 'Here you go.');
    const second = provider.requests[1]!;
    const toolMessages = second.messages.filter((m) => m.role === 'tool');
    assert.deepEqual(
      toolMessages.map((m) => m.content),
      ['echo:one', '2026-11-22T12:00:00.000Z'],
    );
    assert.equal(output.messages.length, 5); // user, assistant(tool calls), 2 tool results, assistant
  });

  it('returns tool failures to the model as data: unknown tool, bad JSON, a throwing tool, a hung tool', async () => {
    const thrower: Tool = { name: 'boom', description: '', parameters: { type: 'object' }, execute: async () => Promise.reject(new Error('disk on fire')) };
    const hang: Tool = { name: 'hang', description: '', parameters: { type: 'object' }, execute: () => new Promise(() => undefined) };
    const provider = scripted(
      {
        toolCalls: [
          { id: '1', name: 'nope', arguments: '{}' },
          { id: '2', name: 'echo', arguments: '{not json' },
          { id: '3', name: 'boom', arguments: '{}' },
          { id: '4', name: 'hang', arguments: '{}' },
          { id: '5', name: 'echo', arguments: '[1]' },
        ],
      },
      { text: 'Sorry, tools failed.' },
    );
    const { agent } = makeAgent(provider, { tools: [echoTool, thrower, hang], toolTimeoutMs: 50 });
    const output = await agent(input());
    assert.equal(output.reply, 'Sorry, tools failed.');
    const results = provider.requests[1]!.messages.filter((m) => m.role === 'tool').map((m) => m.content);
    assert.match(results[0]!, /no tool named "nope"\. Available tools: echo, boom, hang/);
    assert.match(results[1]!, /not valid JSON/);
    assert.match(results[2]!, /boom failed: disk on fire/);
    assert.match(results[3]!, /hang failed: timed out/);
    assert.match(results[4]!, /must be a JSON object/);
  });

  it('stops at max_tool_iterations with a clear message', async () => {
    const loop = Array.from({ length: 5 }, (_, i) => ({ toolCalls: [{ id: `c${i}`, name: 'echo', arguments: '{}' }] }));
    const provider = scripted(...loop);
    const { agent } = makeAgent(provider, { tools: [echoTool], maxToolIterations: 3 });
    const output = await agent(input());
    assert.equal(provider.requests.length, 3);
    assert.match(output.reply, /stopped after 3 rounds of tool calls/);
  });

  it('never lets internal markup reach the user', async () => {
    const provider = scripted({ text: '<think>the user wants time</think>It is <tool_call>{"name":"x"}</tool_call>noon.' });
    const { agent } = makeAgent(provider);
    assert.equal((await agent(input())).reply, 'It is noon.');
  });
});

describe('sanitizeReply', () => {
  const cases: Array<[string, string]> = [
    ['plain', 'plain'],
    ['<think>\nhidden\n</think>\n\nvisible', 'visible'],
    ['<THINKING a="1">x</THINKING>ok', 'ok'],
    ['answer <tool_result>{"ok":true}</tool_result> more', 'answer  more'],
    ['visible <tool_call>{"name": "shell", "arguments": {}}', 'visible'],
    ['leaked reasoning</think>final', 'final'],
    ['a\n\n\n\nb', 'a\n\nb'],
    ['use x < y and <b>bold</b>', 'use x < y and <b>bold</b>'],
  ];
  for (const [raw, clean] of cases) {
    it(`cleans ${JSON.stringify(raw)}`, () => assert.equal(sanitizeReply(raw), clean));
  }
});

describe('current_time tool', () => {
  const clock = createClockTool(() => new Date('2026-11-22T12:00:00Z'));
  const ctx = { conversation: 'c', channel: 'mem', senderId: 'u', workspace: '/tmp', signal: new AbortController().signal, log: testLogger() };
  it('answers in UTC or a named zone, and rejects an unknown zone as data', async () => {
    assert.deepEqual(await clock.execute({}, ctx), { kind: 'ok', text: '2026-11-22T12:00:00.000Z' });
    assert.deepEqual(await clock.execute({ timezone: 'Asia/Tokyo' }, ctx), { kind: 'ok', text: '2026-11-22 21:00:00 (Asia/Tokyo)' });
    assert.equal((await clock.execute({ timezone: 'Mars/Base' }, ctx)).kind, 'error');
  });
});

describe('agent: arguments, output size, policy', () => {
  const strictTool: Tool = {
    name: 'add',
    description: 'adds',
    parameters: { type: 'object', properties: { a: { type: 'number' }, b: { type: 'number' } }, required: ['a', 'b'], additionalProperties: false },
    execute: async (args) => ok(String(Number(args.a) + Number(args.b))),
  };

  it('validates arguments against the schema before execute, and says what is wrong', async () => {
    const provider = scripted(
      { toolCalls: [{ id: '1', name: 'add', arguments: '{"a": "one", "c": 2}' }] },
      { toolCalls: [{ id: '2', name: 'add', arguments: '{"a": 1, "b": 2}' }] },
      { text: 'three' },
    );
    const { agent } = makeAgent(provider, { tools: [strictTool] });
    assert.equal((await agent(input())).reply, 'three');
    const first = provider.requests[1]!.messages.find((m) => m.role === 'tool')!.content;
    assert.match(first, /Invalid arguments for add: .*a must be number/);
    assert.match(first, /missing required argument "b"|unknown argument "c"/);
    assert.equal(provider.requests[2]!.messages.filter((m) => m.role === 'tool')[1]!.content, '3');
  });

  it('writes large output to a file in the workspace and gives the model the head and a pointer', async () => {
    const { mkdtempSync, readFileSync, rmSync } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const { join } = await import('node:path');
    const workspace = mkdtempSync(join(tmpdir(), 'sb-offload-'));
    try {
      const big: Tool = { name: 'big', description: '', parameters: { type: 'object' }, execute: async () => ok('x'.repeat(20_000)) };
      const provider = scripted({ toolCalls: [{ id: '1', name: 'big', arguments: '{}' }] }, { text: 'done' });
      const { agent } = makeAgent(provider, { tools: [big], workspace });
      await agent(input());
      const result = provider.requests[1]!.messages.find((m) => m.role === 'tool')!.content;
      assert.ok(result.length < 4000, `model got ${result.length} chars`);
      const saved = /saved as (\S+) in the workspace/.exec(result)![1]!;
      assert.equal(readFileSync(join(workspace, saved), 'utf8').length, 20_000);
    } finally {
      rmSync(workspace, { recursive: true, force: true });
    }
  });

  it('refuses what the policy denies, with its reason, without running the tool', async () => {
    let ran = 0;
    const risky: Tool = {
      name: 'risky',
      description: '',
      parameters: { type: 'object' },
      assess: () => ({ risk: 'high', mutates: true, summary: 'risky: everything' }),
      execute: async () => {
        ran++;
        return ok('did it');
      },
    };
    const provider = scripted({ toolCalls: [{ id: '1', name: 'risky', arguments: '{}' }] }, { text: 'ok' });
    const { agent } = makeAgent(provider, { tools: [risky], decide: () => ({ kind: 'deny', reason: 'high-risk calls need [security] autonomy = "full"' }) });
    await agent(input());
    assert.equal(ran, 0);
    assert.match(provider.requests[1]!.messages.find((m) => m.role === 'tool')!.content, /Not allowed: high-risk calls need/);
  });
});

describe('agent: approvals in the conversation', () => {
  const makeRisky = () => {
    const runs: string[] = [];
    const tool: Tool<{ cmd: string }> = {
      name: 'deploy',
      description: 'deploys',
      parameters: { type: 'object', properties: { cmd: { type: 'string' } }, required: ['cmd'] },
      assess: (args) => ({ risk: 'medium', mutates: true, summary: `deploy: ${args.cmd}` }),
      execute: async (args) => {
        runs.push(args.cmd);
        return ok(`deployed ${args.cmd}`);
      },
    };
    return { tool: tool as unknown as Tool, runs };
  };
  const askMedium = (a: { risk: string }): ToolDecision => (a.risk === 'medium' ? { kind: 'ask' } : { kind: 'allow' });

  it('asks, then runs the call and finishes the turn when the same person says yes', async () => {
    const { tool, runs } = makeRisky();
    const provider = scripted({ text: 'Deploying now.', toolCalls: [{ id: 'c1', name: 'deploy', arguments: '{"cmd":"v2"}' }] }, { text: 'Deployed v2.' });
    const { agent, approvals, committed } = makeAgent(provider, { tools: [tool], decide: askMedium });
    const first = await committed(await agent(input('deploy v2 please', 1)));
    assert.match(first.reply, /I need your approval before I run this:\n• deploy: v2\nReply yes, no, or always/);
    assert.deepEqual(first.messages, [], 'nothing goes to history while the turn waits');
    assert.equal(runs.length, 0);
    assert.ok(await approvals.pending('mem:a:c'));

    const second = await committed(await agent(input('yes', 2)));
    assert.equal(second.reply, 'Deployed v2.');
    assert.deepEqual(runs, ['v2']);
    assert.equal(await approvals.pending('mem:a:c'), undefined);
    assert.deepEqual(
      second.messages.map((m) => m.role),
      ['user', 'assistant', 'tool', 'assistant'],
    );
    assert.equal(second.messages[0]!.content, 'deploy v2 please');
    assert.equal(provider.requests.length, 2, 'the answer itself never went to the model as a message');
  });

  it('a spoken "yes" (a voice note, transcribed) answers the approval like a typed one', async () => {
    const { tool, runs } = makeRisky();
    const provider = scripted({ toolCalls: [{ id: 'c1', name: 'deploy', arguments: '{"cmd":"v4"}' }] }, { text: 'Deployed v4.' });
    const { agent, committed } = makeAgent(provider, { tools: [tool], decide: askMedium, heard: 'Yes.' });
    await committed(await agent(input('deploy v4 please', 1)));
    const voice = input('', 2);
    const second = await committed(await agent({ ...voice, message: { ...voice.message, attachments: [{ kind: 'voice', name: 'voice.ogg', mime: 'audio/ogg', size: 900, path: 'inbox/mem/m2/voice.ogg' }] } }));
    assert.equal(second.reply, 'Deployed v4.');
    assert.deepEqual(runs, ['v4']);
  });

  it("memory recalls for, and saves, a voice note's transcript", async () => {
    const seen: string[] = [];
    const memory: TurnMemory = {
      context: async (said) => void seen.push(`recall:${said.text}`),
      save: async (said) => void seen.push(`save:${said.text}`),
    };
    const { agent } = makeAgent(scripted({ text: 'Noted.' }), { heard: 'My sister is called Ines.', memory });
    const voice = input('', 1);
    await agent({ ...voice, message: { ...voice.message, attachments: [{ kind: 'voice', name: 'voice.ogg', mime: 'audio/ogg', size: 900, path: 'inbox/mem/m1/voice.ogg' }] } });
    assert.deepEqual(seen, ['recall:My sister is called Ines.', 'save:My sister is called Ines.']);
  });

  it('tells the model when the person says no, and never runs the call', async () => {
    const { tool, runs } = makeRisky();
    const provider = scripted({ toolCalls: [{ id: 'c1', name: 'deploy', arguments: '{"cmd":"v3"}' }] }, { text: 'OK, not deploying.' });
    const { agent, committed } = makeAgent(provider, { tools: [tool], decide: askMedium });
    await committed(await agent(input('deploy v3', 1)));
    const answer = await committed(await agent(input('no', 2)));
    assert.equal(answer.reply, 'OK, not deploying.');
    assert.equal(runs.length, 0);
    assert.match(provider.requests[1]!.messages.find((m) => m.role === 'tool')!.content, /declined/);
  });

  it('treats another reply as declined and hands the model what the person wrote', async () => {
    const { tool, runs } = makeRisky();
    const provider = scripted({ toolCalls: [{ id: 'c1', name: 'deploy', arguments: '{"cmd":"v4"}' }] }, { text: 'Understood.' });
    const { agent, committed } = makeAgent(provider, { tools: [tool], decide: askMedium });
    await committed(await agent(input('deploy v4', 1)));
    await committed(await agent(input('wait, deploy v5 instead', 2)));
    assert.equal(runs.length, 0);
    assert.match(provider.requests[1]!.messages.find((m) => m.role === 'tool')!.content, /wait, deploy v5 instead/);
  });

  it('remembers "always" for exactly that call', async () => {
    const { tool, runs } = makeRisky();
    const provider = scripted(
      { toolCalls: [{ id: 'c1', name: 'deploy', arguments: '{"cmd":"v6"}' }] },
      { text: 'done 1' },
      { toolCalls: [{ id: 'c2', name: 'deploy', arguments: '{"cmd":"v6"}' }] },
      { text: 'done 2' },
      { toolCalls: [{ id: 'c3', name: 'deploy', arguments: '{"cmd":"v7"}' }] },
    );
    const { agent, committed } = makeAgent(provider, { tools: [tool], decide: askMedium });
    await committed(await agent(input('deploy v6', 1)));
    assert.equal((await committed(await agent(input('always', 2)))).reply, 'done 1');
    assert.equal((await committed(await agent(input('deploy v6 again', 3)))).reply, 'done 2', 'no question the second time');
    assert.match((await committed(await agent(input('now v7', 4)))).reply, /deploy: v7/, 'a different call is asked again');
    assert.deepEqual(runs, ['v6', 'v6']);
  });

  it('only the person who was asked can answer; others get ordinary turns', async () => {
    const { tool, runs } = makeRisky();
    const provider = scripted({ toolCalls: [{ id: 'c1', name: 'deploy', arguments: '{"cmd":"v8"}' }] }, { text: 'hello Bob' });
    const { agent, approvals, committed } = makeAgent(provider, { tools: [tool], decide: askMedium });
    await committed(await agent(input('deploy v8', 1)));
    const bob = { ...input('yes', 2), message: { ...message, id: 'm2', text: 'yes', sender: { id: 'bob' } } };
    assert.equal((await committed(await agent(bob))).reply, 'hello Bob');
    assert.equal(runs.length, 0);
    assert.ok(await approvals.pending('mem:a:c'), 'still waiting for Ada');
  });

  it('starts afresh when the message that asked is re-run after a crash', async () => {
    const { tool } = makeRisky();
    const provider = scripted({ toolCalls: [{ id: 'c1', name: 'deploy', arguments: '{"cmd":"v9"}' }] }, { toolCalls: [{ id: 'c2', name: 'deploy', arguments: '{"cmd":"v9"}' }] });
    const { agent, committed } = makeAgent(provider, { tools: [tool], decide: askMedium });
    await committed(await agent(input('deploy v9', 7)));
    const rerun = await committed(await agent(input('deploy v9', 7)));
    assert.match(rerun.reply, /deploy: v9/, 'asked again, not treated as an answer');
    assert.equal(provider.requests.length, 2);
  });
});

describe('agent: XML tool calling and fallbacks', () => {
  it('describes tools in the prompt and parses <tool_call> from text in xml mode', async () => {
    const provider = scripted({ text: 'Let me check. <tool_call>{"name": "echo", "arguments": {"text": "hi"}}</tool_call>' }, { text: 'It said hi.' });
    const { agent } = makeAgent(provider, { tools: [echoTool], toolCalling: 'xml' });
    const output = await agent(input());
    assert.equal(output.reply, 'It said hi.');
    assert.deepEqual(provider.requests[0]!.tools, [], 'no native tools in xml mode');
    assert.match(provider.requests[0]!.system, /<tool_call>/);
    const resultMessage = provider.requests[1]!.messages.at(-1)!;
    assert.equal(resultMessage.role, 'user');
    assert.match(resultMessage.content, /echo:hi/);
    assert.ok(output.messages.every((m) => m.role !== 'tool'));
  });

  it('falls back to XML by itself when the endpoint rejects native tools (auto), and stays there', async () => {
    const { ProviderError } = await import('../provider.ts');
    const requests: ChatRequest[] = [];
    let call = 0;
    const provider: Provider = {
      name: 'picky',
      async chat(request) {
        requests.push(structuredClone(request));
        call++;
        if (request.tools.length > 0) throw new ProviderError('HTTP 400: tools are not supported', { status: 400, code: 'tools_unsupported' });
        if (call === 2) return { text: '<tool_call>{"name":"echo","arguments":{"text":"x"}}</tool_call>', toolCalls: [] };
        return { text: 'final', toolCalls: [] };
      },
    };
    const { agent } = makeAgent(provider, { tools: [echoTool], toolCalling: 'auto' });
    assert.equal((await agent(input('one', 1))).reply, 'final');
    assert.equal((await agent(input('two', 2))).reply, 'final');
    assert.equal(requests.filter((r) => r.tools.length > 0).length, 1, 'native tools tried once, then never again');
  });

  it('compacts the conversation and tries once more when the context window is exceeded', async () => {
    const { ProviderError } = await import('../provider.ts');
    const sizes: number[] = [];
    let failures = 0;
    const provider: Provider = {
      name: 'small-window',
      async chat(request) {
        sizes.push(request.messages.length);
        if (failures++ === 0) throw new ProviderError('maximum context length exceeded', { status: 400, code: 'context_length' });
        return { text: `fits in ${request.messages.length}`, toolCalls: [] };
      },
    };
    const { agent } = makeAgent(provider);
    const history = Array.from({ length: 10 }, (_, i) => [
      { role: 'user' as const, content: `q${i}` },
      { role: 'assistant' as const, content: `a${i}` },
    ]).flat();
    const output = await agent({ ...input(), history });
    assert.equal(sizes[0], 21);
    assert.equal(sizes[1], 11, 'the older half of the history was dropped');
    assert.equal(output.reply, 'fits in 11');
  });

  it('does not compact twice: a second context error fails the turn', async () => {
    const { ProviderError } = await import('../provider.ts');
    const provider: Provider = {
      name: 'tiny',
      chat: async () => Promise.reject(new ProviderError('too long', { status: 400, code: 'context_length' })),
    };
    const { agent } = makeAgent(provider);
    await assert.rejects(agent(input()), /too long/);
  });
});
