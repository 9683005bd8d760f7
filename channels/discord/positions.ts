/**
 * Per-channel read positions, kept in the channel state store (ChannelContext.state, key
 * `positions`) so that a restarted daemon, or the node that takes the channel over, can catch
 * up on what was sent while it was away (Discord's gateway does not redeliver across sessions).
 * A position only ever lags: it moves past a message once that message is in the inbox, so
 * stale state means re-reading (deduped), never losing. Loaded when a listen starts; a new
 * channel is saved at once, a moved position shortly after, and everything when a listen ends.
 * Earlier versions kept them in `positions.json` in the state dir: imported from there once.
 */
import type { Logger } from 'pino';
import type { ChannelState } from '../../src/channel-state.ts';
import { importStateFile } from '../../src/state-import.ts';
import type { ChannelContext } from '../../src/channel.ts';
import { before, isAfter, type ChannelInfo } from './inbound.ts';
import { BoundedMap } from '../../src/bounded-map.ts';

export interface Position {
  /** Everything up to this message id has been pushed (or deliberately skipped). */
  after: string;
  info?: ChannelInfo;
}

/** The stored value (the old file's shape, so it imports as it is). */
interface Shape {
  readonly version: 1;
  readonly positions: Record<string, { after: string; type?: number; parentId?: string }>;
}

export interface PositionsOptions {
  /** Where they are kept; none: in memory only. */
  readonly state?: ChannelState;
  readonly log: Logger;
  /** The channel's state dir, where an earlier version's `positions.json` may be. */
  readonly legacyDir?: string;
  /** Where a failed save is reported (a full disk shows in /readyz). */
  readonly storage?: ChannelContext['storage'];
}

const KEY = 'positions';
const MAX_CHANNELS = 500;
const SAVE_DELAY_MS = 1000;

export class Positions {
  readonly #options: PositionsOptions;
  readonly #log: Logger;
  /** Least recently active first. */
  readonly #positions = new BoundedMap<string, Position>(MAX_CHANNELS);
  #timer: NodeJS.Timeout | undefined;
  /** Saves run one after another, each writing what is known when it starts. */
  #saving: Promise<void> = Promise.resolve();

  constructor(options: PositionsOptions) {
    this.#options = options;
    this.#log = options.log;
  }

  get size(): number {
    return this.#positions.size;
  }

  entries(): Array<[string, Position]> {
    return [...this.#positions];
  }

  get(channelId: string): Position | undefined {
    return this.#positions.get(channelId);
  }

  /** The channel's position, created just before `messageId` (and saved at once) when the channel is new. */
  track(channelId: string, messageId: string): Position {
    let position = this.#positions.get(channelId);
    if (!position) {
      position = { after: before(messageId) };
      this.#positions.set(channelId, position);
      void this.flush();
    }
    return position;
  }

  /** Moves a channel's position past `messageId` (saved shortly after). */
  advance(channelId: string, messageId: string): void {
    const position = this.#positions.get(channelId);
    if (!position || !isAfter(messageId, position.after)) return;
    position.after = messageId;
    this.#positions.setNewest(channelId, position); // most recently active last
    this.#timer ??= setTimeout(() => void this.flush(), SAVE_DELAY_MS).unref();
  }

  forget(channelId: string): void {
    if (this.#positions.delete(channelId)) void this.flush();
  }

  /** Saves now; resolves once saved (or the failure logged: it never rejects). */
  flush(): Promise<void> {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    const state = this.#options.state;
    if (!state) return this.#saving;
    this.#saving = this.#saving.then(async () => {
      try {
        await state.put(KEY, JSON.stringify(this.#shape()));
      } catch (error) {
        this.#options.storage?.failed(error, 'save Discord read positions');
        this.#log.warn({ err: error }, 'could not save Discord read positions; a restart may not catch up on everything');
      }
    });
    return this.#saving;
  }

  /**
   * Replaces what is in memory with what is stored (importing an earlier version's file once).
   * Called when a listen starts: in a cluster another node may have moved them meanwhile.
   */
  async load(): Promise<void> {
    const state = this.#options.state;
    if (!state) return;
    await this.#saving;
    await importStateFile({
      dir: this.#options.legacyDir,
      file: 'positions.json',
      log: this.#log,
      stored: async () => (await state.get(KEY)) !== undefined,
      load: async (text) => {
        const read = parse(text);
        if (!read) throw new Error('positions.json is not readable JSON');
        await state.put(KEY, JSON.stringify(toShape(read)));
        return read.size;
      },
    }).catch((error: unknown) => this.#log.warn({ err: error }, 'could not import the old Discord read positions file; starting without it'));
    const text = await state.get(KEY);
    const read = text === undefined ? new Map<string, Position>() : parse(text);
    if (!read) this.#log.warn('unreadable Discord read positions; starting without them');
    this.#positions.clear();
    for (const [id, position] of read ?? []) this.#positions.set(id, position);
  }

  #shape(): Shape {
    return toShape(this.#positions);
  }
}

function toShape(positions: ReadonlyMap<string, Position>): Shape {
  return {
    version: 1,
    positions: Object.fromEntries(
      [...positions].map(([id, position]) => [
        id,
        { after: position.after, ...(position.info ? { type: position.info.type, ...(position.info.parentId ? { parentId: position.info.parentId } : {}) } : {}) },
      ]),
    ),
  };
}

/** The positions in a stored value (or an old file), undefined when it is not readable. */
function parse(text: string): Map<string, Position> | undefined {
  const positions = new Map<string, Position>();
  try {
    const shape = JSON.parse(text) as Shape;
    for (const [id, saved] of Object.entries(shape.positions ?? {})) {
      if (!/^\d+$/.test(id) || typeof saved.after !== 'string' || !/^\d+$/.test(saved.after)) continue;
      const info = typeof saved.type === 'number' ? (saved.parentId ? { type: saved.type, parentId: saved.parentId } : { type: saved.type }) : undefined;
      positions.set(id, info ? { after: saved.after, info } : { after: saved.after });
    }
  } catch {
    return undefined;
  }
  return positions;
}
