/**
 * Who may talk to the agent (the shared conversation policy for chat channels; the terminal
 * is exempt). With `allow = ["<sender id>", …]` (or `["*"]`) only those senders get through.
 * Without `allow`, an unknown sender's direct message gets a one-time pairing code and nothing
 * else; once the operator approves that code, the sender is allowed from then on (stored in
 * the database). In groups, only messages that address the bot get through when `mention_only`.
 * Denied senders' messages never reach the model.
 */
import { randomInt } from 'node:crypto';
import type { InboundMessage } from '../channel.ts';
import { outlived, systemClock, type Clock } from '../clock.ts';
import type { Sql } from '../store/sql.ts';

export interface AccessOptions {
  /** Sender ids let through; `["*"]` = anyone; undefined = pairing. */
  readonly allow?: readonly string[];
  /** In groups, answer only when addressed. @default true */
  readonly mentionOnly: boolean;
}

export type AccessDecision =
  | { readonly kind: 'allow' }
  /** Reply with this pairing code (only the first time a sender asks). */
  | { readonly kind: 'pair'; readonly code: string }
  | { readonly kind: 'ignore'; readonly reason: 'not allowed' | 'awaiting pairing approval' | 'not addressed' };

export interface PendingPairing {
  readonly channel: string;
  readonly senderId: string;
  readonly code: string;
  readonly createdAt: number;
}

export interface PairingOptions {
  /** How long a code can be approved; after that the sender's next message gets a new one. @default 3_600_000 (1 h) */
  readonly codeTtlMs?: number;
  /** @default systemClock */
  readonly clock?: Clock;
}

/**
 * Pairing codes and approved senders, per channel. A code is stamped with the wall time it
 * was made (it outlives restarts and `switchboard pairing` reads it from another process), and
 * is gone — deleted, so it can no longer be approved — once any of these holds:
 * - its wall age passed `codeTtlMs` (a clock stepped forward expires codes early; the sender
 *   writes again and gets a new one);
 * - its stamp lies more than `codeTtlMs` in the future (the clock was stepped back past it, so
 *   its real age is unknown and it is not trusted);
 * - `codeTtlMs` passed on this process's monotonic clock since it first saw the code, so a
 *   clock stepped back by less than that cannot keep a code alive either. The daemon sweeps
 *   hourly (see Runtime), so a code it knows lives at most twice `codeTtlMs` whatever the clock does.
 */
export class PairingStore {
  readonly #sql: Sql;
  readonly #ttlMs: number;
  readonly #clock: Clock;
  /** Monotonic time this process first saw each pending code, by channel, sender and code. */
  readonly #seen = new Map<string, number>();

  constructor(sql: Sql, options: PairingOptions = {}) {
    this.#ttlMs = options.codeTtlMs ?? 3_600_000;
    if (!(this.#ttlMs > 0)) throw new TypeError(`PairingStore: codeTtlMs must be positive, got ${String(options.codeTtlMs)}`);
    this.#clock = options.clock ?? systemClock;
    this.#sql = sql;
  }

  #row(channel: string, senderId: string): Promise<{ code: string; approved_at: number | null } | undefined> {
    return this.#sql.get('SELECT code, approved_at FROM pairing WHERE channel = ? AND sender_id = ?', [channel, senderId]);
  }

  #pendingRows(): Promise<Array<{ channel: string; sender_id: string; code: string; created_at: number }>> {
    return this.#sql.all('SELECT channel, sender_id, code, created_at FROM pairing WHERE approved_at IS NULL ORDER BY created_at');
  }

