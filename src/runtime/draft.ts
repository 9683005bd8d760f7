/**
 * A reply that grows while the model streams: the first visible text is sent as a draft
 * message, later text edits it at most every `editIntervalMs` (a rate the platform tolerates).
 * Internal markup never shows: the preview is sanitised like the final reply, and a tag that
 * is still being written is held back. Edits are best effort — the outbox finalises the draft
 * with the real reply, so a failed edit only delays the preview.
 */
import type { Logger } from 'pino';
import type { Channel, MessageEditor, MessageLimit, OutboundMessage } from '../channel.ts';
import { hasMessageLimit, SendError } from '../channel.ts';
import { sanitizeReply } from '../agent/sanitize.ts';

export interface DraftOptions {
  readonly channel: Channel & MessageEditor;
  /** Where the draft goes (the inbound message it answers). */
  readonly target: OutboundMessage;
  /** A draft already sent for this turn before a restart: edit it instead of sending another. */
  readonly existingId?: string;
  /** Called once the draft exists (to remember it durably). */
  readonly onCreated: (messageId: string) => void;
  readonly log: Logger;
}

export interface Draft {
  readonly onTextDelta: (delta: string) => void;
  /** Stops streaming (waits for an edit in flight); returns the draft's id, if one was sent. */
  finish(): Promise<string | undefined>;
}

/** What the preview shows of `text` so far. */
export function previewText(text: string, channel: Channel): string {
  // Hold back a tag that may be the start of internal markup until it is complete.
  const visible = sanitizeReply(text.replace(/<[^>]*$/, ''));
  const limit = hasMessageLimit(channel) ? (channel as Channel & MessageLimit).maxMessageLength : Infinity;
  if (visible.length <= limit - 2) return visible;
  return `${visible.slice(0, Math.max(0, limit - 2))} …`;
}

export function startDraft(options: DraftOptions): Draft {
  const { channel, target, log } = options;
  let text = '';
  let id = options.existingId;
  let shown = '';
  /** Monotonic (a wall clock stepped back would hold the next edit for as long as the step). */
  let lastAt: number | undefined;
  let timer: NodeJS.Timeout | undefined;
  let inFlight: Promise<void> = Promise.resolve();
  let finished = false;
  /** Monotonic: no preview before this (the platform asked to wait). */
  let holdUntil = 0;

  const flush = (): void => {
    timer = undefined;
    if (finished) return;
    const preview = previewText(text, channel);
    if (preview === '' || preview === shown) return;
    lastAt = performance.now();
    inFlight = inFlight.then(async () => {
      if (finished && id !== undefined) return;
      try {
        if (id === undefined) {
          id = await channel.sendDraft({ ...target, text: preview });
          options.onCreated(id);
        } else {
          await channel.edit(target, id, preview);
        }
        shown = preview;
      } catch (error) {
        // A platform's "wait" (or the flood gate refusing inside one): no preview until it has passed.
        if (error instanceof SendError && error.retryAfterMs !== undefined) holdUntil = Math.max(holdUntil, performance.now() + error.retryAfterMs);
        log.debug({ err: error }, 'streaming preview update failed; the final reply will still arrive');
      }
    });
  };

  return {
    onTextDelta(delta) {
      if (finished) return;
      text += delta;
      if (timer) return;
      const wait = Math.max(0, lastAt === undefined ? 0 : lastAt + channel.editIntervalMs - performance.now(), holdUntil - performance.now());
      timer = setTimeout(flush, wait);
    },
    async finish() {
      finished = true;
      if (timer) clearTimeout(timer);
      await inFlight;
      return id;
    },
  };
}
