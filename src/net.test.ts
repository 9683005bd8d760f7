import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseListen, secretsEqual } from './net.ts';

describe('net helpers', () => {
  it('parses host:port and [v6]:port, and refuses anything else', () => {
    assert.deepEqual(parseListen('0.0.0.0:8787'), { host: '0.0.0.0', port: 8787 });
    assert.deepEqual(parseListen('[::1]:3000'), { host: '::1', port: 3000 });
    assert.throws(() => parseListen('8787'), /host:port/);
    assert.throws(() => parseListen('h:99999'), /host:port/);
  });

  it('compares secrets of any length', () => {
    assert.equal(secretsEqual('token-a', 'token-a'), true);
    assert.equal(secretsEqual('token-a', 'token-b'), false);
    assert.equal(secretsEqual('short', 'much-longer-secret'), false);
    assert.equal(secretsEqual(Buffer.from('x'), 'x'), true);
  });
});
