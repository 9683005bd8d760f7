import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { testLogger } from '../../test/support/log.ts';
import { ok, type Tool, type ToolContext } from '../tool.ts';
import { createToolRunner, type ToolList } from './tool-runner.ts';
import { createArgsValidator } from './validate.ts';

const ctx = (): ToolContext => ({ conversation: 'c', channel: 'mem', senderId: 'u1', workspace: '/tmp', signal: new AbortController().signal, log: testLogger() });
const tool = (name: string, parameters: Record<string, unknown> = { type: 'object', properties: {} }): Tool => ({
  name,
  description: name,
  parameters,
  execute: async () => ok(`${name} ran`),
});
const options = { validator: createArgsValidator(), decide: () => ({ kind: 'allow' }) as const, alwaysApproved: () => false, timeoutMs: 1000 };
const call = (name: string, args = '{}') => ({ id: name, name, arguments: args });

describe('tool runner', () => {
  it('still takes a fixed list', async () => {
    const runner = createToolRunner({ ...options, tools: [tool('a')] });
    assert.deepEqual(
      runner.tools.map((t) => t.name),
      ['a'],
    );
    assert.deepEqual(await runner.run(await runner.prepare(call('a'), ctx()), ctx()), { kind: 'ok', text: 'a ran' });
  });

  it('reads a changing list anew: tools appear and disappear between turns', async () => {
    let current: readonly Tool[] = [tool('a')];
    const list: ToolList = { tools: () => current };
    const runner = createToolRunner({ ...options, tools: list });
    const prepared = await runner.prepare(call('a'), ctx());
    assert.equal(prepared.outcome, 'run');
    current = [tool('b')];
    assert.deepEqual(
      runner.tools.map((t) => t.name),
      ['b'],
    );
    // Prepared while it existed, gone before it ran (a disconnected client): an error result, no throw.
    assert.deepEqual(await runner.run(prepared, ctx()), { kind: 'error', message: 'The tool a is no longer available (its server or client disconnected).' });
    assert.deepEqual(await runner.run(await runner.prepare(call('b'), ctx()), ctx()), { kind: 'ok', text: 'b ran' });
    const missing = await runner.prepare(call('a'), ctx());
    assert.equal(missing.outcome === 'done' && missing.result.kind === 'error' && missing.result.message, 'There is no tool named "a". Available tools: b.');
  });

  it('turns a parameter schema that does not compile into an error result', async () => {
    const runner = createToolRunner({ ...options, tools: [tool('odd', { type: 'object', properties: { x: { type: 'no-such-type' } } })] });
    const prepared = await runner.prepare(call('odd'), ctx());
    assert.equal(prepared.outcome, 'done');
    assert.match(prepared.outcome === 'done' && prepared.result.kind === 'error' ? prepared.result.message : '', /^odd cannot be used: its parameter schema is invalid/);
  });
});
