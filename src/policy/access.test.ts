import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { InboundMessage } from '../channel.ts';
import { openDatabase } from '../store/db.ts';
import { sqliteDatabase } from '../store/sqlite-sql.ts';
import { DAY_MS, HOUR_MS, jumpingClock, type JumpingClock } from '../../test/support/clock.ts';
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
  it('lets listed senders (or anyone with "*") through and ignores the rest', async () => {
    const pairing = new PairingStore(sqliteDatabase(openDatabase(':memory:')));
    assert.deepEqual(await decideAccess(message(), { allow: ['u42'], mentionOnly: true }, pairing), { kind: 'allow' });
    assert.deepEqual(await decideAccess(message({ sender: { id: 'x' } }), { allow: ['u42'], mentionOnly: true }, pairing), { kind: 'ignore', reason: 'not allowed' });
    assert.deepEqual(await decideAccess(message({ sender: { id: 'x' } }), { allow: ['*'], mentionOnly: true }, pairing), { kind: 'allow' });
  });

  it('gives an unknown direct sender one pairing code, then nothing until the operator approves', async () => {
    const pairing = new PairingStore(sqliteDatabase(openDatabase(':memory:')));
    const first = await decideAccess(message(), { mentionOnly: true }, pairing);
    assert.equal(first.kind, 'pair');
    const code = (first as { code: string }).code;
    assert.match(code, /^[A-HJ-KM-NP-Z2-9]{6}$/);
    assert.match(pairingReply('telegram', code), new RegExp(`switchboard pairing approve telegram ${code}`));
    assert.deepEqual(await decideAccess(message(), { mentionOnly: true }, pairing), { kind: 'ignore', reason: 'awaiting pairing approval' });
    assert.deepEqual(
      (await pairing.pending()).map((p) => [p.channel, p.senderId, p.code]),
      [['telegram', 'u42', code]],
    );
    assert.equal(await pairing.approve('discord', code), undefined, 'a code belongs to its channel');
    assert.equal(await pairing.approve('telegram', code.toLowerCase()), 'u42');
    assert.equal(await pairing.approve('telegram', code), undefined, 'a code is used once');
    assert.deepEqual(await decideAccess(message(), { mentionOnly: true }, pairing), { kind: 'allow' });
    assert.deepEqual(await pairing.pending(), []);
  });

  it('never pairs from a group, and in groups answers only when addressed (unless mention_only = false)', async () => {
    const pairing = new PairingStore(sqliteDatabase(openDatabase(':memory:')));
    assert.deepEqual(await decideAccess(message({ direct: false }), { mentionOnly: true }, pairing), { kind: 'ignore', reason: 'not allowed' });
    const options = { allow: ['*'], mentionOnly: true };
    assert.deepEqual(await decideAccess(message({ direct: false }), options, pairing), { kind: 'ignore', reason: 'not addressed' });
    assert.deepEqual(await decideAccess(message({ direct: false, addressed: true }), options, pairing), { kind: 'allow' });
    assert.deepEqual(await decideAccess(message({ direct: false }), { allow: ['*'], mentionOnly: false }, pairing), { kind: 'allow' });
  });

  it('remembers approvals across a restart', async () => {
    const { mkdtempSync, rmSync } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const { join } = await import('node:path');
    const dir = mkdtempSync(join(tmpdir(), 'sb-pair-'));
    try {
      const db = openDatabase(join(dir, 'p.db'));
      const store = new PairingStore(sqliteDatabase(db));
      const { code } = await store.requestCode('irc', 'nick!u@h');
      await store.approve('irc', code);
      db.close();
      assert.equal(await new PairingStore(sqliteDatabase(openDatabase(join(dir, 'p.db')))).isApproved('irc', 'nick!u@h'), true);
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

describe('pairing code expiry, and wall clock jumps', () => {
  const TTL = HOUR_MS;
  const pairing = (clock: JumpingClock, db = sqliteDatabase(openDatabase(':memory:'))) => new PairingStore(db, { codeTtlMs: TTL, clock });
  const codeOf = (decision: Awaited<ReturnType<typeof decideAccess>>): string => {
    assert.equal(decision.kind, 'pair');
    return (decision as { code: string }).code;
  };

  it('expires a code after an hour: it can no longer be approved and the sender gets a new one', async () => {
    const clock = jumpingClock({ realTime: false });
    const store = pairing(clock);
    const first = codeOf(await decideAccess(message(), { mentionOnly: true }, store));
    clock.advance(TTL - 1000);
    assert.equal((await store.pending()).length, 1, 'still waiting just before the hour');
    clock.advance(2000);
    assert.deepEqual(await store.pending(), []);
    assert.equal(await store.approve('telegram', first), undefined);
    const second = codeOf(await decideAccess(message(), { mentionOnly: true }, store));
    assert.notEqual(second, first);
    assert.equal(await store.approve('telegram', second), 'u42');
  });

  for (const jump of [HOUR_MS + 1000, DAY_MS]) {
    it(`a step forward of ${Math.round(jump / HOUR_MS)} h expires a waiting code early (the sender writes again for a new one)`, async () => {
      const clock = jumpingClock({ realTime: false });
      const store = pairing(clock);
      const code = codeOf(await decideAccess(message(), { mentionOnly: true }, store));
      clock.jump(jump);
      assert.equal(await store.approve('telegram', code), undefined);
      codeOf(await decideAccess(message(), { mentionOnly: true }, store));
    });
  }

  it('a step back of an hour does not keep a code alive: the monotonic hour still ends it', async () => {
    const clock = jumpingClock({ realTime: false });
    const store = pairing(clock);
    const code = codeOf(await decideAccess(message(), { mentionOnly: true }, store));
    clock.advance(30 * 60_000);
    clock.jump(-HOUR_MS); // the stamp now lies half an hour in the future
    assert.equal((await store.pending()).length, 1, 'still valid: it is only 30 minutes old');
    clock.advance(31 * 60_000); // wall age about +1 minute, but 61 minutes have passed
    assert.deepEqual(await store.pending(), []);
    assert.equal(await store.approve('telegram', code), undefined);
  });

  it('a step back of a day makes a code untrustworthy at once, also in another process (switchboard pairing)', async () => {
    const clock = jumpingClock({ realTime: false });
    const db = sqliteDatabase(openDatabase(':memory:'));
    const daemon = pairing(clock, db);
    const code = codeOf(await decideAccess(message(), { mentionOnly: true }, daemon));
    clock.jump(-DAY_MS);
    const cli = pairing(clock, db); // fresh process: no monotonic memory of the code
    assert.equal(await cli.approve('telegram', code), undefined);
    assert.deepEqual(await daemon.pending(), []);
    codeOf(await decideAccess(message(), { mentionOnly: true }, daemon));
  });

  it('another process that first sees a code after a small step back still bounds it by its own monotonic hour', async () => {
    const clock = jumpingClock({ realTime: false });
    const db = sqliteDatabase(openDatabase(':memory:'));
    codeOf(await decideAccess(message(), { mentionOnly: true }, pairing(clock, db)));
    clock.jump(-50 * 60_000);
    const later = pairing(clock, db);
    assert.equal((await later.pending()).length, 1);
    clock.advance(TTL + 1000);
    assert.equal(await later.expire(), 1);
  });

  it('an approved sender stays approved whatever the clock does', async () => {
    const clock = jumpingClock({ realTime: false });
    const store = pairing(clock);
    assert.equal(await store.approve('telegram', codeOf(await decideAccess(message(), { mentionOnly: true }, store))), 'u42');
    for (const step of [DAY_MS, -2 * DAY_MS]) {
      clock.jump(step);
      clock.advance(2 * TTL);
      assert.deepEqual(await decideAccess(message(), { mentionOnly: true }, store), { kind: 'allow' });
    }
  });
});
