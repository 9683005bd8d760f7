/** The tool loop's parallel calls: what they send goes out in the order of the calls. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { OutboundFile } from '../channel.ts';
import type { ToolContext } from '../tool.ts';
import { testLogger } from '../../test/support/log.ts';
import { runPrepared } from './loop.ts';
import type { PreparedCall, ToolRunner } from './tool-runner.ts';

describe('runPrepared', () => {
  it('hands on the files of parallel calls in the order of the calls, however their checks finish', async () => {
    const sent: OutboundFile[] = [];
    const ctx: ToolContext = { conversation: 'c', channel: 'chat', senderId: 'ada', workspace: '/w', signal: new AbortController().signal, log: testLogger(), sendFile: (file) => void sent.push(file) };
    // The first call's checks take longest (a slow disk), the last's are instant.
    const delays: Record<string, number> = { first: 60, second: 20, third: 0 };
    const runner = {
      run: async (prepared: PreparedCall, own: ToolContext) => {
        await new Promise((resolve) => setTimeout(resolve, delays[prepared.call.name]));
        own.sendFile?.({ path: `/w/${prepared.call.name}.png`, name: `${prepared.call.name}.png` });
        return { kind: 'ok' as const, content: `${prepared.call.name} will be sent` };
      },
    } as unknown as ToolRunner;
    const calls: PreparedCall[] = ['first', 'second', 'third'].map((name) => ({ call: { id: name, name, arguments: '{}' }, outcome: 'run', args: {} }));
    const results = await runPrepared(calls, runner, ctx, 'run');
    assert.deepEqual(sent.map((file) => file.name), ['first.png', 'second.png', 'third.png']);
    assert.equal(results.length, 3);
  });
});
