import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import pino from 'pino';
import type { ChannelContext, Push } from '../../src/channel.ts';
import type { MatrixConfig } from './config.ts';
import type { MatrixApi } from './client.ts';
import { Intake, INVITES_REMEMBERED, type MatrixStats } from './intake.ts';
import { BoundedMap } from '../../src/bounded-map.ts';
import { Rooms } from './rooms.ts';
import type { SyncResponse } from './sync.ts';
import { testChannelState } from '../../test/support/channel-state.ts';

const botId = '@switchboard:example.org';
/** No message is pushed here: only invites arrive. */
const refuse: Push = () => Promise.reject(new Error('nothing should be pushed'));
const log = pino({ level: 'silent' });

function intake(joined: string[]): { intake: Intake; stats: MatrixStats } {
  const api = { userId: botId, token: 't', join: (room: string) => (joined.push(room), Promise.resolve(room)) } as unknown as MatrixApi;
  const config = { homeserver: 'https://m.example.org', user_id: botId, rooms: [], allow: ['@alice:example.org'], mention_only: true, stream: false, encryption: false } as MatrixConfig;
  const stats: MatrixStats = { encryptedEvents: 0, invitesAccepted: 0, invitesIgnored: 0 };
  const ctx = { name: 'matrix', log, assistantName: 'Switchboard', state: testChannelState('matrix'), stateDir: '' } as unknown as ChannelContext;
  const deps = { api, ctx, config, rooms: new Rooms(), log, stats, senders: new BoundedMap<string, boolean>(10), threadLatest: new BoundedMap<string, string>(10), displayName: () => undefined };
  return { intake: new Intake(deps), stats };
}

const invites = (from: string, rooms: string[]): SyncResponse => ({
  next_batch: 's',
  rooms: {
    invite: Object.fromEntries(
      rooms.map((room) => [room, { invite_state: { events: [{ type: 'm.room.member', sender: from, state_key: botId, content: { membership: 'invite' } }] } }]),
    ),
  },
});

describe('matrix intake: invites', () => {
  it('remembers at most INVITES_REMEMBERED handled invites, however many strangers send', async () => {
    const joined: string[] = [];
    const { intake: handler, stats } = intake(joined);
    const rooms = Array.from({ length: 5 * INVITES_REMEMBERED }, (_, i) => `!spam${i}:example.org`);
    await handler.handle(invites('@mallory:example.org', rooms), { initial: false, since: 'a' }, refuse);
    assert.equal(stats.invitesIgnored, rooms.length);
    assert.equal(handler.invitesRemembered, INVITES_REMEMBERED);
    // The newest are the ones remembered: shown again, they are not looked at again.
    await handler.handle(invites('@mallory:example.org', rooms.slice(-10)), { initial: false, since: 'b' }, refuse);
    assert.equal(stats.invitesIgnored, rooms.length);
    await handler.handle(invites('@alice:example.org', ['!ok:example.org']), { initial: false, since: 'c' }, refuse);
    assert.deepEqual([joined, stats.invitesAccepted, handler.invitesRemembered], [['!ok:example.org'], 1, INVITES_REMEMBERED]);
  });
});
