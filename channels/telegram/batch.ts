/**
 * One getUpdates batch, handled the way the inbox needs it. Each chat's updates are pushed in
 * order, one after the other (a person's messages must reach the inbox, and so the queue, in the
 * order they were written); different chats are pushed side by side, at most `limit` at once. On
 * PostgreSQL the pushes of one moment share one write and one round trip (see
 * src/store/postgres/shared.ts): a batch of 100 updates from 40 chats was 100 accepts one after
 * the other — ~0.5 s before the last of 240 messages was stored with three nodes busy, and the
 * cluster's first turns started as the messages trickled in — and is now as many round trips as
 * the most messages one chat has in it.
 *
 * Run alone, after everything before them and before everything after (a barrier): a group's
 * upgrade to a supergroup (the move is recorded, and the new chat's messages continue the old
 * one's conversation), an update that is not a message, and a message that carries a file (its
 * download is held in memory until stored, so downloads are not run side by side).
 *
 * Confirming stays as before: the caller confirms only the updates before the first one not
 * handled. After a failure (a push refused: the daemon is stopping) nothing more is started; an
 * update handled after an earlier failed one is not confirmed, so Telegram hands it out again
 * and the inbox knows it by its id. A chat's later update never runs after its earlier one failed.
 */
import type { Update } from 'grammy/types';

/** Updates of different chats pushed at once (each waits in `push` while the turn queue is full). */
export const BATCH_PARALLEL = 16;

export interface BatchResult {
  /** How many updates from the start of the batch were handled: those may be confirmed. */
  readonly handled: number;
  /** The first failure, if any (the caller rethrows it after confirming the handled ones). */
  readonly failure?: unknown;
}

const FILE_FIELDS = ['photo', 'document', 'voice', 'audio', 'video', 'video_note', 'animation', 'sticker'] as const;

/** The chat an update's pushes are ordered by, or undefined for an update that runs alone. */
export function orderKey(update: Update): string | undefined {
  const message = update.message;
  if (!message) return undefined;
  if (typeof message.migrate_to_chat_id === 'number' || typeof message.migrate_from_chat_id === 'number') return undefined;
  if (FILE_FIELDS.some((field) => message[field] !== undefined)) return undefined;
  return String(message.chat.id);
}

export async function handleBatch(updates: readonly Update[], handle: (update: Update) => Promise<void>, limit = BATCH_PARALLEL): Promise<BatchResult> {
  const ok: boolean[] = Array.from({ length: updates.length }, () => false);
  let failure: { error: unknown } | undefined;
  const slots = slotsOf(limit);
  /** Every update's run so far, and the last barrier's: a barrier waits for all of them, everything waits for the last barrier. */
  const runs: Promise<void>[] = [];
  let barrier: Promise<void> = Promise.resolve();
  const lastOfChat = new Map<string, Promise<boolean>>();

  for (const [index, update] of updates.entries()) {
    const key = orderKey(update);
    const before = key === undefined ? Promise.all(runs).then(() => true) : Promise.all([barrier, lastOfChat.get(key) ?? true]).then(([, earlier]) => earlier);
    const run = before.then(async (earlierHandled) => {
      if (!earlierHandled || failure) return false;
      await slots.take();
      try {
        if (failure) return false;
        await handle(update);
        ok[index] = true;
        return true;
      } catch (error) {
        failure ??= { error };
        return false;
      } finally {
        slots.give();
      }
    });
    const settled = run.then(() => undefined);
    runs.push(settled);
    if (key === undefined) barrier = settled;
    else lastOfChat.set(key, run);
  }
  await Promise.all(runs);
  const firstNot = ok.indexOf(false);
  return { handled: firstNot === -1 ? updates.length : firstNot, ...(failure ? { failure: failure.error } : {}) };
}

/** At most `limit` holders at once; the rest wait in order. */
function slotsOf(limit: number): { take(): Promise<void>; give(): void } {
  let free = limit;
  const waiting: (() => void)[] = [];
  return {
    take: () => {
      if (free > 0) {
        free--;
        return Promise.resolve();
      }
      return new Promise((resolve) => waiting.push(resolve));
    },
    give: () => {
      const next = waiting.shift();
      if (next) next();
      else free++;
    },
  };
}
