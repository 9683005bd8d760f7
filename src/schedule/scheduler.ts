/**
 * Fires due scheduled tasks by pushing a message into the runtime, as if the person who
 * scheduled it had written it, so the agent answers in that conversation. The message id is
 * the task id plus the due time: the inbox dedupes it, so a crash between pushing and
 * advancing the task never fires it twice.
 */
import type { Logger } from 'pino';
import type { Push } from '../channel.ts';
import { diskFullCode } from '../store/storage.ts';
import type { nextCronRun } from './cron.ts';
import type { ScheduledTask, ScheduleStore } from './store.ts';

export interface SchedulerOptions {
  readonly store: ScheduleStore;
  readonly push: Push;
  readonly log: Logger;
  /** How often due tasks are looked for. @default 1000 */
  readonly intervalMs?: number;
  readonly now?: () => number;
}

export class Scheduler {
  readonly #options: SchedulerOptions;
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<void> | undefined;
  /** croner's next run, kept once the first cron task has loaded it (not imported again per fire). */
  #nextCronRun: typeof nextCronRun | undefined;

  constructor(options: SchedulerOptions) {
    this.#options = options;
  }

  start(): void {
    this.#timer = setInterval(() => void this.tick(), this.#options.intervalMs ?? 1000);
    this.#timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.#timer);
    await this.#running;
  }

  /** Fires everything due now. Never overlaps itself; never rejects. */
  tick(): Promise<void> {
    this.#running ??= this.#fire().finally(() => (this.#running = undefined));
    return this.#running;
  }

  async #fire(): Promise<void> {
    try {
      await this.#fireDue();
    } catch (error) {
      // The schedules could not be read (or a run not recorded): the next tick tries again.
      if (diskFullCode(error) === undefined) this.#options.log.error({ err: error }, 'scheduled tasks could not be read or recorded; trying again');
    }
  }

  async #fireDue(): Promise<void> {
    const now = this.#options.now?.() ?? Date.now();
    for (const task of await this.#options.store.due(now)) {
      try {
        await this.#options.push({
          channel: task.origin.channel,
          account: task.origin.account,
          chat: task.origin.chat,
          ...(task.origin.thread === undefined ? {} : { thread: task.origin.thread }),
          id: `schedule:${task.id}:${task.nextRun}`,
          sender: task.origin.sender,
          text: `[Scheduled task #${task.id}${task.cron ? `, cron "${task.cron}"` : ''}] ${task.prompt}`,
          timestamp: task.nextRun,
        });
      } catch (error) {
        // A full disk is said once by the runtime (and /readyz), not here once a second.
        if (diskFullCode(error) === undefined) this.#options.log.warn({ err: error, schedule: task.id }, 'scheduled task not delivered yet; will try again');
        return;
      }
      // When this cannot be written (a full disk) the next tick pushes the run again: its id is
      // the run's, so the inbox drops the copy.
      // Another node may have fired and moved it first; the inbox keeps the run's id once either way.
      if (!(await this.#options.store.advance(task, await this.#next(task, now)))) continue;
      this.#options.log.info({ schedule: task.id, conversation: task.conversation }, 'scheduled task fired');
    }
  }

  async #next(task: ScheduledTask, now: number): Promise<number | undefined> {
    if (!task.cron) return undefined;
    // croner is loaded when a cron task first fires: a daemon without one never parses cron.
    this.#nextCronRun ??= (await import('./cron.ts')).nextCronRun;
    const next = this.#nextCronRun(task.cron, task.timezone, new Date(Math.max(now, task.nextRun)));
    if (!next.ok) {
      this.#options.log.error({ schedule: task.id, error: next.error }, 'cron task cannot be rescheduled; stopping it');
      return undefined;
    }
    return next.at;
  }
}
