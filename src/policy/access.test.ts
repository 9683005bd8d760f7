import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { InboundMessage } from '../channel.ts';
import { openDatabase } from '../store/db.ts';
import { PairingStore, decideAccess, isAllowed, pairingReply } from './access.ts';

const message = (over: Partial<InboundMessage> = {}): InboundMessage => ({
  channel: 'telegram',
  account: 'bot',
  chat: '42',
  id: String(Math.random()),
  sender: { id: 'u42' },
  text: 'hello',
  timestamp: 0,
  ...over,
});

describe('access policy', () => {
  it('lets listed senders (or anyone with "*") through and ignores the rest', () => {
    const pairing = new PairingStore(openDatabase(':memory:'));
    assert.deepEqual(decideAccess(message(), { allow: ['u42'], mentionOnly: true }, pairing), { kind: 'allow' });
    assert.deepEqual(decideAccess(message({ sender: { id: 'x' } }), { allow: ['u42'], mentionOnly: true }, pairing), { kind: 'ignore', reason: 'not allowed' });
    assert.deepEqual(decideAccess(message({ sender: { id: 'x' } }), { allow: ['*'], mentionOnly: true }, pairing), { kind: 'allow' });
  });

  it('gives an unknown direct sender one pairing code, then nothing until the operator approves', () => {
    const pairing = new PairingStore(openDatabase(':memory:'));
    const first = decideAccess(message(), { mentionOnly: true }, pairing);
    assert.equal(first.kind, 'pair');
    const code = (first as { code: string }).code;
    assert.match(code, /^[A-HJ-KM-NP-Z2-9]{6}$/);
    assert.match(pairingReply('telegram', code), new RegExp(`switchboard pairing approve telegram ${code}`));
    assert.deepEqual(decideAccess(message(), { mentionOnly: true }, pairing), { kind: 'ignore', reason: 'awaiting pairing approval' });
    assert.deepEqual(
      pairing.pending().map((p) => [p.channel, p.senderId, p.code]),
      [['telegram', 'u42', code]],
    );
    assert.equal(pairing.approve('discord', code), undefined, 'a code belongs to its channel');
    assert.equal(pairing.approve('telegram', code.toLowerCase()), 'u42');
    assert.equal(pairing.approve('telegram', code), undefined, 'a code is used once');
    assert.deepEqual(decideAccess(message(), { mentionOnly: true }, pairing), { kind: 'allow' });
    assert.deepEqual(pairing.pending(), []);
  });

  it('never pairs from a group, and in groups answers only when addressed (unless mention_only = false)', () => {
    const pairing = new PairingStore(openDatabase(':memory:'));
    assert.deepEqual(decideAccess(message({ direct: false }), { mentionOnly: true }, pairing), { kind: 'ignore', reason: 'not allowed' });
    const options = { allow: ['*'], mentionOnly: true };
    assert.deepEqual(decideAccess(message({ direct: false }), options, pairing), { kind: 'ignore', reason: 'not addressed' });
    assert.deepEqual(decideAccess(message({ direct: false, addressed: true }), options, pairing), { kind: 'allow' });
    assert.deepEqual(decideAccess(message({ direct: false }), { allow: ['*'], mentionOnly: false }, pairing), { kind: 'allow' });
  });

  it('remembers approvals across a restart', async () => {
    const { mkdtempSync, rmSync } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const { join } = await import('node:path');
    const dir = mkdtempSync(join(tmpdir(), 'sb-pair-'));
    try {
      const db = openDatabase(join(dir, 'p.db'));
      const store = new PairingStore(db);
      const { code } = store.requestCode('irc', 'nick!u@h');
      store.approve('irc', code);
      db.close();
      assert.equal(new PairingStore(openDatabase(join(dir, 'p.db'))).isApproved('irc', 'nick!u@h'), true);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('isAllowed', () => {
  it('matches ids exactly (case-insensitively), globs against any alias, and * for anyone', () => {
    assert.equal(isAllowed(['123'], ['123']), true);
    assert.equal(isAllowed(['123'], ['1234']), false);
    assert.equal(isAllowed(['Alice'], ['alice']), true);
    assert.equal(isAllowed(['*!*@trusted.host'], ['bob', 'bob!~b@trusted.host']), true);
    assert.equal(isAllowed(['*!*@trusted.host'], ['bob', 'bob!~b@evil.host']), false);
    assert.equal(isAllowed(['*@example.org'], ['ann@example.org']), true);
    assert.equal(isAllowed(['*@example.org'], ['ann@example.org.evil.com']), false);
    assert.equal(isAllowed(['a.b'], ['aXb']), false, 'dots are literal');
    assert.equal(isAllowed(['*'], ['anyone']), true);
  });
});
