/**
 * What the channel knows about its rooms, from the state events /sync hands out: who is in a
 * room (and by which display name), whether it is encrypted, whether it is a DM. The first
 * sync of every listen asks for the full state of every joined room, so this is complete
 * after a restart too.
 */
import type { RoomEvent } from './inbound.ts';

interface Member {
  membership: string;
  displayname?: string;
}

interface RoomInfo {
  readonly members: Map<string, Member>;
  encrypted: boolean;
  /** An invite said `is_direct`. */
  directInvite: boolean;
}

export class Rooms {
  readonly #rooms = new Map<string, RoomInfo>();
  /** Room ids the bot's own `m.direct` account data lists. */
  #direct = new Set<string>();

  #room(roomId: string): RoomInfo {
    let room = this.#rooms.get(roomId);
    if (!room) {
      room = { members: new Map(), encrypted: false, directInvite: false };
      this.#rooms.set(roomId, room);
    }
    return room;
  }

  /**
   * Applies one state event. Returns true when it made a known room encrypted (so the
   * channel can say so once).
   */
  apply(roomId: string, event: Pick<RoomEvent, 'type' | 'content'> & { state_key?: string | undefined }): boolean {
    if (event.state_key === undefined) return false;
    const room = this.#room(roomId);
    if (event.type === 'm.room.member') {
      const membership = typeof event.content.membership === 'string' ? event.content.membership : 'leave';
      const displayname = typeof event.content.displayname === 'string' && event.content.displayname.trim() !== '' ? event.content.displayname : undefined;
      if (membership === 'leave' || membership === 'ban') room.members.delete(event.state_key);
      else room.members.set(event.state_key, displayname === undefined ? { membership } : { membership, displayname });
      return false;
    }
    if (event.type === 'm.room.encryption' && typeof event.content.algorithm === 'string' && !room.encrypted) {
      room.encrypted = true;
      return true;
    }
    return false;
  }

  markDirectInvite(roomId: string): void {
    this.#room(roomId).directInvite = true;
  }

  /** The bot's `m.direct` account data: `{ "@user:server": ["!room:server", …] }`. */
  setDirectRooms(content: Record<string, unknown>): void {
    const rooms = new Set<string>();
    for (const list of Object.values(content)) if (Array.isArray(list)) for (const id of list) if (typeof id === 'string') rooms.add(id);
    this.#direct = rooms;
  }

  forget(roomId: string): void {
    this.#rooms.delete(roomId);
  }

  knows(roomId: string): boolean {
    return this.#rooms.has(roomId);
  }

  /** A DM: listed in m.direct, invited to as one, or a room of exactly two (the bot and one person). */
  isDirect(roomId: string): boolean {
    const room = this.#rooms.get(roomId);
    if (this.#direct.has(roomId) || room?.directInvite) return true;
    if (!room) return false;
    let present = 0;
    for (const member of room.members.values()) if (member.membership === 'join' || member.membership === 'invite') present++;
    return present === 2;
  }

  /** Ids of the known rooms that are end-to-end encrypted. */
  encrypted(): string[] {
    return [...this.#rooms].filter(([, room]) => room.encrypted).map(([id]) => id);
  }

  isEncrypted(roomId: string): boolean {
    return this.#rooms.get(roomId)?.encrypted ?? false;
  }

  displayName(roomId: string, userId: string): string | undefined {
    return this.#rooms.get(roomId)?.members.get(userId)?.displayname;
  }

  /** The users joined to or invited to a room (the bot included): whose devices an encrypted reply is for. */
  present(roomId: string): string[] {
    const room = this.#rooms.get(roomId);
    return room ? [...room.members].filter(([, member]) => member.membership === 'join' || member.membership === 'invite').map(([id]) => id) : [];
  }

  /** Ids of the rooms the bot is joined to. */
  joined(botUserId: string): string[] {
    return [...this.#rooms].filter(([, room]) => room.members.get(botUserId)?.membership === 'join').map(([id]) => id);
  }
}
