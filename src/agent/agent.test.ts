import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { InboundMessage } from '../channel.ts';
import type { ChatRequest, ChatResponse, Provider } from '../provider.ts';
import { ok, type Tool } from '../tool.ts';
import { testLogger } from '../../test/support/log.ts';
import { createAgent } from './agent.ts';
import { sanitizeReply } from './sanitize.ts';
import { createClockTool } from '../tools/clock.ts';

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
const input = (history: InboundMessage[] = []) => ({
  message,
  conversation: 'mem:a:c',
  history: history.map((m) => ({ role: 'user' as const, content: m.text })),
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
    const agent = createAgent({ provider, tools: [echoTool], name: 'Bot', instructions: 'Be brief.', workspace: '/tmp', maxToolIterations: 10, toolTimeoutMs: 1000 });
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
    const agent = createAgent({ provider, tools: [echoTool, clock], name: 'Bot', instructions: '', workspace: '/tmp', maxToolIterations: 10, toolTimeoutMs: 1000 });
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
    const agent = createAgent({ provider, tools: [echoTool, thrower, hang], name: 'Bot', instructions: '', workspace: '/tmp', maxToolIterations: 10, toolTimeoutMs: 50 });
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
    const agent = createAgent({ provider, tools: [echoTool], name: 'Bot', instructions: '', workspace: '/tmp', maxToolIterations: 3, toolTimeoutMs: 1000 });
    const output = await agent(input());
    assert.equal(provider.requests.length, 3);
    assert.match(output.reply, /stopped after 3 rounds of tool calls/);
  });

  it('never lets internal markup reach the user', async () => {
    const provider = scripted({ text: '<think>the user wants time</think>It is <tool_call>{"name":"x"}</tool_call>noon.' });
    const agent = createAgent({ provider, tools: [], name: 'Bot', instructions: '', workspace: '/tmp', maxToolIterations: 3, toolTimeoutMs: 1000 });
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
