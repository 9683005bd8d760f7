import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createToolRunner, type ToolDecision } from '../agent/tool-runner.ts';
import { createArgsValidator } from '../agent/validate.ts';
import type { ChatRequest, ChatResponse, Provider } from '../provider.ts';
import { ok, type Tool } from '../tool.ts';
import { testLogger } from '../../test/support/log.ts';
import { createDelegateTool, type SubAgentSpec } from './delegate.ts';

const ctx = () => ({ conversation: 'c', channel: 'mem', senderId: 'u', workspace: '/tmp', signal: new AbortController().signal, log: testLogger() });

function scripted(...responses: Array<Partial<ChatResponse> | (() => Promise<ChatResponse>)>): Provider & { requests: ChatRequest[] } {
  const requests: ChatRequest[] = [];
  return {
    name: 'scripted',
    requests,
    async chat(request) {
      requests.push(structuredClone({ ...request, onTextDelta: undefined }));
      const next = responses.shift() ?? { text: 'done' };
      if (typeof next === 'function') return next();
      return { text: next.text ?? '', toolCalls: next.toolCalls ?? [] };
    },
  };
}

const lookup: Tool = { name: 'lookup', description: 'looks up', parameters: { type: 'object' }, execute: async () => ok('42') };
const risky: Tool = {
  name: 'risky',
  description: '',
  parameters: { type: 'object' },
  assess: () => ({ risk: 'medium', mutates: true, summary: 'risky: x' }),
  execute: async () => ok('should not run'),
};

function spec(tools: Tool[], overrides: Partial<SubAgentSpec> = {}): SubAgentSpec {
  const decide = (a: { risk: string }): ToolDecision => (a.risk === 'medium' ? { kind: 'ask' } : { kind: 'allow' });
  return {
    description: 'Finds numbers.',
    instructions: 'Be exact.',
    runner: createToolRunner({ tools, validator: createArgsValidator(), decide, alwaysApproved: () => false, timeoutMs: 1000 }),
    maxToolIterations: 4,
    timeoutMs: 2000,
    ...overrides,
  };
}

describe('delegate tool', () => {
  it('runs the sub-agent with its own instructions, tools and model, and returns its answer', async () => {
    const provider = scripted({ toolCalls: [{ id: '1', name: 'lookup', arguments: '{}' }] }, { text: '<think>hmm</think>The answer is 42.' });
    const tool = createDelegateTool({ provider, xml: false, agents: new Map([['numbers', spec([lookup], { model: 'hint:fast' })]]) });
    const result = await tool.execute({ agent: 'numbers', task: 'What is the answer?' }, ctx());
    assert.deepEqual(result, { kind: 'ok', text: 'numbers answered:\nThe answer is 42.' });
    assert.match(provider.requests[0]!.system, /You are "numbers", a sub-agent\. Finds numbers\.\nBe exact\./);
    assert.equal(provider.requests[0]!.model, 'hint:fast');
    assert.deepEqual(
      provider.requests[0]!.tools.map((t) => t.name),
      ['lookup'],
    );
    assert.deepEqual(provider.requests[0]!.messages, [{ role: 'user', content: 'What is the answer?' }]);
  });

  it('names its sub-agents in its schema and description', () => {
    const tool = createDelegateTool({ provider: scripted(), xml: false, agents: new Map([['numbers', spec([])]]) });
    assert.match(tool.description, /numbers — Finds numbers\./);
    assert.deepEqual((tool.parameters.properties as { agent: { enum: string[] } }).agent.enum, ['numbers']);
  });

  it('refuses calls that would need approval inside a sub-agent', async () => {
    const provider = scripted({ toolCalls: [{ id: '1', name: 'risky', arguments: '{}' }] }, { text: 'could not' });
    const tool = createDelegateTool({ provider, xml: false, agents: new Map([['numbers', spec([risky])]]) });
    await tool.execute({ agent: 'numbers', task: 't' }, ctx());
    assert.match(provider.requests[1]!.messages.find((m) => m.role === 'tool')!.content, /needs a person's approval, which a sub-agent cannot ask for/);
  });

  it('gives up after its timeout with a clear error', async () => {
    const provider = scripted(() => new Promise<ChatResponse>(() => undefined));
    const hanging: Provider = {
      name: 'hanging',
      chat: (_request, signal) => new Promise((_, reject) => signal.addEventListener('abort', () => reject(new Error('aborted')))),
    };
    void provider;
    const tool = createDelegateTool({ provider: hanging, xml: false, agents: new Map([['numbers', spec([], { timeoutMs: 50 })]]) });
    const result = await tool.execute({ agent: 'numbers', task: 't' }, ctx());
    assert.deepEqual(result, { kind: 'error', message: 'numbers failed: no answer within 0 s' });
  });

  it('depth is bounded by construction: a sub-agent only has delegate if it was given one', async () => {
    const provider = scripted({ toolCalls: [{ id: '1', name: 'delegate', arguments: '{"agent":"numbers","task":"x"}' }] }, { text: 'no' });
    const tool = createDelegateTool({ provider, xml: false, agents: new Map([['numbers', spec([lookup])]]) });
    await tool.execute({ agent: 'numbers', task: 't' }, ctx());
    assert.match(provider.requests[1]!.messages.find((m) => m.role === 'tool')!.content, /There is no tool named "delegate"/);
  });
});
