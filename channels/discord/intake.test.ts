import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { DiscordAPIError, type REST } from 'discord.js';
import { pino } from 'pino';
import type { AttachmentStore, InboundMessage, Push } from '../../src/channel.ts';
import type { BotIdentity, RawMessage } from './inbound.ts';
import { snowflakeAt } from './inbound.ts';
import { Intake } from './intake.ts';
import { Positions } from './positions.ts';
import { channelState, type ChannelState } from '../../src/store/channel-state.ts';
import { sqliteFile, testChannelState } from '../../test/support/channel-state.ts';

const log = pino({ level: 'silent' });
const dirs: string[] = [];
const stateDir = (): string => {
  const dir = mkdtempSync(join(tmpdir(), 'sb-discord-state-'));
  dirs.push(dir);
  return dir;
};
after(() => dirs.forEach((dir) => rmSync(dir, { recursive: true, force: true })));

const bot: BotIdentity = { id: '900', names: ['testbot'] };
const base = BigInt(snowflakeAt(Date.now() - 60_000));
const id = (n: number): string => (base + BigInt(n)).toString();
const dmMessage = (n: number, content = `m${n}`): RawMessage => ({ id: id(n), channel_id: '400', author: { id: '101', username: 'alice' }, content, type: 0, channel_type: 1 });
const noAttachments: AttachmentStore = { maxBytes: 0, save: async () => assert.fail('no attachments here') };

/** A REST stand-in answering GET /channels/{id}/messages from `history` (newest first, as Discord does). */
function fakeRest(history: Map<string, RawMessage[]>, calls: string[] = []): REST {
  return {
    get: async (route: string, options: { query: URLSearchParams }) => {
      calls.push(`${route}?${options.query.toString()}`);
      const channel = /^\/channels\/(\d+)\/messages$/.exec(route)?.[1];
      if (!channel || !history.has(channel)) throw new DiscordAPIError({ message: 'Unknown Channel', code: 10003 }, 10003, 404, 'GET', route, { files: undefined, body: undefined });
      const after = BigInt(options.query.get('after') ?? '0');
      const limit = Number(options.query.get('limit'));
      return history.get(channel)!.filter((m) => BigInt(m.id) > after).slice(0, limit).reverse();
    },
  } as unknown as REST;
}

const intake = (rest: REST, state?: ChannelState, dir?: string) =>
  new Intake({
    name: 'discord',
    log,
    attachments: noAttachments,
    rest,
    ...(state ? { state } : {}),
    ...(dir ? { stateDir: dir } : {}),
    channelInfo: async () => ({ type: 0 }),
    sentByBot: () => false,
  });

const recorder = (): { push: Push; pushed: InboundMessage[] } => {
  const pushed: InboundMessage[] = [];
  return {
    pushed,
    push: async (message) => {
      pushed.push(message);
      return 'accepted';
    },
  };
};

describe('discord read positions', () => {
  it('saves a new channel at once, advances only forward, and reloads what was saved', async () => {
    const state = testChannelState('discord');
    const positions = new Positions({ state, log });
    positions.track('400', id(5));
    await positions.flush(); // the save track started
    const saved = JSON.parse((await state.get('positions'))!) as { positions: Record<string, { after: string }> };
    assert.equal(saved.positions['400']!.after, id(4), 'a new channel is remembered just before its first message');
    positions.advance('400', id(7));
    positions.advance('400', id(6));
    positions.get('400')!.info = { type: 11, parentId: '300' };
    await positions.flush();
    const reloaded = new Positions({ state, log });
    assert.equal(reloaded.size, 0, 'nothing is read at construction');
    await reloaded.load();
    assert.deepEqual(reloaded.entries(), [['400', { after: id(7), info: { type: 11, parentId: '300' } }]]);
  });

  it('starts empty from nothing saved or an unreadable value', async () => {
    const state = testChannelState('discord');
    const positions = new Positions({ state, log });
    await positions.load();
    assert.equal(positions.size, 0);
    await state.put('positions', '{not json');
    await positions.load();
    assert.equal(positions.size, 0);
  });

  it('imports an earlier version\'s positions.json once, renaming it, unless the store already has newer ones', async () => {
    const dir = stateDir();
    writeFileSync(join(dir, 'positions.json'), JSON.stringify({ version: 1, positions: { '400': { after: id(3), type: 1 } } }));
    const state = testChannelState('discord');
    const positions = new Positions({ state, log, legacyDir: dir });
    await positions.load();
    assert.deepEqual(positions.entries(), [['400', { after: id(3), info: { type: 1 } }]]);
    assert.equal(existsSync(join(dir, 'positions.json')), false);
    assert.ok(readFileSync(join(dir, 'positions.json.imported'), 'utf8').includes(id(3)));
    assert.ok(await state.get('positions'));
    // a second node's data_dir with an old file, while the database has newer positions
    const otherDir = stateDir();
    writeFileSync(join(otherDir, 'positions.json'), JSON.stringify({ version: 1, positions: { '400': { after: id(1) } } }));
    const other = new Positions({ state, log, legacyDir: otherDir });
    await other.load();
    assert.equal(other.get('400')!.after, id(3), 'the newer positions in the database win');
    assert.equal(existsSync(join(otherDir, 'positions.json.imported')), true);
  });
});

