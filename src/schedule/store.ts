/**
 * Scheduled tasks in SQLite: one-shot or cron, each belonging to the conversation that made
 * it. They survive restarts; the scheduler fires what is due.
 */
import type { Sender } from '../channel.ts';
import type { ConversationRef } from '../conversation.ts';
import type { Sql } from '../store/sql.ts';

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
  readonly #sql: Sql;

  constructor(sql: Sql) {
    this.#sql = sql;
  }

  async add(task: Omit<ScheduledTask, 'id'>): Promise<number> {
    const row = await this.#sql.get<{ id: number }>(
      'INSERT INTO schedules (conversation, origin, prompt, cron, timezone, next_run, created_at) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id',
      [task.conversation, JSON.stringify(task.origin), task.prompt, task.cron ?? null, task.timezone ?? null, task.nextRun, Date.now()],
    );
    return row!.id;
  }

  /** Active tasks of one conversation, soonest first. */
  async list(conversation: string): Promise<ScheduledTask[]> {
    return (await this.#sql.all<Row>('SELECT * FROM schedules WHERE conversation = ? AND active = 1 ORDER BY next_run', [conversation])).map(toTask);
  }

  async activeCount(conversation: string): Promise<number> {
    return (await this.#sql.get<{ n: number }>('SELECT count(*) AS n FROM schedules WHERE conversation = ? AND active = 1', [conversation]))!.n;
  }

  /** Cancels a task of this conversation; false when there is no such active task. */
  async cancel(conversation: string, id: number): Promise<boolean> {
    return (await this.#sql.run('UPDATE schedules SET active = 0 WHERE id = ? AND conversation = ? AND active = 1', [id, conversation])) === 1;
  }

  async due(now: number, limit = 100): Promise<ScheduledTask[]> {
    return (await this.#sql.all<Row>('SELECT * FROM schedules WHERE active = 1 AND next_run <= ? ORDER BY next_run LIMIT ?', [now, limit])).map(toTask);
  }

  /**
   * Moves a fired task to its next run, or ends it (`next` undefined) — only if it still is at
   * the run that fired. Returns false when another node (or run) moved it first: that one fires it.
   */
  async advance(task: ScheduledTask, next: number | undefined): Promise<boolean> {
    const changed =
      next === undefined
        ? await this.#sql.run('UPDATE schedules SET active = 0 WHERE id = ? AND next_run = ? AND active = 1', [task.id, task.nextRun])
        : await this.#sql.run('UPDATE schedules SET next_run = ? WHERE id = ? AND next_run = ? AND active = 1', [next, task.id, task.nextRun]);
    return changed === 1;
  }
}
