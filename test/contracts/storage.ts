/**
 * The storage contract: what every store promises, run against each engine (SQLite and
 * PostgreSQL, see src/store/store.contract.test.ts) so neither drifts. `open` gives a fresh,
 * empty, migrated database per test; `openTwo` two handles on one fresh database, as two nodes
 * (or a node and its successor) have.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { InboundMessage } from '../../src/channel.ts';
import type { Database } from '../../src/store/sql.ts';
import { Inbox } from '../../src/store/inbox.ts';
import { Outbox } from '../../src/store/outbox.ts';
import { History } from '../../src/store/history.ts';
import { ConversationSettings, Drafts } from '../../src/store/settings.ts';
import { PairingStore } from '../../src/policy/access.ts';
import { ApprovalStore, type PendingApproval } from '../../src/agent/approvals.ts';
import { ScheduleStore } from '../../src/schedule/store.ts';
import { channelState } from '../../src/store/channel-state.ts';
import { jumpingClock } from '../support/clock.ts';

const message = (id: string, chat = 'c1', channel = 'test'): InboundMessage => ({
  channel,
  account: 'bot',
  chat,
  id,
  sender: { id: 'u1' },
  text: `text ${id}`,
  timestamp: 1,
});

const question = (conversation: string, originTurn = 7): PendingApproval => ({
  conversation,
  originTurn,
  channel: 'telegram',
  senderId: 'ada',
  paused: { turn: [{ role: 'user', content: 'pull the repo' }], calls: [], iteration: 0, xml: false },
});

export function storageContract(engine: string, open: () => Promise<Database>, openTwo: () => Promise<readonly [Database, Database]>): void {
  const withDb = (name: string, body: (db: Database) => Promise<void>): void => {
    it(name, async () => {
      const db = await open();
      try {
        await body(db);
      } finally {
        await db.close();
      }
    });
  };

  describe(`storage contract: ${engine}`, () => {
    describe('inbox', () => {
      withDb('stores a message once and recognises a redelivery, per channel', async (db) => {
        const inbox = new Inbox(db);
        const first = await inbox.accept(message('m1'));
        assert.ok(first);
        assert.equal(first.conversation, 'test:bot:c1');
        assert.equal(typeof first.seq, 'number');
        assert.equal(await inbox.accept(message('m1')), undefined, 'same channel + platform id is a duplicate');
        const other = await inbox.accept(message('m1', 'c1', 'other'));
        assert.ok(other, 'another channel may reuse the id');
        assert.deepEqual(await inbox.queued(), [
          { seq: first.seq, conversation: 'test:bot:c1' },
          { seq: other.seq, conversation: 'other:bot:c1' },
        ]);
        assert.equal(await inbox.queuedCount(), 2);
      });

      withDb('keeps a message queued until it is finished, and finishes it only once', async (db) => {
        const inbox = new Inbox(db);
        const entry = (await inbox.accept(message('m1')))!;
        assert.deepEqual((await inbox.queuedEntry(entry.seq))?.message, message('m1'));
        assert.equal(await inbox.markDone(entry.seq), true);
        assert.equal(await inbox.markDone(entry.seq), false);
        assert.equal(await inbox.markFailed(entry.seq, 'late'), false);
        assert.equal(await inbox.queuedEntry(entry.seq), undefined);
        assert.deepEqual(await inbox.queued(), []);
        assert.equal(await inbox.accept(message('m1')), undefined, 'still a duplicate after it was answered');
      });

      withDb('gives the unaddressed messages since the last turn as context, oldest first', async (db) => {
        const inbox = new Inbox(db);
        const answered = (await inbox.accept(message('a')))!;
        await inbox.markDone(answered.seq);
        const said = [];
        for (const id of ['b', 'c']) {
          const entry = (await inbox.accept(message(id)))!;
          await inbox.markIgnored(entry.seq, 'not addressed');
          said.push(id);
        }
        const denied = (await inbox.accept(message('d')))!;
        await inbox.markIgnored(denied.seq, 'not allowed');
        const asked = (await inbox.accept(message('e')))!;
        const context = await inbox.contextBefore(asked.seq, 'test:bot:c1', 'test:bot:c1');
        assert.deepEqual(
          context.map((m) => m.id),
          said,
        );
        assert.deepEqual(await inbox.contextBefore(asked.seq, 'test:bot:c1', 'test:bot:c1', 1).then((m) => m.map((x) => x.id)), ['c']);
      });

      withDb('prunes finished messages older than the window, never queued ones', async (db) => {
        const inbox = new Inbox(db);
        const done = (await inbox.accept(message('old')))!;
        await inbox.markDone(done.seq, 1000);
        await inbox.accept(message('waiting'));
        assert.equal(await inbox.prune(2000), 1);
        assert.equal((await inbox.queued()).length, 1);
      });

      withDb('accepts each of many concurrent deliveries of one message exactly once', async (db) => {
        const inbox = new Inbox(db);
        const results = await Promise.all(Array.from({ length: 20 }, () => inbox.accept(message('same'))));
        assert.equal(results.filter((entry) => entry !== undefined).length, 1);
      });
    });

    describe('outbox', () => {
      withDb('lists pending replies per conversation in order, counts and forgets sent ones', async (db) => {
        const outbox = new Outbox(db);
        const a = await outbox.add({ channel: 'test', account: 'bot', chat: 'c1', text: 'one' }, 1);
        await outbox.add({ channel: 'test', account: 'bot', chat: 'c2', text: 'other' }, 2);
        const b = await outbox.add({ channel: 'test', account: 'bot', chat: 'c1', text: 'two', files: [{ path: '/w/a.txt', name: 'a.txt' }] }, null);
        assert.deepEqual(
          (await outbox.pending('test:bot:c1')).map((e) => e.message.text),
          ['one', 'two'],
        );
        assert.deepEqual((await outbox.pending('test:bot:c1'))[1]!.message.files, [{ path: '/w/a.txt', name: 'a.txt' }]);
        assert.deepEqual(await outbox.pendingConversations(), [
          { conversation: 'test:bot:c1', channel: 'test', first: a },
          { conversation: 'test:bot:c2', channel: 'test', first: a + 1 },
        ]);
        await outbox.markAttempt(a, 'timeout');
        await outbox.markProgress(a, 2);
        const [entry] = await outbox.pending('test:bot:c1');
        assert.equal(entry!.attempts, 1);
        assert.equal(entry!.progress, 2);
        await outbox.markSent(a);
        await outbox.markDead(b, 'blocked');
        assert.equal(await outbox.pendingCount(), 1);
        assert.deepEqual(await outbox.pending('test:bot:c1'), []);
        assert.equal(await outbox.prune(Date.now() + 1000), 2);
      });
    });

    describe('history', () => {
      withDb('returns the messages of the last N turns in order, and forgets a conversation', async (db) => {
        const history = new History(db);
        for (let turn = 1; turn <= 4; turn++) {
          await history.append('conv', turn, [
            { role: 'user', content: `q${turn}` },
            { role: 'assistant', content: `a${turn}` },
          ]);
        }
        await history.append('other', 5, [{ role: 'user', content: 'elsewhere' }]);
        assert.deepEqual(
          (await history.recent('conv', 2)).map((m) => m.content),
          ['q3', 'a3', 'q4', 'a4'],
        );
        assert.equal((await history.recent('conv', 50)).length, 8);
        assert.deepEqual(await history.recent('conv', 0), []);
        assert.deepEqual(await history.recent('nobody', 5), []);
        assert.equal(await history.clear('conv'), 8);
        assert.equal((await history.recent('other', 1)).length, 1);
      });

      // Issue 23 (held): every value reaches the engine as a parameter, never spliced into SQL.
      withDb('stores hostile strings verbatim: quotes, SQL, placeholders, LIKE wildcards, backslashes, emoji', async (db) => {
        const hostile = ["Robert'); DROP TABLE inbox; --", 'x" OR "1"="1', '$1 $2 ? :name @p1', '100% _done_ \\ \\x00 \\\'', 'emoji 👩‍💻 and \u202e rtl', "E'\\n' || chr(10)"];
        const history = new History(db);
        const inbox = new Inbox(db);
        const state = channelState(db, 'webhook');
        for (const [i, text] of hostile.entries()) {
          await history.append(text, 1, [{ role: 'user', content: text }]);
          assert.deepEqual((await history.recent(text, 1)).map((m) => m.content), [text]);
          const stored = await inbox.accept({ ...message(text, text), text });
          assert.ok(stored, text);
          assert.deepEqual((await inbox.queuedEntry(stored.seq))?.message, { ...message(text, text), text });
          await state.put(`k:${text}`, text);
          assert.equal(await state.get(`k:${text}`), text);
          assert.equal((await state.list(`k:${text.slice(0, 3)}`)).length >= 1, true, `prefix list of ${i}`);
        }
        assert.equal((await state.list('k:100%')).length, 1, 'a % in a prefix is not a wildcard');
        assert.equal((await state.list('k:_')).length, 0, 'an _ in a prefix is not a wildcard');
        assert.equal(await inbox.queuedCount(), hostile.length, 'the inbox table is still there, with every row');
      });
    });

    describe('settings and drafts', () => {
      withDb('remembers a conversation\'s model and a turn\'s draft, and forgets them', async (db) => {
        const settings = new ConversationSettings(db);
        assert.equal(await settings.model('c'), undefined);
        await settings.setModel('c', 'big');
        await settings.setModel('c', 'small');
        assert.equal(await settings.model('c'), 'small');
        await settings.setModel('c', undefined);
        assert.equal(await settings.model('c'), undefined);
        const drafts = new Drafts(db);
        await drafts.set(9, 'm1');
        await drafts.set(9, 'm2');
        assert.equal(await drafts.get(9), 'm2');
        await drafts.delete(9);
        assert.equal(await drafts.get(9), undefined);
      });
    });

    describe('transactions', () => {
      withDb('commit every write together, or none when the work throws', async (db) => {
        const inbox = new Inbox(db);
        const outbox = new Outbox(db);
        const entry = (await inbox.accept(message('m1')))!;
        await assert.rejects(
          db.transaction(async (tx) => {
            await outbox.in(tx).add({ channel: 'test', account: 'bot', chat: 'c1', text: 'reply' }, entry.seq);
            await inbox.in(tx).markDone(entry.seq);
            throw new Error('crash before commit');
          }),
          /crash before commit/,
        );
        assert.equal(await outbox.pendingCount(), 0, 'the reply rolled back');
        assert.ok(await inbox.queuedEntry(entry.seq), 'the message still waits');
        const done = await db.transaction(async (tx) => {
          await outbox.in(tx).add({ channel: 'test', account: 'bot', chat: 'c1', text: 'reply' }, entry.seq);
          return inbox.in(tx).markDone(entry.seq);
        });
        assert.equal(done, true);
        assert.equal(await outbox.pendingCount(), 1);
        assert.equal(await inbox.queuedEntry(entry.seq), undefined);
      });

      withDb('keep concurrent transactions apart: each one commits whole', async (db) => {
        const history = new History(db);
        await Promise.all(
          Array.from({ length: 10 }, (_, turn) =>
            db.transaction(async (tx) => {
              await history.in(tx).append('c', turn, [{ role: 'user', content: `q${turn}` }]);
              await new Promise((resolve) => setImmediate(resolve));
              await history.in(tx).append('c', turn, [{ role: 'assistant', content: `a${turn}` }]);
              if (turn % 3 === 0) throw new Error('rolled back');
            }).catch(() => undefined),
          ),
        );
        const kept = (await history.recent('c', 100)).map((m) => m.content);
        const turns = [1, 2, 4, 5, 7, 8];
        assert.deepEqual(kept, turns.flatMap((turn) => [`q${turn}`, `a${turn}`]));
      });
    });

    describe('pairing', () => {
      withDb('draws one code per sender, approves it once, and keeps approvals', async (db) => {
        const pairing = new PairingStore(db);
        const first = await pairing.requestCode('telegram', 'u42');
        assert.equal(first.created, true);
        assert.match(first.code, /^[A-HJ-KM-NP-Z2-9]{6}$/);
        assert.deepEqual(await pairing.requestCode('telegram', 'u42'), { code: first.code, created: false });
        assert.deepEqual(
          (await pairing.pending()).map((p) => [p.channel, p.senderId, p.code]),
          [['telegram', 'u42', first.code]],
        );
        assert.equal(await pairing.approve('discord', first.code), undefined, 'a code belongs to its channel');
        assert.equal(await pairing.isApproved('telegram', 'u42'), false);
        assert.equal(await pairing.approve('telegram', ` ${first.code.toLowerCase()} `), 'u42');
        assert.equal(await pairing.approve('telegram', first.code), undefined, 'approved once');
        assert.equal(await pairing.isApproved('telegram', 'u42'), true);
        assert.deepEqual(await pairing.pending(), []);
      });

      withDb('expires codes after their time', async (db) => {
        const clock = jumpingClock({ realTime: false });
        const pairing = new PairingStore(db, { codeTtlMs: 1000, clock });
        await pairing.requestCode('irc', 'nick');
        clock.advance(1500);
        assert.equal(await pairing.expire(), 1);
        assert.deepEqual(await pairing.pending(), []);
      });

      withDb('gives concurrent requests of one sender the same code', async (db) => {
        const pairing = new PairingStore(db);
        const codes = await Promise.all(Array.from({ length: 8 }, () => new PairingStore(db).requestCode('telegram', 'u7')));
        assert.equal(new Set(codes.map((c) => c.code)).size, 1);
        assert.equal(codes.filter((c) => c.created).length, 1);
        assert.equal((await pairing.pending()).length, 1);
      });
    });

    describe('approvals', () => {
      withDb('keeps one open question per conversation, replaced by a newer one, and "always" answers', async (db) => {
        const approvals = new ApprovalStore(db);
        await approvals.save(question('c1', 7));
        await approvals.save(question('c1', 8));
        assert.equal((await approvals.pending('c1'))?.originTurn, 8);
        assert.deepEqual((await approvals.pending('c1'))?.paused, question('c1').paused);
        await db.transaction((tx) => approvals.in(tx).clear('c1'));
        assert.equal(await approvals.pending('c1'), undefined);
        assert.equal(await approvals.isAlways('telegram', 'ada', 'shell: git pull'), false);
        await approvals.addAlways('telegram', 'ada', ['shell: git pull', 'shell: git pull']);
        assert.equal(await approvals.isAlways('telegram', 'ada', 'shell: git pull'), true);
        assert.equal(await approvals.isAlways('telegram', 'bob', 'shell: git pull'), false);
      });
    });

    describe('channel state', () => {
      withDb('keeps each channel\'s keys apart; puts, gets, deletes and lists by prefix in write order', async (db) => {
        const matrix = channelState(db, 'matrix');
        const other = channelState(db, 'matrix2');
        assert.equal(await matrix.get('sync'), undefined);
        await matrix.put('sync', '{"next_batch":"s1"}');
        await other.put('sync', 'theirs');
        assert.equal(await matrix.get('sync'), '{"next_batch":"s1"}');
        assert.equal(await other.get('sync'), 'theirs');
        await matrix.put('r:<b@x>', 'b');
        await matrix.put('r:<a@x>', 'a');
        await matrix.put('R:<upper@x>', 'not the same prefix');
        await matrix.put('r:<b@x>', 'b2'); // keeps its place
        assert.deepEqual(await matrix.list('r:'), [
          { key: 'r:<b@x>', value: 'b2' },
          { key: 'r:<a@x>', value: 'a' },
        ]);
        await matrix.put('r:<b@x>', 'b3', { renew: true });
        assert.deepEqual(
          (await matrix.list('r:')).map((entry) => entry.key),
          ['r:<a@x>', 'r:<b@x>'],
        );
        assert.equal((await matrix.list('')).length, 4);
        assert.equal(await matrix.delete(['r:<a@x>', 'nothing']), 1);
        assert.deepEqual(await matrix.list('r:'), [{ key: 'r:<b@x>', value: 'b3' }]);
        assert.equal(await other.get('r:<b@x>'), undefined);
        await assert.rejects(matrix.put('', 'x'), RangeError);
        const unicode = 'ключ:é😀';
        await matrix.put(`${unicode}1`, 'v');
        assert.deepEqual(await matrix.list(unicode), [{ key: `${unicode}1`, value: 'v' }]);
      });

      withDb('writes puts and deletes together, or none of them', async (db) => {
        const state = channelState(db, 'matrix');
        await state.put('e2ee:a', '1');
        await state.write({ put: [{ key: 'e2ee:b', value: '2' }, { key: 'e2ee:a', value: '1b' }], delete: ['e2ee:c'] });
        assert.deepEqual(await state.list('e2ee:'), [
          { key: 'e2ee:a', value: '1b' },
          { key: 'e2ee:b', value: '2' },
        ]);
        await state.write({ put: [{ key: 'e2ee:c', value: '3' }], delete: ['e2ee:a'] });
        assert.deepEqual((await state.list('e2ee:')).map((entry) => entry.key), ['e2ee:b', 'e2ee:c']);
        // One bad key fails the whole write: nothing of it lands.
        await assert.rejects(state.write({ put: [{ key: 'e2ee:d', value: '4' }, { key: '', value: 'x' }], delete: ['e2ee:b'] }), RangeError);
        assert.deepEqual((await state.list('e2ee:')).map((entry) => entry.key), ['e2ee:b', 'e2ee:c']);
        await state.write({});
      });

      withDb('prunes all but the newest entries of a prefix, leaving other prefixes and channels alone', async (db) => {
        const email = channelState(db, 'email');
        const other = channelState(db, 'email-work');
        for (let i = 1; i <= 6; i++) await email.put(`s:${i}`, String(i));
        await email.put('r:1', 'kept');
        await other.put('s:0', 'theirs');
        assert.equal(await email.prune('s:', { keep: 10 }), 0);
        assert.equal(await email.prune('s:', { keep: 4 }), 2);
        assert.deepEqual(
          (await email.list('s:')).map((entry) => entry.key),
          ['s:3', 's:4', 's:5', 's:6'],
        );
        assert.equal(await email.get('r:1'), 'kept');
        assert.equal(await other.get('s:0'), 'theirs');
        assert.equal(await email.prune('s:', { keep: 0 }), 4);
        assert.deepEqual(await email.list('s:'), []);
      });

      withDb('prunes by age and by size, keeping the newest entry however large', async (db) => {
        let now = 1000;
        const hook = channelState(db, 'webhook', () => now);
        await hook.put('r:old', 'x'.repeat(10));
        now = 2000;
        await hook.put('r:mid', 'é'.repeat(10)); // 20 bytes
        await hook.put('r:old', 'updated', { renew: false }); // keeps its place and creation time
        now = 3000;
        await hook.put('r:new', 'y'.repeat(10));
        assert.equal(await hook.prune('r:', { createdBefore: 2000 }), 1);
        assert.deepEqual(
          (await hook.list('r:')).map((entry) => entry.key),
          ['r:mid', 'r:new'],
        );
        assert.equal(await hook.prune('r:', { maxBytes: 30 }), 0);
        assert.equal(await hook.prune('r:', { maxBytes: 29 }), 1, 'the 20 bytes of é·10 count as bytes');
        await hook.put('r:huge', 'z'.repeat(100));
        assert.equal(await hook.prune('r:', { maxBytes: 50, keep: 5 }), 1);
        assert.deepEqual(
          (await hook.list('r:')).map((entry) => entry.key),
          ['r:huge'],
          'the newest stays alone when it is larger than the budget',
        );
        await assert.rejects(hook.prune('r:', { keep: -1 }), TypeError);
      });

      it('is where a second node finds what the first left', async () => {
        const [first, second] = await openTwo();
        try {
          const owner = channelState(first, 'discord');
          await owner.put('positions', '{"123":"456"}');
          for (let i = 1; i <= 3; i++) await owner.put(`result:${i}`, `reply ${i}`);
          const next = channelState(second, 'discord');
          assert.equal(await next.get('positions'), '{"123":"456"}');
          assert.deepEqual(
            (await next.list('result:')).map((entry) => entry.value),
            ['reply 1', 'reply 2', 'reply 3'],
          );
          // the new owner writes on in the same order, and the old one (were it still around) sees it
          await next.put('result:4', 'reply 4');
          assert.equal(await next.prune('result:', { keep: 2 }), 2);
          assert.deepEqual(
            (await owner.list('result:')).map((entry) => entry.key),
            ['result:3', 'result:4'],
          );
        } finally {
          await Promise.all([first.close(), second.close()]);
        }
      });
    });

    describe('schedules', () => {
      withDb('lists, counts, cancels and hands out due tasks; a run is advanced once', async (db) => {
        const store = new ScheduleStore(db);
        const origin = { channel: 'telegram', account: 'bot', chat: '42', sender: { id: 'ada' } };
        const id = await store.add({ conversation: 'c', origin, prompt: 'stretch', nextRun: 1000, cron: '0 * * * *', timezone: 'UTC' });
        const other = await store.add({ conversation: 'c', origin, prompt: 'once', nextRun: 5000 });
        assert.equal(await store.activeCount('c'), 2);
        assert.deepEqual(
          (await store.list('c')).map((t) => t.id),
          [id, other],
        );
        const [due] = await store.due(2000);
        assert.deepEqual(due, { id, conversation: 'c', origin, prompt: 'stretch', nextRun: 1000, cron: '0 * * * *', timezone: 'UTC' });
        const advanced = await Promise.all([store.advance(due!, 3_600_000), store.advance(due!, 3_600_000)]);
        assert.deepEqual(advanced.sort(), [false, true], 'two nodes firing the same run: one moves it');
        assert.deepEqual(await store.due(2000), []);
        assert.equal(await store.cancel('c', other), true);
        assert.equal(await store.cancel('c', other), false);
        assert.equal(await store.cancel('elsewhere', id), false);
        assert.equal(await store.activeCount('c'), 1);
      });
    });
  });
}
