/**
 * Hourly: finished inbox and outbox rows older than the redelivery window are deleted, and
 * expired pairing codes with them.
 */
import type { Logger } from 'pino';
import type { PairingStore } from '../policy/access.ts';
import type { Inbox } from '../store/inbox.ts';
import type { Outbox } from '../store/outbox.ts';
import { diskFullCode, type StorageHealth } from '../store/storage.ts';

const DAY_MS = 86_400_000;

export interface PruneOptions {
  readonly inbox: Inbox;
  readonly outbox: Outbox;
  readonly pairing?: PairingStore | undefined;
  readonly storage: StorageHealth;
  readonly log: Logger;
  /** Wall time now, ms. */
  now(): number;
  /** @default 7 days */
  readonly retentionMs?: number | undefined;
}

export async function prune(options: PruneOptions): Promise<void> {
  // Wall time: the rows carry wall stamps. A forward jump shortens the redelivery window by the jump.
  const before = options.now() - (options.retentionMs ?? 7 * DAY_MS);
  try {
    const inbox = await options.inbox.prune(before);
    const outbox = await options.outbox.prune(before);
    if (inbox + outbox > 0) options.log.debug({ inbox, outbox }, 'pruned finished messages');
    const codes = (await options.pairing?.expire()) ?? 0;
    if (codes > 0) options.log.info({ codes }, 'pairing codes expired');
  } catch (error) {
    // Deleting needs space too (WAL frames); the next hourly round tries again.
    if (diskFullCode(error) !== undefined) options.storage.failed(error, 'prune finished messages');
    else options.log.error({ err: error }, 'pruning finished messages failed; trying again in an hour');
  }
}
