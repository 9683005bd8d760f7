/** `current_time`: the date and time now, optionally in a given IANA time zone. */
import { ok, toolError, type Tool } from '../tool.ts';

export function createClockTool(now: () => Date = () => new Date()): Tool<{ timezone?: string }> {
  return {
    name: 'current_time',
    description: 'Returns the current date and time. Pass an IANA time zone (e.g. "Europe/Berlin") for local time.',
    parameters: {
      type: 'object',
      properties: { timezone: { type: 'string', description: 'IANA time zone name, e.g. "America/New_York"' } },
      additionalProperties: false,
    },
    async execute(args) {
      const date = now();
      if (args.timezone === undefined) return ok(date.toISOString());
      try {
        const local = date.toLocaleString('sv-SE', { timeZone: args.timezone, hour12: false });
        return ok(`${local} (${args.timezone})`);
      } catch {
        return toolError(`"${args.timezone}" is not a known IANA time zone; try e.g. "Europe/London" or omit it for UTC.`);
      }
    },
  };
}
