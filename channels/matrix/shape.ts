/**
 * A /sync response as the homeserver sent it → the parts of it this channel reads, each of
 * the right type. Events relayed from other servers are not trusted: an event, room or list
 * of the wrong shape is left out and named in `dropped` (the intake logs them), so one bad
 * event cannot stop the response — which, failing, would be fetched again and fail for ever.
 */
import { isRecord } from '../../src/inbound/malformed.ts';
import type { RoomEvent } from './inbound.ts';
import type { InvitedRoom, JoinedRoom, SyncResponse } from './sync.ts';

export interface CheckedSync {
  readonly response: SyncResponse;
  /** What was left out and why, e.g. "rooms.join.!r:x.timeline.events.3: content is not an object". */
  readonly dropped: readonly string[];
}

const list = (value: unknown): unknown[] => (Array.isArray(value) ? value : []);
const table = (value: unknown): Record<string, unknown> => (isRecord(value) ? value : {});

/** Why `value` is not a room event this channel can read, or undefined when it is one. */
export function eventProblem(value: unknown, timeline: boolean): string | undefined {
  if (!isRecord(value)) return 'not an object';
  for (const key of ['type', 'sender'] as const) if (typeof value[key] !== 'string') return `${key} is not a string`;
  if (!isRecord(value.content)) return 'content is not an object';
  if (value.state_key !== undefined && typeof value.state_key !== 'string') return 'state_key is not a string';
  if (timeline && typeof value.event_id !== 'string') return 'event_id is not a string';
  if (timeline && (typeof value.origin_server_ts !== 'number' || !Number.isFinite(value.origin_server_ts))) return 'origin_server_ts is not a number';
  return undefined;
}

/** The response with every malformed part left out (see the module comment). */
export function checkSync(raw: unknown): CheckedSync {
  const dropped: string[] = [];
  const events = (value: unknown, where: string, timeline: boolean): RoomEvent[] =>
    list(value).filter((event, i): event is RoomEvent => {
      const problem = eventProblem(event, timeline);
      if (problem) dropped.push(`${where}.${i}: ${problem}`);
      return problem === undefined;
    });
  const body = table(raw);
  const rooms = table(body.rooms);
  const join: Record<string, JoinedRoom> = {};
  for (const [roomId, value] of Object.entries(table(rooms.join))) {
    const room = table(value);
    const timeline = table(room.timeline);
    join[roomId] = {
      state: { events: events(table(room.state).events, `rooms.join.${roomId}.state.events`, false) },
      timeline: {
        events: events(timeline.events, `rooms.join.${roomId}.timeline.events`, true),
        limited: timeline.limited === true,
        ...(typeof timeline.prev_batch === 'string' ? { prev_batch: timeline.prev_batch } : {}),
      },
    };
  }
  const invite: Record<string, InvitedRoom> = {};
  for (const [roomId, value] of Object.entries(table(rooms.invite))) {
    invite[roomId] = { invite_state: { events: events(table(table(value).invite_state).events, `rooms.invite.${roomId}.invite_state.events`, false) } };
  }
  const accountData = list(table(body.account_data).events).filter((event): event is { type: string; content: Record<string, unknown> } => isRecord(event) && typeof event.type === 'string' && isRecord(event.content));
  const response: SyncResponse = {
    next_batch: typeof body.next_batch === 'string' ? body.next_batch : '',
    rooms: { join, invite, leave: table(rooms.leave) },
    account_data: { events: accountData },
  };
  return { response, dropped };
}
