import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Risk, ToolAssessment } from '../tool.ts';
import { decide, deniedReason } from './autonomy.ts';

const call = (risk: Risk, mutates = false): ToolAssessment => ({ risk, mutates, summary: `shell: ${risk}` });

describe('decide', () => {
  it('read_only allows only low-risk calls that change nothing', () => {
    assert.deepEqual(decide('read_only', call('low')), { kind: 'allow' });
    for (const assessment of [call('low', true), call('medium'), call('high')]) {
      const decision = decide('read_only', assessment);
      assert.equal(decision.kind, 'deny');
      if (decision.kind === 'deny') assert.match(decision.reason, /read-only.*\[security\] autonomy = "supervised"/);
    }
  });

  it('supervised allows low, asks for medium, refuses high', () => {
    assert.deepEqual(decide('supervised', call('low', true)), { kind: 'allow' });
    assert.deepEqual(decide('supervised', call('medium', true)), { kind: 'ask' });
    const decision = decide('supervised', call('high', true));
    assert.equal(decision.kind, 'deny');
    if (decision.kind === 'deny') assert.match(decision.reason, /"shell: high" is high risk.*\[security\] autonomy = "full"/);
  });

  it('full allows everything', () => {
    for (const risk of ['low', 'medium', 'high'] as const) assert.deepEqual(decide('full', call(risk, true)), { kind: 'allow' });
  });

  it('deniedReason gives the reason only for a deny', () => {
    assert.equal(deniedReason('supervised', call('medium')), undefined);
    assert.match(deniedReason('read_only', call('low', true)) ?? '', /read-only/);
  });
});
