import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Autonomy } from './autonomy.ts';
import { createSecurityPolicy } from './policy.ts';

describe('createSecurityPolicy', () => {
  it('fills in documented defaults', () => {
    const policy = createSecurityPolicy({ workspace: '/srv/switchboard/workspace/' });
    assert.equal(policy.workspace, '/srv/switchboard/workspace');
    assert.equal(policy.autonomy, 'supervised');
    assert.equal(policy.commandTimeoutMs, 60_000);
    assert.equal(policy.maxOutputBytes, 65_536);
    assert.deepEqual(policy.envPassthrough, []);
    assert.equal(policy.commands.allowed.get('ls'), 'low');
    assert.equal(policy.commands.allowed.get('git'), 'medium');
    assert.equal(policy.commands.allowed.get('rm'), 'high');
  });

  it('passes the command options through', () => {
    const policy = createSecurityPolicy({ workspace: '/srv/ws', allowedCommands: ['ls'], extraAllowedCommands: ['cargo'], envPassthrough: ['GOPATH'], autonomy: 'full' });
    assert.deepEqual([...policy.commands.allowed], [['ls', 'low'], ['cargo', 'medium']]);
    assert.deepEqual(policy.envPassthrough, ['GOPATH']);
    assert.equal(policy.autonomy, 'full');
  });

  it('throws TypeErrors that name the key and quote the value', () => {
    assert.throws(() => createSecurityPolicy({ workspace: 'relative/ws' }), /\[security\] workspace must be an absolute path, got "relative\/ws"/);
    assert.throws(() => createSecurityPolicy({ workspace: '/' }), /system location/);
    assert.throws(() => createSecurityPolicy({ workspace: '/proc/self' }), /system location/);
    assert.throws(() => createSecurityPolicy({ workspace: '/srv/ws', autonomy: 'yolo' as Autonomy }), /autonomy must be one of .*got "yolo"/);
    assert.throws(() => createSecurityPolicy({ workspace: '/srv/ws', envPassthrough: ['GITHUB_TOKEN'] }), /env_passthrough: "GITHUB_TOKEN" looks like a secret/);
    assert.throws(() => createSecurityPolicy({ workspace: '/srv/ws', commandTimeoutMs: 0 }), /command_timeout_ms must be a positive whole number, got 0/);
    assert.throws(() => createSecurityPolicy({ workspace: '/srv/ws', maxOutputBytes: 1.5 }), /max_output_bytes/);
    assert.throws(() => createSecurityPolicy({ workspace: '/srv/ws', allowedCommands: ['bash'] }), TypeError);
  });
});