  async isApproved(channel: string, senderId: string): Promise<boolean> {
    return ((await this.#row(channel, senderId))?.approved_at ?? null) !== null;
  }

  /** The sender's code, and whether it was just created (only then is it sent). */
  async requestCode(channel: string, senderId: string): Promise<{ code: string; created: boolean }> {
    await this.expire();
    const now = this.#clock.now();
    for (let attempt = 0; attempt < 10; attempt++) {
      const existing = await this.#row(channel, senderId);
      if (existing) return { code: existing.code, created: false };
      const code = newCode();
      // nothing inserted: another node paired this sender meanwhile (read it above next time), or the code clashed (draw again)
      if ((await this.#sql.run('INSERT INTO pairing (channel, sender_id, code, created_at) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING', [channel, senderId, code, now])) === 1) {
        this.#seen.set(seenKey(channel, senderId, code), this.#clock.monotonic());
        return { code, created: true };
      }
    }
    throw new Error('could not draw an unused pairing code');
  }

  /** Approves a code; returns the sender it belonged to, or undefined when there is no such pending code. */
  async approve(channel: string, code: string): Promise<string | undefined> {
    await this.expire();
    const row = await this.#sql.get<{ sender_id: string }>(
      'UPDATE pairing SET approved_at = ? WHERE channel = ? AND code = ? AND approved_at IS NULL RETURNING sender_id',
      [this.#clock.now(), channel, code.trim().toUpperCase()],
    );
    return row?.sender_id;
  }

  /** Codes waiting for approval (expired ones are gone). */
  async pending(): Promise<PendingPairing[]> {
    await this.expire();
    return (await this.#pendingRows()).map((row) => ({ channel: row.channel, senderId: row.sender_id, code: row.code, createdAt: row.created_at }));
  }

  /** Deletes the codes that expired (see the class comment); returns how many. */
  async expire(): Promise<number> {
    const mono = this.#clock.monotonic();
    const live = new Set<string>();
    let expired = 0;
    for (const row of await this.#pendingRows()) {
      const key = seenKey(row.channel, row.sender_id, row.code);
      const seen = this.#seen.get(key) ?? mono;
      if (outlived(row.created_at, this.#ttlMs, this.#clock, seen)) {
        expired += await this.#sql.run('DELETE FROM pairing WHERE channel = ? AND sender_id = ? AND code = ? AND approved_at IS NULL', [row.channel, row.sender_id, row.code]);
        continue;
      }
      this.#seen.set(key, seen);
      live.add(key);
    }
    for (const key of this.#seen.keys()) if (!live.has(key)) this.#seen.delete(key);
    return expired;
  }
}

const seenKey = (channel: string, senderId: string, code: string): string => `${channel}\n${senderId}\n${code}`;

/** Six characters without look-alikes (no 0/O, 1/I/L). */
function newCode(): string {
  const alphabet = 'ABCDEFGHJKMNPQRSTUVWXYZ23456789';
  return Array.from({ length: 6 }, () => alphabet[randomInt(alphabet.length)]).join('');
}

export async function decideAccess(message: InboundMessage, options: AccessOptions, pairing: PairingStore): Promise<AccessDecision> {
  const direct = message.direct ?? true;
  const sender = message.sender.id;
  let allowed: boolean;
  if (options.allow !== undefined) {
    allowed = isAllowed(options.allow, [sender, ...(message.sender.aliases ?? [])]);
    if (!allowed) return { kind: 'ignore', reason: 'not allowed' };
  } else if (!(await pairing.isApproved(message.channel, sender))) {
    if (!direct) return { kind: 'ignore', reason: 'not allowed' };
    const { code, created } = await pairing.requestCode(message.channel, sender);
    return created ? { kind: 'pair', code } : { kind: 'ignore', reason: 'awaiting pairing approval' };
  }
  if (!direct && options.mentionOnly && !message.addressed) return { kind: 'ignore', reason: 'not addressed' };
  return { kind: 'allow' };
}

/**
 * Whether an allow list lets a sender in: an entry equals one of the sender's names
 * (case-insensitively — IRC nicks and mail addresses are), or is a glob with `*` / `?`
 * matching one (`*!*@trusted.host`, `*@example.org`); `*` alone lets anyone in.
 */
export function isAllowed(allow: readonly string[], names: readonly string[]): boolean {
  const lowered = names.map((name) => name.toLowerCase());
  return allow.some((entry) => {
    const wanted = entry.toLowerCase();
    if (wanted === '*') return true;
    if (!/[*?]/.test(wanted)) return lowered.includes(wanted);
    const pattern = new RegExp(`^${wanted.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '.*').replace(/\?/g, '.')}$`, 's');
    return lowered.some((name) => pattern.test(name));
  });
}

/** The one message an unknown sender gets. */
export function pairingReply(channel: string, code: string): string {
  return `Hi! I don't know you yet. Your pairing code is ${code}. Ask the operator to run:\nswitchboard pairing approve ${channel} ${code}`;
}
