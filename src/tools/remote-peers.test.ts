import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { testLogger } from '../../test/support/log.ts';
import type { ToolContext } from '../tool.ts';
import { createPeerTools, type PeerCallOutcome, type PeerTool, type RemoteToolPeers } from './remote-peers.ts';

const context = (): ToolContext => ({ conversation: 'c', channel: 'mem', senderId: 'u', workspace: '/tmp', signal: new AbortController().signal, log: testLogger() });
const battery = (node: string, client = 'phone'): PeerTool => ({ node, client, name: 'phone_battery', description: 'Battery.', parameters: { type: 'object', properties: {} } });

/** Peers whose list and call outcome the test sets. */
function fakePeers(): RemoteToolPeers & { list: readonly PeerTool[]; outcome: PeerCallOutcome; calls: Array<{ tool: PeerTool; timeoutMs: number }> } {
  return {
    node: 'here',
    list: [],
    outcome: { kind: 'answered', result: { kind: 'ok', text: '81%' } },
    calls: [],
    publish: () => undefined,
    tools() {
      return this.list;
    },
    call(tool, _args, { timeoutMs }) {
      this.calls.push({ tool, timeoutMs });
      return Promise.resolve(this.outcome);
    },
    serve: () => () => undefined,
  };
}

describe('the other nodes\' remote tools as a ToolSource', () => {
  it('offers each name once, keeps the same objects while nothing changed, and names the node in the origin', () => {
    const peers = fakePeers();
    const source = createPeerTools(peers);
    assert.deepEqual(source.tools(), []);
    peers.list = [battery('n1'), battery('n2', 'tablet')];
    const first = source.tools();
    assert.equal(first.length, 1, 'a name two nodes list (a client moving) is offered once');
    assert.equal(source.origin(first[0]!), 'remote:phone@n1');
    assert.equal(source.tools(), first, 'the same array while the list is the same');
    peers.list = [battery('n1'), { ...battery('n1'), name: 'phone_gps' }];
    const second = source.tools();
    assert.equal(second[0], first[0], 'an unchanged tool keeps its object');
    assert.equal(second.length, 2);
    peers.list = [];
    assert.deepEqual(source.tools(), []);
    assert.equal(source.origin(first[0]!), undefined, 'a tool no longer listed has no origin here');
  });

  it('gives the model the same words as a local client for each outcome', async () => {
    const peers = fakePeers();
    const source = createPeerTools(peers, { callTimeoutMs: 1500 });
    peers.list = [battery('n1')];
    const tool = source.tools()[0]!;
    assert.equal(tool.assess?.({ a: 1 }, context()).risk, 'medium');
    assert.deepEqual(await tool.execute({}, context()), { kind: 'ok', text: '81%' });
    assert.equal(peers.calls[0]!.timeoutMs, 1500);
    peers.outcome = { kind: 'timeout' };
    assert.deepEqual(await tool.execute({}, context()), { kind: 'error', message: 'phone_battery timed out: the remote client "phone" did not answer within 1.5 s.' });
    peers.outcome = { kind: 'disconnected' };
    assert.deepEqual(await tool.execute({}, context()), { kind: 'error', message: 'The remote client "phone" disconnected before answering; the call did not complete.' });
    peers.outcome = { kind: 'cancelled' };
    assert.deepEqual(await tool.execute({}, context()), { kind: 'error', message: 'phone_battery was cancelled.' });
  });
});
