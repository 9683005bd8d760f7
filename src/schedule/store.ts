/**
 * Scheduled tasks in SQLite: one-shot or cron, each belonging to the conversation that made
 * it. They survive restarts; the scheduler fires what is due.
 */
import type { Sender } from '../channel.ts';
import type { ConversationRef } from '../conversation.ts';
import type { Db } from '../store/db.ts';

/** Where a task's message goes and who it is from (the person who scheduled it). */
export interface ScheduleOrigin extends ConversationRef {
  readonly sender: Sender;
}

export interface ScheduledTask {
  readonly id: number;
  readonly conversation: string;
  readonly origin: ScheduleOrigin;
  /** What the agent is asked to do when it is due. */
  readonly prompt: string;
  /** Five-field cron expression; undefined for a one-shot task. */
  readonly cron?: string;
  readonly timezone?: string;
  /** Next time it is due (ms since the epoch). */
  readonly nextRun: number;
}

interface Row {
  id: number;
  conversation: string;
  origin: string;
  prompt: string;
  cron: string | null;
  timezone: string | null;
  next_run: number;
}

const toTask = (row: Row): ScheduledTask => ({
  id: row.id,
  conversation: row.conversation,
  origin: JSON.parse(row.origin) as ScheduleOrigin,
  prompt: row.prompt,
  nextRun: row.next_run,
  ...(row.cron === null ? {} : { cron: row.cron }),
  ...(row.timezone === null ? {} : { timezone: row.timezone }),
});

export class ScheduleStore {
  readonly #add;
  readonly #list;
  readonly #count;
  readonly #cancel;
  readonly #due;
  readonly #advance;
  readonly #finish;

  constructor(db: Db) {
    this.#add = db.prepare<[string, string, string, string | null, string | null, number, number], { id: number }>(
      'INSERT INTO schedules (conversation, origin, prompt, cron, timezone, next_run, created_at) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id',
    );
    this.#list = db.prepare<[string], Row>('SELECT * FROM schedules WHERE conversation = ? AND active = 1 ORDER BY next_run');
    this.#count = db.prepare<[string], { n: number }>('SELECT count(*) AS n FROM schedules WHERE conversation = ? AND active = 1');
    this.#cancel = db.prepare<[number, string]>('UPDATE schedules SET active = 0 WHERE id = ? AND conversation = ? AND active = 1');
    this.#due = db.prepare<[number, number], Row>('SELECT * FROM schedules WHERE active = 1 AND next_run <= ? ORDER BY next_run LIMIT ?');
    this.#advance = db.prepare<[number, number, number]>('UPDATE schedules SET next_run = ? WHERE id = ? AND next_run = ?');
    this.#finish = db.prepare<[number, number]>('UPDATE schedules SET active = 0 WHERE id = ? AND next_run = ?');
  }

  add(task: Omit<ScheduledTask, 'id'>): number {
    return this.#add.get(task.conversation, JSON.stringify(task.origin), task.prompt, task.cron ?? null, task.timezone ?? null, task.nextRun, Date.now())!.id;
  }

  /** Active tasks of one conversation, soonest first. */
  list(conversation: string): ScheduledTask[] {
    return this.#list.all(conversation).map(toTask);
  }

  activeCount(conversation: string): number {
    return this.#count.get(conversation)!.n;
  }

  /** Cancels a task of this conversation; false when there is no such active task. */
  cancel(conversation: string, id: number): boolean {
    return this.#cancel.run(id, conversation).changes === 1;
  }

  due(now: number, limit = 100): ScheduledTask[] {
    return this.#due.all(now, limit).map(toTask);
  }

  /** Moves a fired task to its next run, or ends it (`next` undefined). Only from the run that fired. */
  advance(task: ScheduledTask, next: number | undefined): void {
    if (next === undefined) this.#finish.run(task.id, task.nextRun);
    else this.#advance.run(next, task.id, task.nextRun);
  }
}
