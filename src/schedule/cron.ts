/** Cron expressions (five fields, optional time zone) via croner. */
import { Cron } from 'croner';

/** The next time `expression` fires after `after`, or an error sentence. */
export function nextCronRun(expression: string, timezone: string | undefined, after: Date): { ok: true; at: number } | { ok: false; error: string } {
  let cron: Cron;
  try {
    cron = new Cron(expression, { ...(timezone ? { timezone } : {}), paused: true });
  } catch (error) {
    return { ok: false, error: `"${expression}" is not a valid cron expression (${error instanceof Error ? error.message : String(error)}); use five fields, e.g. "0 9 * * 1-5" for 09:00 on weekdays` };
  }
  const next = cron.nextRun(after);
  if (!next) return { ok: false, error: `"${expression}" never fires again` };
  return { ok: true, at: next.getTime() };
}
