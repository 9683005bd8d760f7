/**
 * Per-channel read positions, kept in the channel's state directory so a restarted daemon
 * can catch up on what was sent while it was away (Discord's gateway does not redeliver
 * across sessions). A position only ever lags: it moves past a message once that message is
 * in the inbox, so a stale file means re-reading (deduped), never losing.
 */
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { before, isAfter, type ChannelInfo } from './inbound.ts';

export interface Position {
  /** Everything up to this message id has been pushed (or deliberately skipped). */
  after: string;
  info?: ChannelInfo;
}

interface FileShape {
  readonly version: 1;
  readonly positions: Record<string, { after: string; type?: number; parentId?: string }>;
}

const MAX_CHANNELS = 500;
const SAVE_DELAY_MS = 1000;

export class Positions {
  readonly #file: string | undefined;
  readonly #log: Logger;
  /** Least recently active first. */
  readonly #positions = new Map<string, Position>();
  #timer: NodeJS.Timeout | undefined;

  constructor(stateDir: string | undefined, log: Logger) {
    this.#file = stateDir === undefined ? undefined : join(stateDir, 'positions.json');
    this.#log = log;
    this.#load();
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
      if (this.#positions.size > MAX_CHANNELS) this.#positions.delete(this.#positions.keys().next().value!);
      this.flush();
    }
    return position;
  }

  /** Moves a channel's position past `messageId` (saved shortly after). */
  advance(channelId: string, messageId: string): void {
    const position = this.#positions.get(channelId);
    if (!position || !isAfter(messageId, position.after)) return;
    position.after = messageId;
    this.#positions.delete(channelId); // most recently active last
    this.#positions.set(channelId, position);
    this.#timer ??= setTimeout(() => this.flush(), SAVE_DELAY_MS).unref();
  }

  forget(channelId: string): void {
    if (this.#positions.delete(channelId)) this.flush();
  }

  /** Writes the file now (atomically: a temp file renamed over it). */
  flush(): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    if (!this.#file) return;
    const shape: FileShape = {
      version: 1,
      positions: Object.fromEntries(
        [...this.#positions].map(([id, position]) => [
          id,
          { after: position.after, ...(position.info ? { type: position.info.type, ...(position.info.parentId ? { parentId: position.info.parentId } : {}) } : {}) },
        ]),
      ),
    };
    try {
      mkdirSync(join(this.#file, '..'), { recursive: true, mode: 0o700 });
      writeFileSync(`${this.#file}.tmp`, JSON.stringify(shape), { mode: 0o600 });
      renameSync(`${this.#file}.tmp`, this.#file);
    } catch (error) {
      this.#log.warn({ err: error }, 'could not save Discord read positions; a restart may not catch up on everything');
    }
  }

  #load(): void {
    if (!this.#file) return;
    let text: string;
    try {
      text = readFileSync(this.#file, 'utf8');
    } catch {
      return; // first start
    }
    try {
      const shape = JSON.parse(text) as FileShape;
      for (const [id, saved] of Object.entries(shape.positions ?? {})) {
        if (!/^\d+$/.test(id) || typeof saved.after !== 'string' || !/^\d+$/.test(saved.after)) continue;
        const info = typeof saved.type === 'number' ? (saved.parentId ? { type: saved.type, parentId: saved.parentId } : { type: saved.type }) : undefined;
        this.#positions.set(id, info ? { after: saved.after, info } : { after: saved.after });
      }
    } catch (error) {
      this.#log.warn({ err: error, file: this.#file }, 'unreadable Discord read positions; starting without them');
    }
  }
}
