/**
 * How a turn's end is recorded: its history, its reply and its message answered — all or
 * nothing, in one transaction. The reply is in the outbox before it is sent.
 */
import type { InboundMessage } from '../channel.ts';
import { conversationKey, refOf } from '../conversation.ts';
import type { TurnOutput } from '../agent/agent.ts';
import type { Database, Sql } from '../store/sql.ts';
import type { History } from '../store/history.ts';
import type { Inbox } from '../store/inbox.ts';
import type { Outbox, Reply } from '../store/outbox.ts';
import type { Drafts } from '../store/settings.ts';
import type { PendingAhead } from './delivery.ts';
import type { ReplyRoute } from './reply-route.ts';
import type { TurnSettle } from './turn-queue.ts';

export interface TurnRecordsOptions {
  readonly database: Database;
  readonly inbox: Inbox;
  readonly outbox: Outbox;
  readonly history: History;
  readonly drafts: Drafts;
  readonly replies: ReplyRoute;
}

export class TurnRecords {
  readonly #o: TurnRecordsOptions;

  constructor(options: TurnRecordsOptions) {
    this.#o = options;
  }

  /**
   * A turn through the model: its output, and its reply (if any) replacing its streamed draft.
   * The remembered draft is deleted only when there is one (`draftId`: this run's, or the one a
   * run before a crash remembered, which a streaming re-run takes over): a statement fewer for
   * every turn that posted none. Only a run before a crash that streamed under an earlier config
   * could leave a row behind, and a row of an answered message is never read again.
   */
  turn(seq: number, conversation: string, output: TurnOutput, message: InboundMessage, draftId: string | undefined, settle?: TurnSettle, ahead?: PendingAhead): Promise<boolean> {
    return this.#end(seq, 'done', settle, output.commit, ahead, (tx) => [
      this.#o.history.in(tx).append(conversation, seq, output.messages),
      ...(output.reply !== '' || (output.files?.length ?? 0) > 0
        ? this.#reply(tx, seq, message, {
            text: output.reply,
            ...(output.files?.length ? { files: output.files } : {}),
            ...(draftId === undefined ? {} : { draftId }),
          })
        : []),
      ...this.#forget(tx, seq, draftId),
    ]);
  }

  /** A reply the runtime gives itself (a pairing code, a command's answer). */
  answer(seq: number, message: InboundMessage, text: string, commit: ((tx: Sql) => Promise<void>) | undefined, settle?: TurnSettle): Promise<boolean> {
    return this.#end(seq, 'done', settle, commit, undefined, (tx) => this.#reply(tx, seq, message, { text }));
  }

  /** A failed turn: the message marked failed with `error`, and the apology `text` for its sender (its draft: see {@link turn}). */
  failure(seq: number, message: InboundMessage, text: string, error: string, draftId: string | undefined, settle?: TurnSettle, ahead?: PendingAhead): Promise<boolean> {
    return this.#end(seq, { failed: error }, settle, undefined, ahead, (tx) => [
      ...this.#reply(tx, seq, message, { text, ...(draftId === undefined ? {} : { draftId }) }),
      ...this.#forget(tx, seq, draftId),
    ]);
  }

  /** Deletes the remembered draft of message `seq` inside `tx`, when the turn had one (see {@link turn}). */
  #forget(tx: Sql, seq: number, draftId: string | undefined): Array<Promise<unknown>> {
    return draftId === undefined ? [] : [this.#o.drafts.in(tx).delete(seq)];
  }

  /**
   * Ends message `seq` and records `writes` in one transaction; false (recording nothing) when
   * the message no longer waits. `before` (a tool's or a command's writes) runs first, waited for;
   * then the mark, `writes` and the shared queue's job (`settle`) are issued together, without
   * waiting for one another: a transaction holds one connection, whose statements run in the
   * order issued, and a failed one fails the rest and rolls all back. A commit tried again after
   * one that was applied (its answer lost with the connection) records nothing twice: the mark
   * then finds the message no longer waiting and the transaction is rolled back. `writes` issues
   * every statement as it is called (it returns their promises, it cannot wait for an answer):
   * where the transaction checks its statements itself (PostgreSQL, Sql.commitAhead: the mark
   * there fails on the server when the message no longer waits) its COMMIT goes out in the same
   * write, one round trip for the whole commit; elsewhere every answer is waited for first.
   * There `ahead` (the conversation's pending replies, for the round that sends this one) is read
   * in the same write too; elsewhere that round reads them itself.
   */
  async #end(
    seq: number,
    end: 'done' | { failed: string },
    settle: TurnSettle | undefined,
    before: ((tx: Sql) => Promise<void>) | undefined,
    ahead: PendingAhead | undefined,
    writes: (tx: Sql) => ReadonlyArray<Promise<unknown>>,
  ): Promise<boolean> {
    let marked: Promise<boolean> | undefined;
    try {
      await this.#o.database.transaction(async (tx) => {
        await before?.(tx);
        marked = this.#o.inbox.in(tx).finish(seq, end);
        const issued = [marked, ...writes(tx), ...(settle ? [settle.in(tx)] : [])];
        if (tx.commitAhead) {
          if (ahead) issued.push(ahead.read(tx));
          tx.commitAhead(Promise.all(issued));
          return;
        }
        // all settled first (see together); a mark that found nothing makes the writes moot, whatever became of them
        await Promise.allSettled(issued);
        if (!(await marked)) throw new NotWaiting();
        await together(issued);
      });
      settle?.committed();
      return true;
    } catch (error) {
      if (error instanceof NotWaiting) return false;
      // ahead of its answers the transaction fails with the first failure it saw: the mark's answer says whether it was this
      if (marked && (await marked.catch(() => true)) === false) return false;
      throw error;
    }
  }

  /** Puts a reply to `message` in the outbox inside `tx`, and tells the node that sends it (once `tx` commits). */
  #reply(tx: Sql, seq: number, message: InboundMessage, body: Pick<Reply, 'text' | 'files' | 'draftId'>): Array<Promise<unknown>> {
    const { text, ...rest } = body;
    const reply: Reply = { ...refOf(message), text, replyTo: message.id, ...rest };
    return [this.#o.outbox.in(tx).add(reply, seq), this.#o.replies.recorded(tx, conversationKey(reply))];
  }
}

/** Thrown inside a turn's transaction to roll it back: its message no longer waits. */
class NotWaiting extends Error {}

/**
 * Waits for every write issued together inside a transaction, then throws the first failure.
 * Promise.all would reject at the first failure while the others are still running, and the
 * transaction would roll back (and give its connection back) under them: a write still to come
 * would then run outside it.
 */
async function together(writes: readonly (Promise<unknown> | undefined)[]): Promise<void> {
  const settled = await Promise.allSettled(writes);
  const failed = settled.find((result) => result.status === 'rejected');
  if (failed) throw failed.reason;
}