describe('discord intake', () => {
  it('pushes in order and moves the position only past what was pushed', async () => {
    const history = new Map([['400', [dmMessage(1), dmMessage(2), dmMessage(3)]]]);
    const calls: string[] = [];
    const subject = intake(fakeRest(history, calls));
    const { push, pushed } = recorder();
    await subject.process(dmMessage(1), bot, push, true);
    await assert.rejects(subject.process(dmMessage(2), bot, async () => Promise.reject(new Error('shutting down')), true));
    // a new session: read again from the position, which is still at message 1
    const read = await subject.backfill(bot, push, new AbortController().signal);
    assert.equal(read, 2);
    assert.deepEqual(
      pushed.map((m) => m.text),
      ['m1', 'm2', 'm3'],
    );
    assert.deepEqual(calls, [`/channels/400/messages?after=${id(1)}&limit=100`]);
    assert.equal(await subject.backfill(bot, push, new AbortController().signal), 0, 'nothing new the second time');
    assert.equal(pushed.length, 3);
  });

  it('never pushes a message twice, whether replayed by the gateway or read back over REST', async () => {
    const history = new Map([['400', [dmMessage(1), dmMessage(2)]]]);
    const subject = intake(fakeRest(history));
    const { push, pushed } = recorder();
    await subject.process(dmMessage(1), bot, push, true);
    await subject.process(dmMessage(2), bot, push, true);
    await subject.process(dmMessage(2), bot, push, true);
    await subject.backfill(bot, push, new AbortController().signal);
    assert.deepEqual(
      pushed.map((m) => m.id),
      [id(1), id(2)],
    );
  });

  it('catches up after a restart from the saved positions, and forgets a channel that is gone', async () => {
    const state = testChannelState('discord');
    const history = new Map([['400', [dmMessage(1), dmMessage(2, 'sent while down')]]]);
    const first = intake(fakeRest(history), state);
    await first.process(dmMessage(1), bot, recorder().push, true);
    await first.flush();
    const restarted = intake(fakeRest(history), state);
    await restarted.load();
    const { push, pushed } = recorder();
    await restarted.backfill(bot, push, new AbortController().signal);
    assert.deepEqual(
      pushed.map((m) => [m.text, m.direct]),
      [['sent while down', true]],
    );
    history.delete('400');
    await restarted.backfill(bot, push, new AbortController().signal);
    assert.equal(restarted.tracked, 0);
  });

  it('a new owner on another node catches up from the positions the last owner left in the database', async () => {
    const path = join(stateDir(), 'switchboard.db');
    const [nodeA, nodeB] = [sqliteFile(path), sqliteFile(path)];
    try {
      const history = new Map([['400', [dmMessage(1), dmMessage(2), dmMessage(3, 'sent between owners')]]]);
      const owner = intake(fakeRest(history), channelState(nodeA, 'discord'));
      await owner.load();
      const run = owner.start(recorder().push, new AbortController().signal);
      run.identify(bot);
      run.received(dmMessage(1));
      run.received(dmMessage(2));
      await run.idle();
      await run.stop(); // its listen ends (the lease moved); positions saved
      const next = intake(fakeRest(history), channelState(nodeB, 'discord'));
      await next.load();
      const { push, pushed } = recorder();
      await next.backfill(bot, push, new AbortController().signal);
      assert.deepEqual(
        pushed.map((m) => m.text),
        ['sent between owners'],
      );
    } finally {
      await Promise.all([nodeA.close(), nodeB.close()]);
    }
  });

  it('ends a run whose processing failed, but not one that is stopping', async () => {
    const subject = intake(fakeRest(new Map()));
    const failing = subject.start(async () => Promise.reject(new Error('database is locked')), new AbortController().signal);
    failing.identify(bot);
    failing.received(dmMessage(1));
    await assert.rejects(failing.failed, /database is locked/);

    const abort = new AbortController();
    const stopping = subject.start(async () => {
      abort.abort();
      throw new Error('Switchboard is shutting down');
    }, abort.signal);
    stopping.identify(bot);
    stopping.received(dmMessage(2));
    await stopping.idle();
    const outcome = await Promise.race([stopping.failed.then(() => 'failed', () => 'failed'), new Promise((resolve) => setTimeout(() => resolve('quiet'), 50))]);
    assert.equal(outcome, 'quiet');
  });

  it('holds at most maxWaiting gateway messages while push waits, then ends the run so a new session catches up over REST', async () => {
    const subject = intake(fakeRest(new Map()), testChannelState('discord'));
    let release!: () => void;
    const blocked = new Promise<void>((resolve) => (release = resolve));
    const run = subject.start(async () => (await blocked, 'accepted'), new AbortController().signal, 50);
    run.identify(bot);
    for (let n = 1; n <= 5000; n++) run.received({ ...dmMessage(n), channel_id: String(400 + (n % 7)) });
    assert.equal(run.waiting, 50);
    await assert.rejects(run.failed, /50 Discord messages are waiting for the runtime; starting a new session/);
    release();
    await run.idle();
    assert.equal(run.waiting, 0);
    // Every channel seen, also in the messages not queued, has a position from which to catch up.
    assert.equal(subject.tracked, 7);
  });
});
