/**
 * `schedule`: reminders and recurring tasks that later message the same conversation — one
 * shot (`at` or `in_minutes`) or cron — stored in SQLite so they survive restarts.
 */
import { parseConversationKey } from '../conversation.ts';
import { nextCronRun } from '../schedule/cron.ts';
import type { ScheduleStore } from '../schedule/store.ts';
import { ok, toolError, type Tool } from '../tool.ts';

interface Args {
  action: 'create' | 'list' | 'cancel';
  message?: string;
  at?: string;
  in_minutes?: number;
  cron?: string;
  timezone?: string;
  id?: number;
}

export interface ScheduleToolOptions {
  readonly store: ScheduleStore;
  /** Active tasks one conversation may have. @default 50 */
  readonly maxPerConversation?: number;
  readonly now?: () => number;
}

export function createScheduleTool(options: ScheduleToolOptions): Tool<Args> {
  const now = options.now ?? Date.now;
  const max = options.maxPerConversation ?? 50;
  return {
    name: 'schedule',
    description:
      'Schedule a task that messages this conversation later: once (at / in_minutes) or repeatedly (cron, 5 fields). ' +
      'When due, you receive `message` as an instruction and your answer is sent here. Also list or cancel this conversation\'s tasks.',
    parameters: {
      type: 'object',
      properties: {
        action: { type: 'string', enum: ['create', 'list', 'cancel'] },
        message: { type: 'string', description: 'create: what to do or say when due, e.g. "Remind Ada to call the bank"' },
        at: { type: 'string', description: 'create: ISO 8601 date-time with offset, e.g. 2026-12-01T09:00:00+01:00' },
        in_minutes: { type: 'number', description: 'create: minutes from now' },
        cron: { type: 'string', description: 'create: cron expression, e.g. "0 9 * * 1-5"' },
        timezone: { type: 'string', description: 'IANA zone for cron, e.g. "Europe/Berlin" (default UTC)' },
        id: { type: 'integer', description: 'cancel: the task id' },
      },
      required: ['action'],
      additionalProperties: false,
    },
    assess: (args) => ({
      risk: 'low',
      mutates: args.action !== 'list',
      summary: args.action === 'list' ? 'schedule: list' : args.action === 'cancel' ? `schedule: cancel #${args.id}` : `schedule: ${args.cron ?? args.at ?? `in ${args.in_minutes} min`} "${args.message ?? ''}"`,
    }),
    async execute(args, ctx) {
      if (args.action === 'list') {
        const tasks = await options.store.list(ctx.conversation);
        if (tasks.length === 0) return ok('No scheduled tasks in this conversation.');
        return ok(tasks.map((t) => `#${t.id} next ${new Date(t.nextRun).toISOString()}${t.cron ? ` (cron "${t.cron}"${t.timezone ? ` ${t.timezone}` : ''})` : ''}: ${t.prompt}`).join('\n'));
      }
      if (args.action === 'cancel') {
        if (args.id === undefined) return toolError('cancel needs the task id; list the tasks to find it.');
        return (await options.store.cancel(ctx.conversation, args.id)) ? ok(`Cancelled task #${args.id}.`) : toolError(`There is no active task #${args.id} in this conversation.`);
      }
      const message = args.message?.trim();
      if (!message) return toolError('create needs a message: what to do or say when the task is due.');
      const whens = [args.at, args.in_minutes, args.cron].filter((when) => when !== undefined);
      if (whens.length !== 1) return toolError('create needs exactly one of at, in_minutes or cron.');
      if ((await options.store.activeCount(ctx.conversation)) >= max) return toolError(`This conversation already has ${max} scheduled tasks; cancel some first.`);
      const origin = parseConversationKey(ctx.conversation);
      if (!origin) return toolError('This conversation cannot receive scheduled messages.');
      let nextRun: number;
      if (args.cron !== undefined) {
        const next = nextCronRun(args.cron, args.timezone, new Date(now()));
        if (!next.ok) return toolError(next.error);
        nextRun = next.at;
      } else if (args.in_minutes !== undefined) {
        if (!(args.in_minutes > 0) || args.in_minutes > 525_600) return toolError('in_minutes must be more than 0 and at most a year (525600).');
        nextRun = now() + Math.round(args.in_minutes * 60_000);
      } else {
        nextRun = Date.parse(args.at!);
        if (Number.isNaN(nextRun)) return toolError(`"${args.at}" is not an ISO 8601 date-time; e.g. 2026-12-01T09:00:00Z`);
        if (nextRun <= now()) return toolError(`${args.at} is in the past (now is ${new Date(now()).toISOString()}).`);
      }
      const id = await options.store.add({
        conversation: ctx.conversation,
        origin: { ...origin, sender: { id: ctx.senderId } },
        prompt: message,
        nextRun,
        ...(args.cron === undefined ? {} : { cron: args.cron }),
        ...(args.timezone === undefined ? {} : { timezone: args.timezone }),
      });
      return ok(`Scheduled task #${id}; next run ${new Date(nextRun).toISOString()}${args.cron ? `, then per cron "${args.cron}"` : ''}.`);
    },
  };
}
