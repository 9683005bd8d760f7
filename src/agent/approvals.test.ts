import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { openDatabase } from '../store/db.ts';
import { sqliteDatabase } from '../store/sqlite-sql.ts';
import { DAY_MS, HOUR_MS, jumpingClock, type JumpingClock } from '../../test/support/clock.ts';
import { ApprovalStore, type PendingApproval } from './approvals.ts';

const question: PendingApproval = {
  conversation: 'telegram:bot:42',
  originTurn: 7,
  channel: 'telegram',
  senderId: 'ada',
  paused: { turn: [{ role: 'user', content: 'pull the repo' }], calls: [], iteration: 0, xml: false },
};

async function setup(clock: JumpingClock = jumpingClock({ realTime: false })) {
  const db = sqliteDatabase(openDatabase(':memory:'));
  const store = new ApprovalStore(db, { clock });
  await store.save(question);
  return { db, store, clock };
}

describe('approval questions expire, whatever the wall clock does', () => {
  it('can be answered for a day, then are dropped', async () => {
    const { store, clock } = await setup();
    clock.advance(23 * HOUR_MS);
    assert.equal((await store.pending(question.conversation))?.originTurn, 7);
    clock.advance(2 * HOUR_MS);
    assert.equal(await store.pending(question.conversation), undefined);
    clock.jump(-2 * HOUR_MS);
    assert.equal(await store.pending(question.conversation), undefined, 'dropped for good, not only hidden');
  });

  for (const jump of [DAY_MS + HOUR_MS, 7 * DAY_MS]) {
    it(`a step forward of ${jump / HOUR_MS} h drops an open question (a "yes" afterwards runs nothing)`, async () => {
      const { store, clock } = await setup();
      clock.jump(jump);
      assert.equal(await store.pending(question.conversation), undefined);
    });
  }

  it('a step back of an hour does not stretch the day: the monotonic day still ends it', async () => {
    const { store, clock } = await setup();
    clock.advance(HOUR_MS);
    clock.jump(-HOUR_MS);
    clock.advance(22 * HOUR_MS);
    assert.ok(await store.pending(question.conversation), 'a day has not passed yet');
    clock.advance(HOUR_MS + 1000); // 24 h have passed; by the wall clock only 23
    assert.equal(await store.pending(question.conversation), undefined);
  });

  it('a step back of two days makes a question untrustworthy at once, also after a restart', async () => {
    const { db, clock } = await setup();
    clock.jump(-2 * DAY_MS);
    assert.equal(await new ApprovalStore(db, { clock }).pending(question.conversation), undefined);
  });

  it('after a restart, a question is bounded by the new process\'s own monotonic day', async () => {
    const { db, clock } = await setup();
    clock.jump(-20 * HOUR_MS);
    const restarted = new ApprovalStore(db, { clock });
    assert.ok(await restarted.pending(question.conversation));
    clock.advance(DAY_MS + 1000);
    assert.equal(await restarted.pending(question.conversation), undefined);
  });

  it('a new question replaces the old one with a fresh day', async () => {
    const { store, clock } = await setup();
    clock.advance(20 * HOUR_MS);
    await store.save({ ...question, originTurn: 8 });
    clock.advance(20 * HOUR_MS);
    assert.equal((await store.pending(question.conversation))?.originTurn, 8);
  });
});
