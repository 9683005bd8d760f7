/** `[channels.discord]`: the keys, their defaults and an example of each (errors quote it). */
import * as v from 'valibot';
import { policy, text } from '../../src/config/fields.ts';

export const DiscordSchema = v.strictObject({
  token: text('${DISCORD_BOT_TOKEN}'),
  /** REST API base (a local peer in tests); the gateway URL comes from GET /gateway/bot. */
  api_base: v.optional(v.pipe(v.string(), v.regex(/^https?:\/\/\S+$/, 'an http:// or https:// URL'), v.examples(['https://discord.com/api']))),
  ...policy,
});

/** The validated `[channels.discord]` table, defaults filled in. */
export type DiscordConfig = v.InferOutput<typeof DiscordSchema>;
